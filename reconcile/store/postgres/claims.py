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
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
from typing import Any

from reconcile.errors import LockedError
from reconcile.store.postgres.addressing import connect, errors, masked

__all__ = ["AdvisoryClaim", "claim_advisory"]


class AdvisoryClaim:
    """A held claim: the connection holding the lock."""

    def __init__(self, connection: Any) -> None:
        self._connection: Any = connection

    @property
    def held(self) -> bool:
        """Whether it has not been released."""
        return self._connection is not None

    def release(self) -> None:
        """Close the connection (synchronously: the protocol's ``release`` is not a
        coroutine); the server drops the lock with the session."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.terminate()


async def claim_advisory(url: str, key: int, name: str) -> AdvisoryClaim:
    """Claim ``name`` (advisory lock ``key``); LockedError naming the holder if taken."""
    application = f"reconcile: pid {os.getpid()} on {socket.gethostname()}"[:63]
    connection = await connect(url, server_settings={"application_name": application})
    try:
        with errors(url):
            if await connection.fetchval("SELECT pg_try_advisory_lock($1)", key):
                return AdvisoryClaim(connection)
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
