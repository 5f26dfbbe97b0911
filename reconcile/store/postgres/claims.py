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

A server restart ends every session, and with it the lock: the claim takes it again on a
new connection (with backoff, for as long as it takes). Another process that took it
first (a ``--standby`` runner) wins; the claim then says so (``lost``, and an error in
the log): the two runners are no longer exclusive, and one of them must be stopped.

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
import logging
import os
import socket
import time
from typing import Any

from reconcile.errors import LockedError, StoreError
from reconcile.store.postgres.addressing import connect, connect_raw, errors, masked
from reconcile.store.postgres.retrying import LONGEST_WAIT, retrying

__all__ = ["AdvisoryClaim", "claim_advisory"]

LOG = logging.getLogger("reconcile.store")

#: Seconds a claim waits for the sessions of this process's released claims to end.
_GONE_DEADLINE = 10.0
#: Server pids of the sessions of claims this process released, by lock key: what the
#: next claim of that lock waits out.
_RELEASED: dict[int, list[int]] = {}


class AdvisoryClaim:
    """A held claim: the connection holding the lock. Its connection lost (a server
    restart drops every session lock), it takes the lock again on a new one, trying
    with backoff for as long as it takes; if another process took it first, ``lost``
    says who, and an error is logged."""

    def __init__(self, connection: Any, key: int, url: str = "", name: str = "") -> None:
        self._connection: Any = connection
        self._key = key
        self._url, self._name = url, name
        #: The server process of the claim's session (what a later claim waits out).
        self.pid: int = connection.get_server_pid()
        #: Who took the lock while this claim's connection was lost (None: nobody).
        self.lost: str | None = None
        self._again: asyncio.Task[None] | None = None
        if url:
            connection.add_termination_listener(self._ended)

    @property
    def held(self) -> bool:
        """Whether it has not been released."""
        return self._connection is not None

    def release(self) -> None:
        """Close the connection (synchronously: the protocol's ``release`` is not a
        coroutine); the server drops the lock with the session."""
        connection, self._connection = self._connection, None
        if self._again is not None:
            self._again.cancel()
        if connection is not None:
            _RELEASED.setdefault(self._key, []).append(self.pid)
            with contextlib.suppress(Exception):
                connection.terminate()

    def _ended(self, connection: Any) -> None:
        if connection is not self._connection or self._again is not None:
            return  # released, or already taking it again
        LOG.warning("%s: the %s lock's connection was lost; taking it again", masked(self._url), self._name)
        self._again = asyncio.get_running_loop().create_task(self._take_again(), name="reconcile-claim-again")

    async def _take_again(self) -> None:
        try:
            while self._connection is not None:
                try:
                    with errors(self._url):
                        again = await retrying(self._take, url=self._url, where=masked(self._url))
                except LockedError as exc:
                    self.lost = exc.holder
                    LOG.error(  # noqa: TRY400 - said, not a traceback: the holder is the news
                        "%s: the %s lock was lost with its connection and %s took it: this runner "
                        "is no longer alone on the store; stop one of them",
                        masked(self._url),
                        self._name,
                        exc.holder,
                    )
                    return
                except StoreError as exc:  # the server still away: said, then tried again
                    LOG.warning("%s; the %s lock is tried again", exc, self._name)
                    await asyncio.sleep(LONGEST_WAIT)
                    continue
                if self._connection is None:  # released meanwhile
                    again.terminate()
                    return
                self._connection, self.pid = again, again.get_server_pid()
                again.add_termination_listener(self._ended)
                LOG.info("%s: the %s lock is held again", masked(self._url), self._name)
                return
        finally:
            self._again = None

    async def _take(self) -> Any:
        connection = await connect_raw(self._url, server_settings={"application_name": _application()})
        try:
            if await connection.fetchval("SELECT pg_try_advisory_lock($1)", self._key):
                return connection
            holder = await _holder(connection, self._key)
        except BaseException:
            connection.terminate()
            raise
        connection.terminate()
        raise LockedError(f"{masked(self._url)}: {holder} holds the {self._name} lock", holder=holder)


def _application() -> str:
    return f"reconcile: pid {os.getpid()} on {socket.gethostname()}"[:63]


async def _holder(connection: Any, key: int) -> str:
    """Who holds advisory lock ``key``, as ``pid 4242 on web-1 since ...``."""
    row = await connection.fetchrow(
        "SELECT a.application_name, a.backend_start FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = $1 LIMIT 1",
        key,
    )
    if row is None:
        return "another process"
    since = row[1].astimezone(datetime.UTC).isoformat(timespec="seconds") if row[1] else "?"
    return f"{str(row[0] or '').removeprefix('reconcile: ') or 'another process'} since {since}"


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
    connection = await connect(url, server_settings={"application_name": _application()})
    try:
        with errors(url):
            released = _RELEASED.pop(key, [])
            if released:
                await _wait_gone(connection, released)
            if await connection.fetchval("SELECT pg_try_advisory_lock($1)", key):
                return AdvisoryClaim(connection, key, url, name)
            holder = await _holder(connection, key)
    except BaseException:
        connection.terminate()
        raise
    connection.terminate()
    raise LockedError(f"{masked(url)}: {holder} holds the {name} lock", holder=holder)
