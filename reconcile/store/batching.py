"""The writer queue both backends share: one task that takes every queued write and
commits them in batches, one transaction each (group commit).

Writes are queued with a future each and never wait on a lock: the task takes what is
pending after one turn of the loop, up to ``MAX_BATCH`` writes, and resolves each future
when the commit holding it ends, before the watches hear of it. A group of writes that
must be all or nothing (``write_many``) is committed in a transaction of its own: its
rollback must not take other writers' writes along. If the task ever dies, every queued
write fails loudly and so does every later one: no write waits forever.

A backend's writer subclasses :class:`Batcher` and says only what is its own: how a write
is queued (:meth:`Batcher._pending_write`), how a batch is committed
(:meth:`Batcher._send`, awaited once per commit, inside :meth:`Batcher._errors`), what a
commit returned (:meth:`Batcher._settled`) and how the watches hear of it
(:meth:`Batcher._announce`). A backend whose commit can end in a callback of its own
(SQLite's: the thread's report) overrides :meth:`Batcher._commit` to settle the batch
there (:meth:`Batcher._settle`) and wake the task after the writers it released.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from reconcile.errors import StoreError
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import Mutation, WriteResult
from reconcile.store.recent import EventRow, RecentEvents
from reconcile.store.watching import Tail

__all__ = ["MAX_BATCH", "Batcher"]

MAX_BATCH = 4096

W = TypeVar("W")  # a backend's pending write
C = TypeVar("C")  # what a backend's commit returns

Results = Sequence[WriteResult | BaseException]


class _Group(Generic[W]):
    """Writes committed together, all or nothing, in a transaction of their own."""

    __slots__ = ("future", "writes")

    def __init__(self, writes: list[W], future: asyncio.Future[list[WriteResult]]) -> None:
        self.writes, self.future = writes, future


class Batcher(abc.ABC, Generic[W, C]):
    """The queue of writes and the task that commits them (started by :meth:`begin`)."""

    #: Make one pending write from ``(key, mutation, actor, user)``: the backend's
    #: PendingWrite class itself where it needs nothing more (no call in between).
    _pending_write: Callable[[ObjectKey, Mutation, str, str | None], W]

    def __init__(self, where: str, clock: Callable[[], float], tail: Tail, recent: RecentEvents) -> None:
        self._where = where  # as messages name the store
        self._clock = clock
        self._tail = tail
        self._recent = recent
        self._pending: collections.deque[tuple[W, asyncio.Future[WriteResult]] | _Group[W]] = (
            collections.deque()
        )
        self._wake = asyncio.Event()
        #: The futures of the batch (or group) being committed, off the queue already.
        self._in_flight: list[asyncio.Future[Any]] = []
        #: The writer task (None until started).
        self.task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failure: BaseException | None = None
        self._closing = False

    @abc.abstractmethod
    def _send(self, batch: list[W], *, all_or_nothing: bool) -> Awaitable[C]:
        """Commit ``batch`` in one transaction (awaited once, inside :meth:`_errors`)."""

    @abc.abstractmethod
    def _errors(self) -> contextlib.AbstractContextManager[Any]:
        """Translate the backend's errors around :meth:`_send`."""

    @abc.abstractmethod
    def _settled(self, committed: C) -> tuple[Results, list[EventRow]]:
        """One result per write, and the events appended."""

    @abc.abstractmethod
    def _announce(self, committed: C) -> None:
        """Tell the watches of the commit (its futures are resolved by then)."""

    def begin(self) -> None:
        """Start the task, in the running loop."""
        # The loop the store serves (its connections' results come back to it): kept, so
        # a write does not look it up again (get_running_loop() per call adds up).
        self._loop = asyncio.get_running_loop()
        self.task = self._loop.create_task(self._write_loop(), name=f"reconcile-store-writer {self._where}")

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

    def check(self) -> None:
        """StoreError when writes cannot be queued (closed, or the task died)."""
        if self._closing or self.task is None:
            raise StoreError(f"{self._where}: store is closed")
        if self.task.done():
            raise StoreError(f"{self._where}: the writer stopped ({self._failure!r}); reopen the store")

    def submit(
        self, key: ObjectKey, mutation: Mutation, actor: str, user: str | None = None
    ) -> asyncio.Future[WriteResult]:
        """Queue one write; its future."""
        self.check()
        assert self._loop is not None  # started: check() found the task
        future: asyncio.Future[WriteResult] = self._loop.create_future()
        self._pending.append((self._pending_write(key, mutation, actor, user), future))
        self._wake.set()
        return future

    def submit_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], actor: str, user: str | None = None
    ) -> list[asyncio.Future[WriteResult]]:
        """Queue every write at once (no task per write); one future per write."""
        self.check()
        loop = self._loop
        assert loop is not None
        make = self._pending_write
        futures: list[asyncio.Future[WriteResult]] = []
        for key, mutation in writes:
            future: asyncio.Future[WriteResult] = loop.create_future()
            self._pending.append((make(key, mutation, actor, user), future))
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
        make = self._pending_write
        self._pending.append(_Group([make(key, mutation, actor, user) for key, mutation in writes], future))
        self._wake.set()
        return future

    async def _write_loop(self) -> None:
        # If this task ever dies, no write may wait forever: fail every queued write
        # loudly, and make every later write fail at once (see check()).
        try:
            await self._write_batches()
        except BaseException as exc:
            self._failure = exc
            error = StoreError(f"{self._where}: the writer stopped ({exc!r})")
            # The batch being committed when it stopped too (taken off the queue already):
            # a write settled by then keeps its answer.
            for future in self._in_flight:
                if not future.done():
                    future.set_exception(error)
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
            # One turn of the loop before each batch: the writers the last commit released
            # are ready to run and most write again at once (a reconcile's next step, the
            # next document of an apply). Taking only the stragglers that came during the
            # commit would spend a whole commit (an fsync) on a few writes and make
            # everyone else wait for the next one. The turn is taken right after the
            # commit, before the queue is looked at: the released writers run ahead of
            # this task in that same turn, so a lone writer's next write is taken at once,
            # with no turn spent waking this task for it.
            await asyncio.sleep(0)
            while self._pending:
                first = self._pending[0]
                if isinstance(first, _Group):
                    self._pending.popleft()
                    self._in_flight = [first.future]
                    await self._commit_group(first)
                else:
                    taken: list[tuple[W, asyncio.Future[WriteResult]]] = []
                    while self._pending and len(taken) < MAX_BATCH:
                        item = self._pending[0]
                        if isinstance(item, _Group):
                            break  # a group commits alone
                        taken.append(item)
                        self._pending.popleft()
                    self._in_flight = [future for _, future in taken]
                    if await self._commit(taken):
                        self._in_flight = []
                        continue  # the writers it released have run already
                self._in_flight = []
                await asyncio.sleep(0)
            if self._closing:
                return

    async def _commit(self, taken: list[tuple[W, asyncio.Future[WriteResult]]]) -> bool:
        """Commit a batch and settle its writes; True when this task was resumed only
        after the writers it released had run (a backend whose commit ends in a callback
        of its own, :meth:`_settle` then waking this task), so no turn is needed before
        the next batch."""
        batch = [write for write, _ in taken]
        with self._tail.local_commit():
            try:
                with self._errors():
                    committed = await self._send(batch, all_or_nothing=False)
            except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets it
                self._fail(taken, exc)
                return False
            self._settle(taken, committed)
            return False

    def _fail(self, taken: list[tuple[W, asyncio.Future[WriteResult]]], exc: BaseException) -> None:
        """Every write of a batch that failed as a whole gets ``exc``."""
        for _, future in taken:
            if not future.done():
                future.set_exception(exc)

    def _settle(self, taken: list[tuple[W, asyncio.Future[WriteResult]]], committed: C) -> None:
        """Resolve each write of a committed batch, then tell the watches."""
        results, appended = self._settled(committed)
        self._recent.extend(appended)
        for (_, future), result in zip(taken, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        self._announce(committed)

    async def _commit_group(self, group: _Group[W]) -> None:
        if group.future.done():  # its writer gave up before the commit began: store nothing
            return
        with self._tail.local_commit():
            try:
                with self._errors():
                    committed = await self._send(group.writes, all_or_nothing=True)
            except Exception as exc:  # noqa: BLE001 - the group's writer gets it
                if not group.future.done():
                    group.future.set_exception(exc)
                return
            results, appended = self._settled(committed)
            self._recent.extend(appended)
            if not group.future.done():
                group.future.set_result([r for r in results if not isinstance(r, BaseException)])
            self._announce(committed)
