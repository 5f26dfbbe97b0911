"""The store's aiosqlite connections: opening them (read-write, or read-only for the
commands that only read), running a function on a connection's thread, closing them.

aiosqlite gives each connection a thread of its own. Two rules keep those threads from
outliving their use: they are daemon threads (a caller that never closes the store, or
whose close never got to run, must not hang the interpreter at exit; SQLite's commits
are atomic, so ending the thread is a crash at worst and nothing acknowledged is lost),
and a connection that fails to open has its thread ended before the error is raised (or
it reports into the event loop after the loop closed: "Event loop is closed").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from reconcile.store.sqlite.location import read_only_uri

__all__ = ["Landing", "close_connections", "in_thread", "open_connection", "open_read_only", "then_in_thread"]

T = TypeVar("T")

#: How long a failed connection's thread is given to end.
_THREAD_STOP_SECONDS = 10.0


def in_thread(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> Coroutine[Any, Any, T]:
    """Run ``fn(sqlite3_connection, *args)`` on the connection's thread (await it)."""
    # aiosqlite runs every call on its connection's own thread; _execute is how its public
    # methods do it. Running a whole batch in one call keeps a commit to one thread hop,
    # and keeps us to aiosqlite's threads (DESIGN: no threads of our own). Its coroutine
    # is handed back as it is: no frame of ours to resume in between.
    running: Coroutine[Any, Any, T] = conn._execute(fn, conn._conn, *args)  # type: ignore[no-untyped-call]  # noqa: SLF001
    return running


class Landing:
    """What :func:`then_in_thread` hands aiosqlite's thread where it expects a call's
    future: the thread asks it for its loop (``get_loop``), then calls ``set_result`` or
    ``set_exception`` through that loop's ``call_soon_threadsafe``, which run ``then``
    with the call's exception (None when it returned) in the turn of the loop that hears
    of the call's end. A task awaiting a future is resumed a turn after that."""

    __slots__ = ("_loop", "_then")

    def __init__(self, loop: asyncio.AbstractEventLoop, then: Callable[[BaseException | None], None]) -> None:
        self._loop, self._then = loop, then

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The loop ``then`` runs in."""
        return self._loop

    def done(self) -> bool:
        """Never before ``then`` ran: aiosqlite asks before it reports."""
        return False

    def set_result(self, _: object) -> None:
        """The call returned."""
        self._then(None)

    def set_exception(self, exc: BaseException) -> None:
        """The call raised ``exc``."""
        self._then(exc)


def then_in_thread(
    conn: aiosqlite.Connection, landing: Landing, fn: Callable[..., object], *args: Any
) -> None:
    """Queue ``fn(sqlite3_connection, *args)`` on the connection's thread, behind what is
    queued there, and return at once; ``landing`` hears of its end (see :class:`Landing`).
    ValueError when the connection is closed, as aiosqlite's own calls raise."""
    # The queue and the item's shape, (future, function), are aiosqlite's own, as in its
    # _execute (0.20 to 0.22: the pin in pyproject.toml); tests/test_group_commit.py
    # commits through here.
    if not conn._running or conn._connection is None:  # noqa: SLF001
        raise ValueError("Connection closed")
    conn._tx.put_nowait((landing, functools.partial(fn, conn._conn, *args)))  # type: ignore[arg-type]  # noqa: SLF001


async def open_connection(
    path: Path, busy_timeout: float, *, read_only: bool = False, immutable: bool = False, shared: bool = False
) -> aiosqlite.Connection:
    """A connection in autocommit mode; ``read_only`` opens with SQLite's ``mode=ro``
    (and ``immutable``: no locking, for a database nobody writes); ``shared`` lets the
    loop's thread use it too, at moments its own thread does not (the writer's)."""
    target = read_only_uri(path, immutable=immutable) if read_only else path
    connecting = aiosqlite.connect(
        target, timeout=busy_timeout, isolation_level=None, uri=read_only, check_same_thread=not shared
    )
    thread = getattr(connecting, "_thread", None)
    if thread is not None:
        thread.daemon = True
    try:
        return await connecting
    except BaseException:
        # aiosqlite has asked its thread to stop; wait until it has.
        if thread is not None and thread.is_alive():
            await asyncio.to_thread(thread.join, _THREAD_STOP_SECONDS)
        raise


async def open_read_only(path: Path, busy_timeout: float) -> aiosqlite.Connection:
    """A read-only connection that can read a database this process may not write."""
    conn = await open_connection(path, busy_timeout, read_only=True)
    try:
        await conn.execute("SELECT count(*) FROM sqlite_master")
    except sqlite3.OperationalError:
        # A WAL database whose folder we may not write, with no -shm file (no writer has
        # it open): SQLite can read it only as immutable, which is what it is to us
        # while no writer exists.
        await close_connections(conn)
        return await open_connection(path, busy_timeout, read_only=True, immutable=True)
    except BaseException:
        await close_connections(conn)
        raise
    return conn


async def close_connections(*connections: aiosqlite.Connection | None) -> None:
    """Close each connection, every one of them even if closing one is cancelled."""
    if not connections:
        return
    first, *rest = connections
    try:
        if first is not None:
            with contextlib.suppress(sqlite3.Error, ValueError):
                await first.close()
    finally:
        await close_connections(*rest)
