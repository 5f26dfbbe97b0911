"""The PostgreSQL store's writer: one task that takes every queued write and commits them
in batches, one transaction each (group commit), on the writer's own connection
(:func:`~reconcile.store.postgres.committing.commit_batch`).

The queue is the SQLite backend's (writes never wait on a lock; a group that must be all
or nothing commits alone; a dead task fails every write loudly). What differs is how the
watches hear of a commit: a block of revisions that follows the head this process knows
(no other process committed in between) is safe to announce at once; otherwise another
process may still hold a lower revision, and the tail asks the database for the safe
head instead (:meth:`~reconcile.store.watching.Tail.refresh`). The commit's ``NOTIFY``
wakes the other processes' watches the same way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from reconcile.errors import StoreError
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import Mutation, WriteResult
from reconcile.store.postgres.addressing import errors
from reconcile.store.postgres.committing import Committed, PendingWrite, commit_batch
from reconcile.store.recent import RecentEvents
from reconcile.store.watching import Tail

__all__ = ["Writer"]

_MAX_BATCH = 4096
_One = tuple[PendingWrite, asyncio.Future[WriteResult]]


class _Group:
    """Writes committed together, all or nothing, in a transaction of their own."""

    __slots__ = ("future", "writes")

    def __init__(self, writes: list[PendingWrite], future: asyncio.Future[list[WriteResult]]) -> None:
        self.writes, self.future = writes, future


class Writer:
    """The queue of writes and the task that commits them (started by :meth:`start`)."""

    def __init__(
        self, url: str, where: str, clock: Callable[[], float], tail: Tail, recent: RecentEvents
    ) -> None:
        self.url = url
        self.path = where  # as messages name the store (the URL, password masked)
        self.channel = ""
        self._clock = clock
        self._tail = tail
        self._recent = recent
        self._pending: collections.deque[_One | _Group] = collections.deque()
        self._wake = asyncio.Event()
        self._connection: Any = None
        self._refreshing: set[asyncio.Task[None]] = set()
        #: The writer task (None until started).
        self.task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failure: BaseException | None = None
        self._closing = False

    def start(self, connection: Any, channel: str) -> None:
        """Start committing on ``connection``, in the running loop."""
        self._connection = connection
        self.channel = channel
        # The loop the store serves (its connections' results come back to it): kept, so
        # a write does not look it up again (get_running_loop() per call adds up).
        self._loop = asyncio.get_running_loop()
        self.task = self._loop.create_task(self._write_loop(), name=f"reconcile-store-writer {self.path}")

    def shut(self) -> None:
        """Queue no more writes (each raises StoreError); what is queued is still committed."""
        self._closing = True
        self._wake.set()

    async def stop(self) -> None:
        """Commit what is queued, then end the task (a dead one already failed its writes)."""
        self.shut()
        if self.task is not None:
            self._wake.set()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.task
        for task in list(self._refreshing):
            task.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task

    def check(self) -> None:
        """StoreError when writes cannot be queued (closed, or the task died)."""
        if self._closing or self.task is None:
            raise StoreError(f"{self.path}: store is closed")
        if self.task.done():
            raise StoreError(f"{self.path}: the writer stopped ({self._failure!r}); reopen the store")

    def submit(
        self, key: ObjectKey, mutation: Mutation, actor: str, user: str | None = None
    ) -> asyncio.Future[WriteResult]:
        """Queue one write; its future."""
        self.check()
        assert self._loop is not None  # started: check() found the task
        future: asyncio.Future[WriteResult] = self._loop.create_future()
        self._pending.append((PendingWrite(key, mutation, actor, user), future))
        self._wake.set()
        return future

    def submit_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], actor: str, user: str | None = None
    ) -> list[asyncio.Future[WriteResult]]:
        """Queue every write at once (no task per write); one future per write."""
        self.check()
        loop = self._loop
        assert loop is not None
        futures: list[asyncio.Future[WriteResult]] = []
        for key, mutation in writes:
            future: asyncio.Future[WriteResult] = loop.create_future()
            self._pending.append((PendingWrite(key, mutation, actor, user), future))
            futures.append(future)
        if futures:
            self._wake.set()
        return futures

    def submit_group(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], actor: str, user: str | None = None
    ) -> asyncio.Future[list[WriteResult]]:
        """Queue writes to commit together, all or nothing; one future for them all (a
        future cancelled before its commit begins stores nothing)."""
        self.check()
        assert self._loop is not None
        future: asyncio.Future[list[WriteResult]] = self._loop.create_future()
        self._pending.append(
            _Group([PendingWrite(key, mutation, actor, user) for key, mutation in writes], future)
        )
        self._wake.set()
        return future

    async def _write_loop(self) -> None:
        # If this task ever dies, no write may wait forever: fail every queued write
        # loudly, and make every later write fail at once (see check()).
        try:
            await self._write_batches()
        except BaseException as exc:
            self._failure = exc
            error = StoreError(f"{self.path}: the writer stopped ({exc!r})")
            while self._pending:
                item = self._pending.popleft()
                future = item.future if isinstance(item, _Group) else item[1]
                if not future.done():
                    future.set_exception(error)
            raise

    async def _write_batches(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                # One turn of the loop first: the writers the last commit released are
                # ready to run and most write again at once (a reconcile's next step,
                # the next document of an apply). Taking only the stragglers that came
                # during the commit would spend a whole commit (an fsync) on a few writes
                # and make everyone else wait for the next one.
                await asyncio.sleep(0)
                first = self._pending[0]
                if isinstance(first, _Group):
                    self._pending.popleft()
                    await self._commit_group(first)
                    continue
                taken: list[_One] = []
                while self._pending and len(taken) < _MAX_BATCH:
                    item = self._pending[0]
                    if isinstance(item, _Group):
                        break  # a group commits alone
                    taken.append(item)
                    self._pending.popleft()
                await self._commit(taken)
            if self._closing:
                return

    async def _run(self, batch: list[PendingWrite], *, all_or_nothing: bool) -> Committed:
        assert self._connection is not None
        with errors(self.url):
            return await commit_batch(
                self._connection,
                batch,
                self._clock(),
                channel=self.channel,
                all_or_nothing=all_or_nothing,
                reserved=self._tail.reserved,
                expected=lambda: self._tail.head + 1,
            )

    def _announce(self, committed: Committed) -> None:
        """Tell the watches: at once when the block follows the known head, else through
        the database's safe head."""
        if not committed.appended:
            return
        if committed.first == self._tail.head + 1:
            self._tail.advance(committed.last)
            return
        task = asyncio.get_running_loop().create_task(self._tail.refresh(), name="reconcile-store-refresh")
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _commit(self, taken: list[_One]) -> None:
        batch = [write for write, _ in taken]
        with self._tail.local_commit():
            try:
                committed = await self._run(batch, all_or_nothing=False)
            except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets it
                for _, future in taken:
                    if not future.done():
                        future.set_exception(exc)
                return
            self._recent.extend(committed.appended)
            for (_, future), result in zip(taken, committed.results, strict=True):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
            self._announce(committed)

    async def _commit_group(self, group: _Group) -> None:
        if group.future.done():  # its writer gave up before the commit began: store nothing
            return
        with self._tail.local_commit():
            try:
                committed = await self._run(group.writes, all_or_nothing=True)
            except Exception as exc:  # noqa: BLE001 - the group's writer gets it
                if not group.future.done():
                    group.future.set_exception(exc)
                return
            self._recent.extend(committed.appended)
            if not group.future.done():
                group.future.set_result([r for r in committed.results if not isinstance(r, BaseException)])
            self._announce(committed)
