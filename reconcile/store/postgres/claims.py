"""Exclusive claims on a PostgreSQL store (the runner lock): a session advisory lock,
``pg_try_advisory_lock(key)``, held by a connection of the claim's own.

Why a session lock rather than a lease row: the contract's claim "dies with its process,
however it ends". A session lock is released by the server the moment its connection
ends, a SIGKILL included (the kernel closes the socket; the server sees it at once), with
no expiry to wait out and no clock to trust, and nothing is written to the database. It
does not fence: a process that is paused, not dead, keeps its lock (and its connection)
and a lease with an epoch is what fencing needs; shard leases, which share the work
among several processes, are a table of their own (later work), and this claim is only
the single-runner lock.

The holder is named from ``pg_stat_activity``: its ``application_name`` says pid and
host, set by the claiming connection.

``release`` is synchronous (the protocol's), so it can only cut the connection; the
server drops the lock when it notices, a moment later. A claim made next in the same
process first waits (with a deadline) until the sessions of the claims of that lock it
released are gone, so a runner that stops and starts again in one process never finds
its own ghost.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import socket
import time
from typing import Any

from reconcile.errors import LockedError
from reconcile.store.postgres.addressing import connect, errors, masked

__all__ = ["AdvisoryClaim", "claim_advisory"]

#: Seconds a claim waits for the sessions of this process's released claims to end.
_GONE_DEADLINE = 10.0
#: Server pids of the sessions of claims this process released, by lock key: what the
#: next claim of that lock waits out.
_RELEASED: dict[int, list[int]] = {}


class AdvisoryClaim:
    """A held claim: the connection holding the lock."""

    def __init__(self, connection: Any, key: int) -> None:
        self._connection: Any = connection
        self._key = key
        #: The server process of the claim's session (what a later claim waits out).
        self.pid: int = connection.get_server_pid()

    @property
    def held(self) -> bool:
        """Whether it has not been released."""
        return self._connection is not None

    def release(self) -> None:
        """Close the connection (synchronously: the protocol's ``release`` is not a
        coroutine); the server drops the lock with the session."""
        connection, self._connection = self._connection, None
        if connection is not None:
            _RELEASED.setdefault(self._key, []).append(self.pid)
            with contextlib.suppress(Exception):
                connection.terminate()


async def _wait_gone(connection: Any, pids: list[int]) -> None:
    """Wait until the server processes ``pids`` have ended (a deadline, then go on: the
    claim's own answer says what holds the lock)."""
    deadline = time.monotonic() + _GONE_DEADLINE
    while time.monotonic() < deadline:
        alive = await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", pids
        )
        if not alive:
            return
        await asyncio.sleep(0.005)  # the server's sessions: polled, there is nothing to wait on


async def claim_advisory(
    url: str, key: int, name: str, *, released: list[int] | None = None
) -> AdvisoryClaim:
    """Claim ``name`` (advisory lock ``key``), once the sessions ``released`` (server
    pids of claims this store let go) have ended; LockedError naming the holder if taken."""
    application = f"reconcile: pid {os.getpid()} on {socket.gethostname()}"[:63]
    connection = await connect(url, server_settings={"application_name": application})
    try:
        with errors(url):
            released = _RELEASED.pop(key, [])
            if released:
                await _wait_gone(connection, released)
            if await connection.fetchval("SELECT pg_try_advisory_lock($1)", key):
                return AdvisoryClaim(connection, key)
            row = await connection.fetchrow(
                "SELECT a.application_name, a.backend_start FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = $1 LIMIT 1",
                key,
            )
    except BaseException:
        connection.terminate()
        raise
    connection.terminate()
    if row is None:
        holder = "another process"
    else:
        since = row[1].astimezone(datetime.UTC).isoformat(timespec="seconds") if row[1] else "?"
        holder = f"{str(row[0]).removeprefix('reconcile: ')} since {since}"
    raise LockedError(f"{masked(url)}: {holder} holds the {name} lock", holder=holder)
