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
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from reconcile.store.sqlite.location import read_only_uri

__all__ = ["close_connections", "in_thread", "open_connection", "open_read_only"]

T = TypeVar("T")

#: How long a failed connection's thread is given to end.
_THREAD_STOP_SECONDS = 10.0


async def in_thread(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(sqlite3_connection, *args)`` on the connection's thread."""
    # aiosqlite runs every call on its connection's own thread; _execute is how its public
    # methods do it. Running a whole batch in one call keeps a commit to one thread hop,
    # and keeps us to aiosqlite's threads (DESIGN: no threads of our own).
    result: T = await conn._execute(fn, conn._conn, *args)  # type: ignore[no-untyped-call]  # noqa: SLF001
    return result


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
