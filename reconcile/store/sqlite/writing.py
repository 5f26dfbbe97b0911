"""The SQLite store's writer: the shared group-commit queue
(:class:`~reconcile.store.batching.Batcher`) committing each batch in one transaction
and one fsync: prepared on the loop under the write lock
(:func:`~reconcile.store.sqlite.committing.prepare_batch`), written and committed on the
writer connection's thread (:func:`~reconcile.store.sqlite.committing.commit_batch`).
A commit's head is the database's: the watches hear of it at once.

A batch's commit ends in a callback rather than in the writer task: the thread's report
of its end (:class:`~reconcile.store.sqlite.connections.Landing`) resolves the writers'
futures and tells the watches in the turn of the loop that hears of it, then wakes the
task, which runs behind the writers it released and takes their next writes at once. A
lone write costs two turns of the loop, as any call awaited on aiosqlite's thread does.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from reconcile.errors import StoreError
from reconcile.store.batching import Batcher, Results
from reconcile.store.contract import WriteResult
from reconcile.store.finishing import finish
from reconcile.store.recent import EventRow, RecentEvents
from reconcile.store.sqlite.committing import (
    PendingWrite,
    Prepared,
    begin,
    begin_waiting,
    commit_batch,
    prepare_batch,
    rollback,
    waiting,
)
from reconcile.store.sqlite.connections import Landing, in_thread, then_in_thread
from reconcile.store.sqlite.space import disk_full
from reconcile.store.watching import Tail

__all__ = ["Writer", "store_errors"]

T = TypeVar("T")


class store_errors:  # noqa: N801 - used as the function it was: ``with store_errors(path):``
    """Translate sqlite3's errors at the store's boundary, as httpcore's
    ``map_exceptions`` does: a StoreError naming the database, raised from the original
    (a full disk says so). A class, not a generator: the writer enters one instance at
    every commit (a generator's context manager is made anew at each ``with``)."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if isinstance(exc, sqlite3.Error):
            raise self.translated(exc) from exc

    def translated(self, exc: BaseException) -> BaseException:
        """``exc`` as the store raises it: a sqlite3 error as a StoreError naming the
        database (its cause kept), anything else as it is."""
        if not isinstance(exc, sqlite3.Error):
            return exc
        full = "disk full: " if disk_full(exc, self.path) else ""
        error = StoreError(f"{self.path}: {full}{exc}")
        error.__cause__ = exc
        return error


def _nothing(_: sqlite3.Connection) -> None:
    """A call that only marks its turn on the connection's thread."""


class Writer(Batcher[PendingWrite, Prepared]):
    """The queue of writes and the task that commits them (started by :meth:`start`)."""

    _pending_write = PendingWrite  # the class itself: no call in between

    def __init__(
        self, path: Path, clock: Callable[[], float], tail: Tail, recent: RecentEvents, busy_timeout: float
    ) -> None:
        super().__init__(str(path), clock, tail, recent)
        self.path = path
        self._wait_ms = int(busy_timeout * 1000)
        self._store_errors = store_errors(path)
        self._connection: aiosqlite.Connection | None = None
        # A batch is prepared on the loop with the writer connection itself, between
        # BEGIN and the thread's COMMIT: nothing else may use the connection meanwhile.
        self._exclusive = asyncio.Lock()

    def start(self, connection: aiosqlite.Connection) -> None:
        """Start committing on ``connection`` (opened ``shared``), in the running loop.
        The connection waits for no lock from now on unless asked (:func:`waiting`): a
        batch's ``BEGIN`` on the loop must not wait."""
        connection._conn.execute("PRAGMA busy_timeout = 0")  # noqa: SLF001 - aiosqlite's own connection
        self._connection = connection
        self.begin()

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(sqlite3_connection, *args)`` on the writer's thread between two commits."""
        async with self._exclusive:
            return await self._on_thread(waiting, self._wait_ms, fn, *args)

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(sqlite3_connection, *args)`` on the connection's thread, awaited to its end
        even when the caller is cancelled meanwhile (then re-raised): the thread cannot be
        stopped, and the loop must not use the connection (under :attr:`_exclusive`)
        while the thread still does."""
        connection = self._connection
        assert connection is not None
        # Awaited in this task, not in a task of its own behind a shield: that took three
        # more turns of the loop per call (the task's start, its end, the shield's
        # callback). Only a cancellation needs the wait below.
        try:
            return await in_thread(connection, fn, *args)
        except asyncio.CancelledError:
            # The thread runs its calls in order: once a call queued now has run, fn is done.
            await finish(asyncio.ensure_future(in_thread(connection, _nothing)))
            raise

    async def _send(self, batch: list[PendingWrite], *, all_or_nothing: bool) -> Prepared:
        # A group of write_many's: committed and awaited in this task (see _commit for
        # the batches of single writes).
        async with self._exclusive:
            prepared = await self._prepare(batch, all_or_nothing=all_or_nothing)
            if prepared.events:
                await self._on_thread(commit_batch, prepared)
            return prepared

    async def _prepare(self, batch: list[PendingWrite], *, all_or_nothing: bool) -> Prepared:
        """Take the write lock and prepare ``batch`` under it (holding :attr:`_exclusive`);
        a batch that writes nothing is rolled back at once."""
        connection = self._connection
        assert connection is not None
        conn: sqlite3.Connection = connection._conn  # noqa: SLF001 - aiosqlite's own connection
        try:
            if not begin(conn):
                await self._on_thread(begin_waiting, self._wait_ms)
            watched = self._tail.watches > 0  # else the recent window is left alone
            prepared = prepare_batch(
                conn, batch, self._clock(), all_or_nothing=all_or_nothing, watched=watched
            )
        except BaseException:
            rollback(conn)  # a cancellation once the lock was taken on the thread too
            raise
        if not prepared.events:  # nothing written: nothing to wait for on the disk
            rollback(conn)
        return prepared

    async def _commit(self, taken: list[tuple[PendingWrite, asyncio.Future[WriteResult]]]) -> bool:
        # The batch's commit ends in a callback, not in this task: the thread's report
        # runs _settle in the turn of the loop that hears of it (the writers' futures,
        # then the watches), and wakes this task last, behind the writers it released.
        # Awaiting the thread's future here took a turn more per commit (this task
        # resumed, then the writers), and the writer task a step more (a lone write took
        # three turns of the loop, two now, as a plain awaited call on aiosqlite's thread).
        connection = self._connection
        loop = self._loop
        assert connection is not None
        assert loop is not None
        batch = [write for write, _ in taken]
        with self._tail.local_commit():
            async with self._exclusive:
                try:
                    with self._store_errors:
                        prepared = await self._prepare(batch, all_or_nothing=False)
                except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets it
                    self._fail(taken, exc)
                    return False
                if not prepared.events:
                    self._settle(taken, prepared)
                    return False
                landed = loop.create_future()

                def then(exc: BaseException | None) -> None:
                    try:
                        if exc is None:
                            self._settle(taken, prepared)
                        else:
                            self._fail(taken, self._store_errors.translated(exc))
                    except Exception as error:  # noqa: BLE001 - this task raises it: the writer stops loudly
                        if not landed.done():
                            landed.set_exception(error)
                    if not landed.done():  # (this task may have been cancelled meanwhile)
                        landed.set_result(None)

                try:
                    then_in_thread(connection, Landing(loop, then), commit_batch, prepared)
                except Exception as exc:  # noqa: BLE001 - (closed under us) every waiter gets it
                    self._fail(taken, exc)
                    with contextlib.suppress(Exception):  # (closing ends the transaction anyway)
                        rollback(connection._conn)  # noqa: SLF001 - aiosqlite's own connection
                    return False
                try:
                    await landed
                except asyncio.CancelledError:
                    # The thread cannot be stopped: the connection stays ours until the
                    # commit's call ended (a call queued behind it has run by then).
                    await finish(asyncio.ensure_future(in_thread(connection, _nothing)))
                    raise
                return True

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return self._store_errors

    def _settled(self, committed: Prepared) -> tuple[Results, list[EventRow]]:
        return committed.results, committed.appended

    def _announce(self, committed: Prepared) -> None:
        if committed.events:
            self._tail.advance(committed.head)
