"""The SQLite store's writer: the shared group-commit queue
(:class:`~reconcile.store.batching.Batcher`) committing each batch in one transaction
and one fsync, on the writer connection's thread
(:func:`~reconcile.store.sqlite.committing.commit_batch`). A commit's head is the
database's: the watches hear of it at once.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import aiosqlite

from reconcile.errors import StoreError
from reconcile.store.batching import Batcher, Results
from reconcile.store.recent import EventRow, RecentEvents
from reconcile.store.sqlite.committing import PendingWrite, commit_batch
from reconcile.store.sqlite.connections import in_thread
from reconcile.store.sqlite.space import disk_full
from reconcile.store.watching import Tail

__all__ = ["Writer", "store_errors"]

_Committed = tuple[int, Results, list[EventRow]]


@contextlib.contextmanager
def store_errors(path: Path) -> Iterator[None]:
    """Translate sqlite3's errors at the store's boundary, as httpcore's
    ``map_exceptions`` does: a StoreError naming the database, raised from the original
    (a full disk says so)."""
    try:
        yield
    except sqlite3.Error as exc:
        full = "disk full: " if disk_full(exc, path) else ""
        raise StoreError(f"{path}: {full}{exc}") from exc


class Writer(Batcher[PendingWrite, _Committed]):
    """The queue of writes and the task that commits them (started by :meth:`start`)."""

    _pending_write = PendingWrite  # the class itself: no call in between

    def __init__(self, path: Path, clock: Callable[[], float], tail: Tail, recent: RecentEvents) -> None:
        super().__init__(str(path), clock, tail, recent)
        self.path = path
        self._connection: aiosqlite.Connection | None = None

    def start(self, connection: aiosqlite.Connection) -> None:
        """Start committing on ``connection``, in the running loop."""
        self._connection = connection
        self.begin()

    def _send(self, batch: list[PendingWrite], *, all_or_nothing: bool) -> Awaitable[_Committed]:
        # The thread's coroutine itself, not one wrapping it: one await per commit.
        assert self._connection is not None
        if all_or_nothing:
            commit = functools.partial(commit_batch, all_or_nothing=True)
            return in_thread(self._connection, commit, batch, self._clock())
        return in_thread(self._connection, commit_batch, batch, self._clock())

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return store_errors(self.path)

    def _settled(self, committed: _Committed) -> tuple[Results, list[EventRow]]:
        return committed[1], committed[2]

    def _announce(self, committed: _Committed) -> None:
        self._tail.advance(committed[0])
