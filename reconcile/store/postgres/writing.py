"""The PostgreSQL store's writer: one task that takes every queued write and commits them
in batches, one transaction each (group commit), on the writer's own connection
(:func:`~reconcile.store.postgres.committing.commit_batch`).

The queue is the one both backends share (:class:`~reconcile.store.batching.Batcher`:
writes never wait on a lock; a group that must be all or nothing commits alone; a dead
task fails every write loudly). What differs is how the
watches hear of a commit: a block of revisions that follows the head this process knows
(no other process committed in between) is safe to announce at once; otherwise another
process may still hold a lower revision, and the tail asks the database for the safe
head instead (:meth:`~reconcile.store.watching.Tail.refresh`). The commit's ``NOTIFY``
wakes the other processes' watches the same way.

A lost connection is made anew and the batch tried again (:mod:`.retrying`); a commit
whose answer was lost is found out by its idempotency key before anything runs again,
so a write is never lost nor doubled.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from typing import Any

from reconcile.errors import StoreUnavailableError
from reconcile.model.meta import ObjectKey
from reconcile.store.batching import Batcher, Results
from reconcile.store.contract import Mutation
from reconcile.store.fencing import FENCE, RUNNER_LOCK
from reconcile.store.postgres.addressing import errors
from reconcile.store.postgres.committing import Committed, PendingWrite, commit_batch
from reconcile.store.postgres.leasing import record_refusals
from reconcile.store.postgres.retrying import PATIENCE, Link, after_failure, committed, retrying
from reconcile.store.recent import EventRow, RecentEvents
from reconcile.store.watching import Tail

__all__ = ["Writer"]

LOG = logging.getLogger("reconcile.store")

_NO_ERRORS = contextlib.nullcontext()  # _send translates its own


class Writer(Batcher[PendingWrite, Committed]):
    """The queue of writes and the task that commits them (started by :meth:`start`)."""

    def __init__(
        self,
        url: str,
        where: str,
        clock: Callable[[], float],
        tail: Tail,
        recent: RecentEvents,
        *,
        patience: float = PATIENCE,
    ) -> None:
        super().__init__(where, clock, tail, recent)
        self.url = url
        self.path = where  # as messages name the store (the URL, password masked)
        self.channel = ""
        #: The writer's connection, made anew after a fault.
        self.link = Link(url)
        self._patience = patience
        #: The idempotency key of the last commit known to have committed (the next
        #: commit deletes it).
        self._last_token: str | None = None
        #: Writes refused by their fence so far (this process's count).
        self.fenced = 0

    def start(self, connection: Any, channel: str) -> None:
        """Start committing on ``connection``, in the running loop."""
        self.link.connection = connection
        self.channel = channel
        self.begin()

    def _pending_write(
        self, key: ObjectKey, mutation: Mutation, actor: str, user: str | None
    ) -> PendingWrite:
        # Under the fence the write was submitted with (a sharded controller's).
        return PendingWrite(key, mutation, actor, user, FENCE.get())

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return _NO_ERRORS

    def _settled(self, committed: Committed) -> tuple[Results, list[EventRow]]:
        return committed.results, committed.appended

    async def _send(self, batch: list[PendingWrite], *, all_or_nothing: bool) -> Committed:
        staged: list[Committed] = []  # what the attempt in flight is about to commit
        token = ""
        now = self._clock()

        async def attempt() -> Committed:
            nonlocal token
            connection = await self.link.get()
            try:
                if staged:
                    # The last attempt's COMMIT went out and its answer was lost.
                    if await committed(connection, token):
                        return staged[-1]
                    staged.clear()
                token = secrets.token_hex(16)
                return await commit_batch(
                    connection,
                    batch,
                    now,
                    channel=self.channel,
                    all_or_nothing=all_or_nothing,
                    reserved=self._tail.reserved,
                    expected=lambda: self._tail.head + 1,
                    token=token,
                    forget=self._last_token,
                    staged=staged.append,
                )
            except BaseException as exc:
                instead = after_failure(connection, exc)
                if instead is None:
                    raise
                raise instead from exc

        try:
            with errors(self.url):
                result = await retrying(attempt, url=self.url, where=self.path, patience=self._patience)
        except StoreUnavailableError as exc:
            if staged:  # given up while asking: say so, never guess
                raise StoreUnavailableError(
                    f"{exc}; whether the last commit of these writes happened is unknown: read them again"
                ) from None
            raise
        if result.appended:
            self._last_token = token
        if result.fenced:
            await self._record(result.fenced)
        return result

    async def _record(self, refused: list[PendingWrite]) -> None:
        """Keep the refusals in the store (``reconcile_fenced``) and say them: a paused
        runner that lost its leases must be visible afterwards, not only refused."""
        self.fenced += len(refused)
        shards = sorted({w.fence.shard for w in refused if w.fence is not None})
        moved = (
            "the runner lock"
            if shards == [RUNNER_LOCK]
            else f"the lease of shard(s) {', '.join(map(str, shards))}"
        )
        LOG.warning("%s: %d write(s) refused: %s moved on to another runner", self.path, len(refused), moved)
        try:
            with errors(self.url):
                await record_refusals(
                    await self.link.get(), [(w.fence, w.key, w.actor) for w in refused if w.fence is not None]
                )
        except Exception as exc:  # noqa: BLE001 - the refusal stands; only its record failed
            LOG.warning("%s: could not record %d refused write(s): %s", self.path, len(refused), exc)

    def _announce(self, committed: Committed) -> None:
        """Tell the watches: at once when the block follows the known head, else through
        the database's safe head."""
        if not committed.appended:
            return
        if committed.first == self._tail.head + 1:
            self._tail.advance(committed.last)
            return
        self._tail.refresh_soon()
