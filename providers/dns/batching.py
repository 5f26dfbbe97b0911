"""Coalescing the changes many concurrent reconciles make to one zone into few UPDATE
messages, the way the store's group commit coalesces writes.

A change waits at most ``window`` seconds (or until ``size`` changes are waiting) for
others to share its message, and while a message of the zone is in flight, the changes
that arrive wait for it to be answered and then go together in the next (a server applies
one zone's updates one at a time anyway: this is the group commit's pipelining). When the
combined message's prerequisites fail, each change is sent again on its own, so that only
the one somebody else's edit conflicts with fails. Every caller gets its own outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import dns.update

from providers.dns.wire import PrerequisiteFailedError

__all__ = ["Batcher", "Change"]

#: Adds a change's prerequisites and updates to a message.
Change = Callable[[dns.update.UpdateMessage], None]


class Batcher:
    """The pending changes of one zone, and the task that sends them."""

    def __init__(
        self,
        make: Callable[[], dns.update.UpdateMessage],
        send: Callable[[dns.update.UpdateMessage], Awaitable[None]],
        *,
        window: float,
        size: int,
    ) -> None:
        self._make = make
        self._send = send
        self.window = window
        self.size = size
        self._pending: list[tuple[Change, asyncio.Future[None]]] = []
        self._timer: asyncio.Task[None] | None = None
        #: The zone's messages in flight: while there is one, what comes waits for the next.
        self._flushing: set[asyncio.Task[None]] = set()
        #: UPDATE messages sent, and how many changes they carried (for benchmarks).
        self.messages = 0
        self.changes = 0

    @property
    def waiting(self) -> int:
        """Changes waiting for a message."""
        return len(self._pending)

    async def submit(self, change: Change) -> None:
        """Send ``change`` (with others, when they come within the window); raise what its
        own outcome was (PrerequisiteFailedError when somebody else's edit conflicts)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((change, future))
        if self._flushing:
            pass  # goes with the next message, when the one in flight is answered
        elif len(self._pending) >= self.size:
            self._flush_now()
        elif self._timer is None:
            self._timer = asyncio.create_task(self._after_window())
        await future

    async def _after_window(self) -> None:
        await asyncio.sleep(self.window)
        self._timer = None
        self._flush_now()

    def _flush_now(self, *, force: bool = False) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing and not force:
            return  # (the answer to the message in flight sends the rest)
        batch, self._pending = self._pending[: self.size], self._pending[self.size :]
        if batch:
            task = asyncio.create_task(self._flush(batch))
            self._flushing.add(task)
            task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._flushing.discard(task)
        if self._pending and not self._flushing:
            self._flush_now()  # what came while it was in flight: the next message, at once

    async def _flush(self, batch: list[tuple[Change, asyncio.Future[None]]]) -> None:
        try:
            await self._send_together([change for change, _ in batch])
        except PrerequisiteFailedError as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            # One of them conflicts: each on its own, so only that one fails.
            await asyncio.gather(*(self._alone(change, future) for change, future in batch))
            return
        except BaseException as exc:  # noqa: BLE001 - every caller hears it
            for _, future in batch:
                _settle(future, exc)
            return
        for _, future in batch:
            _settle(future, None)

    async def _alone(self, change: Change, future: asyncio.Future[None]) -> None:
        try:
            await self._send_together([change])
        except BaseException as exc:  # noqa: BLE001 - the caller hears it
            _settle(future, exc)
        else:
            _settle(future, None)

    async def _send_together(self, changes: list[Change]) -> None:
        message = self._make()
        for change in changes:
            change(message)
        self.messages += 1
        self.changes += len(changes)
        await self._send(message)

    async def close(self) -> None:
        """Send what is pending and wait for the sends in flight."""
        self._flush_now(force=True)
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._flushing, return_exceptions=True)


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)
