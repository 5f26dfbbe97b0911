"""Shards, leases and fences: how several runners share one store's keys.

Every key belongs to one of the store's shards (:func:`shard_of`: CRC-32 of the key's
text, the same in every process and every Python run, unlike ``hash()``). A runner
holds a *lease* on some shards: a row per shard in the store naming the holder, an
expiry and an *epoch* that grows by one each time the shard changes hands (client-go's
leader election record, one per shard).

A controller reconciles only the keys of shards its runner holds, and every write it
makes carries a :class:`Fence`: the shard of the key being reconciled and the epoch its
runner holds it under. The write is queued with the fence in force when it was
submitted (:data:`FENCE`, a context variable, so nothing between the controller and the
store passes it along by hand), and the store checks it *inside the write's
transaction*: when the shard's row names another holder or another epoch, the write is
refused with :class:`~reconcile.errors.FencedError` and nothing of it is stored. A runner
that was paused (SIGSTOP, a long GC pause, a stalled VM) past its lease therefore
cannot write once another runner took the shard over, whatever its own clock believes.

A backend that does not share (SQLite: one runner, by the runner lock) ignores fences
and leases: :meth:`~reconcile.store.contract.EventStore.lease_shards` returns None
there, and the one runner owns every key.

The runner lock of an unsharded runner fences the same way where the store can lose it
(PostgreSQL: a session lock goes with its connection): its fence names the shard
:data:`RUNNER_LOCK` and the epoch the store counted when this runner took the lock
(:meth:`~reconcile.store.contract.Claim.fence`), and a write under it is refused once
another runner took the lock after it.
"""

from __future__ import annotations

import contextlib
import contextvars
import zlib
from collections.abc import Iterator, Mapping

import attrs

from reconcile.model.meta import ObjectKey

__all__ = [
    "DEFAULT_SHARDS",
    "FENCE",
    "RUNNER_LOCK",
    "Fence",
    "Leases",
    "ShardLease",
    "ShardTable",
    "fenced",
    "shard_of",
]

#: Shards of a store whose lease table is made without saying how many.
DEFAULT_SHARDS = 64
#: The shard a fence of the runner lock names (no shard: every key, the lock's epoch).
RUNNER_LOCK = -1


def shard_of(key: ObjectKey, shards: int) -> int:
    """The shard of ``key`` among ``shards``: stable across processes, machines and runs."""
    text = f"{key.api_group}/{key.kind}/{key.namespace}/{key.name}"
    return zlib.crc32(text.encode("utf-8")) % shards


@attrs.frozen
class Fence:
    """What a controller write carries: the shard of the key being reconciled, the epoch
    the runner holds it under, and the runner (the lease's holder)."""

    shard: int
    epoch: int
    holder: str


#: The fence in force for writes submitted now (None: an unfenced write, as every write
#: of a client that is not a sharded controller).
FENCE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("reconcile_fence", default=None)


@contextlib.contextmanager
def fenced(fence: Fence | None) -> Iterator[None]:
    """Submit every write made inside (in this task, and tasks it starts) under ``fence``."""
    token = FENCE.set(fence)
    try:
        yield
    finally:
        FENCE.reset(token)


@attrs.frozen
class Leases:
    """What one renewal left a runner holding: the store's shard count, each shard held
    with its epoch, how many runners are live, and the fair share
    (``ceil(shards / runners)``): what the runner holds beyond it, it should stop
    working on and release at its next renewal."""

    shards: int
    held: Mapping[int, int]
    runners: int
    fair: int
    #: The latest revision committed when the renewal ran: every write a former holder
    #: of a shard taken now made is at or below it (a later one would be refused), so a
    #: new holder reconciles that shard's keys only once its cache has reached it.
    revision: int = 0


@attrs.frozen
class ShardLease:
    """One row of the lease table, as ``reconcile status`` shows it."""

    shard: int
    holder: str | None
    epoch: int
    #: Seconds until the lease expires (negative: expired), by the database's clock.
    expires_in: float


@attrs.frozen
class ShardTable:
    """The whole lease table: every shard, every live runner (id -> what it says of
    itself: pid and host), and how many fenced writes were refused so far."""

    leases: tuple[ShardLease, ...]
    runners: Mapping[str, str]
    refused: int

    def by_holder(self) -> dict[str, list[int]]:
        """The shards each holder holds (unexpired leases only), in order."""
        held: dict[str, list[int]] = {}
        for lease in self.leases:
            if lease.holder is not None and lease.expires_in > 0:
                held.setdefault(lease.holder, []).append(lease.shard)
        return held
