"""Which keys a controller reconciles when several processes share a store: a
:class:`KeyGate` (the Runtime's :class:`~reconcile.runtime.sharding.Sharding`) admits
the keys of the shards its process holds and names the fence their writes carry."""

from __future__ import annotations

from typing import Protocol

from reconcile.model.meta import ObjectKey
from reconcile.store.fencing import Fence

__all__ = ["KeyGate"]


class KeyGate(Protocol):
    """Which keys this process reconciles, and the fence their writes carry."""

    def owns(self, key: ObjectKey) -> bool:
        """Whether this process reconciles ``key`` now."""

    def fence(self, key: ObjectKey) -> Fence | None:
        """The fence a reconcile of ``key`` writes under."""

    def minimum(self, key: ObjectKey) -> int:
        """The revision the cache must have reached before ``key`` is reconciled (its
        shard's former holder's last writes; 0: none)."""
