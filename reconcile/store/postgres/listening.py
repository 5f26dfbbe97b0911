"""The PostgreSQL store's listening connection: it LISTENs on the store's channel, so a
commit in any process wakes every watch here at once (a slow poll backs it up: a lost
notification delays, never loses), and it comes back by itself when it is lost.

A notification makes the tail read the safe head (:meth:`Tail.refresh_soon`: once at a
time, a notification during a read asks for one more, as our writer's commits after a
gap do). Our own writer's commits are its to announce, unless another
process's was heard since the last read: one that reserved after ours but committed
first became readable only when ours committed.

Lost (a server restart, a cut), the connection is made again in the background with
backoff, for as long as it takes (:mod:`.retrying`); then the head is read once, for
what was announced while nobody listened.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from reconcile.store.postgres.addressing import connect_raw, errors
from reconcile.store.postgres.retrying import LONGEST_WAIT, retrying
from reconcile.store.watching import Tail

__all__ = ["Listener"]

LOG = logging.getLogger("reconcile.store")


class Listener:
    """The listening connection of one open store (:meth:`start`, :meth:`stop`)."""

    def __init__(
        self, url: str, where: str, tail: Tail, writer_pid: Callable[[], int], *, patience: float
    ) -> None:
        self._url, self._where = url, where
        self._tail = tail
        self._writer_pid = writer_pid
        self._patience = patience
        self.channel = ""
        self.connection: Any = None
        self._stopping = False
        self._again: asyncio.Task[None] | None = None
        self._others_heard = False

    async def start(self, channel: str) -> None:
        """Connect and listen on ``channel``, a lost server tried again for up to the
        patience (StoreError naming the server if it cannot)."""
        self.channel = channel
        with errors(self._url, "cannot connect: "):
            await retrying(self._listen, url=self._url, where=self._where, patience=self._patience)

    async def stop(self) -> None:
        """Stop coming back, end the reads in flight, close the connection."""
        self._stopping = True
        if self._again is not None:
            self._again.cancel()
            await asyncio.gather(self._again, return_exceptions=True)
        connection, self.connection = self.connection, None
        if connection is not None:
            try:
                await asyncio.wait_for(connection.close(), 5)
            except Exception:  # noqa: BLE001 - a broken connection is ended the hard way
                connection.terminate()

    async def _listen(self) -> None:
        connection = await connect_raw(self._url)
        try:
            await connection.add_listener(self.channel, self._notified)
            connection.add_termination_listener(self._unheard)
        except BaseException:
            connection.terminate()
            raise
        self.connection = connection

    def _unheard(self, connection: object) -> None:
        """The connection ended: unless stopping, make it again (in the background)."""
        if connection is not self.connection or self._stopping or self._tail.closed:
            return
        self.connection = None
        if self._again is None or self._again.done():
            self._again = asyncio.get_running_loop().create_task(
                self._listening_again(), name="reconcile-store-relisten"
            )

    async def _listening_again(self) -> None:
        while not self._stopping and not self._tail.closed:
            try:
                with errors(self._url, "cannot connect: "):
                    await retrying(self._listen, url=self._url, where=self._where, patience=self._patience)
            except Exception as exc:  # noqa: BLE001 - said, then tried again
                LOG.warning("%s; the poll covers the watches meanwhile", exc)
                await asyncio.sleep(LONGEST_WAIT)
                continue
            LOG.info("%s: listening for commits again", self._where)
            await self._tail.refresh()
            return

    def _notified(self, _connection: object, pid: int, _channel: str, _payload: str) -> None:
        """A commit was announced: read the safe head (see the module's story)."""
        if self._tail.closed:
            return
        writer = self._writer_pid()
        if pid == writer and not self._others_heard:
            return
        self._others_heard = pid != writer
        self._tail.refresh_soon()
