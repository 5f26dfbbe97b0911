"""Exclusive claims on a PostgreSQL store (the runner lock): a session advisory lock,
``pg_try_advisory_lock(key)``, held by a connection of the claim's own.

Why a session lock rather than a lease row: the contract's claim "dies with its process,
however it ends". A session lock is released by the server the moment its connection
ends, a SIGKILL included (the kernel closes the socket; the server sees it at once), with
no expiry to wait out and no clock to trust, and nothing is written to the database. It
does not expire: a process that is paused, not dead, keeps its lock (and its connection);
shard leases, which share the work among several processes, are a table of their own
(:mod:`.leasing`), and this claim is only the single-runner lock.

A server restart ends every session, and with it the lock: the claim takes it again on a
new connection (with backoff, for as long as it takes). Another process that took it
first (a ``--standby`` runner) wins; the claim then says so (``lost``, and an error in
the log): the two runners are no longer exclusive, and one of them must be stopped.

Fencing (:meth:`AdvisoryClaim.fence`, what a Runtime asks of its runner lock): the
claim counts the lock's epoch up in ``reconcile_meta`` under the lock
(:func:`~.leasing.take_runner_fence`), and the writes of its controllers carry that epoch:
once another runner took the lock (the first one's session ended: a network cut, a
terminated backend, a pause outlived by its connection) and counted it up in turn, the
first one's writes are refused in their transaction. A fenced claim that takes its lock
again after a lost connection checks the epoch is still its own: if another runner held
the lock meanwhile, the claim is ``lost`` too (whoever holds the lock now), and the
listeners given to :meth:`AdvisoryClaim.on_lost` are told.

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
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

from reconcile.errors import LockedError, StoreError
from reconcile.store.fencing import RUNNER_LOCK, Fence
from reconcile.store.postgres.addressing import connect, connect_raw, errors, masked
from reconcile.store.postgres.leasing import runner_fence, take_runner_fence
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
        self._fence: Fence | None = None
        self._on_lost: list[Callable[[str], None]] = []
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

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(holder)`` when the claim is found lost (see :attr:`lost`)."""
        self._on_lost.append(listener)

    async def fence(self) -> Fence:
        """Fence the writes made under this claim: count the lock's epoch up in the store
        (waiting for the commits a former holder has in flight) and return the fence
        they carry (see the module's story)."""
        if self._fence is None:
            holder = f"{_application().removeprefix('reconcile: ')} ({secrets.token_hex(3)})"
            with errors(self._url):
                epoch = await take_runner_fence(self._connection, holder)
            self._fence = Fence(RUNNER_LOCK, epoch, holder)
        return self._fence

    def _lose(self, holder: str, why: str) -> None:
        self.lost = holder
        LOG.error(
            "%s: the %s lock was lost with its connection and %s: this runner is no longer alone "
            "on the store",
            masked(self._url),
            self._name,
            why,
        )
        for listener in self._on_lost:
            listener(holder)

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
                    self._lose(exc.holder, f"{exc.holder} took it")
                    return
                except _Moved as exc:
                    self._lose(exc.holder, f"{exc.holder} held it meanwhile")
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
            taken = await connection.fetchval("SELECT pg_try_advisory_lock($1)", self._key)
            now = await runner_fence(connection) if taken and self._fence is not None else None
            holder = "" if taken else await _holder(connection, self._key)
        except BaseException:
            connection.terminate()
            raise
        if taken and (self._fence is None or now == (self._fence.holder, self._fence.epoch)):
            return connection
        connection.terminate()  # a lock fenced by another runner meanwhile: not ours to keep
        if taken:
            raise _Moved("another runner" if now is None else f"{now[0]} (epoch {now[1]})")
        raise LockedError(f"{masked(self._url)}: {holder} holds the {self._name} lock", holder=holder)


class _Moved(Exception):  # noqa: N818 - internal signal, never escapes
    """The lock taken again, but its fence names another holder or epoch now."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


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
