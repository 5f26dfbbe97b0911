"""Health and readiness of a Runtime, for a service's probes (controller-runtime's
``healthz``/``readyz``, kopf's liveness endpoint).

* **ready**: every controller's cache holds its first list and its watch is running, so
  what is applied now gets reconciled;
* **healthy**: no controller is waiting to be restarted after a crash and no informer is
  waiting to restart a broken watch.

A snapshot reads counters the engine keeps anyway: no store query, no lock.
"""

from __future__ import annotations

import attrs

__all__ = ["ControllerHealth", "Health", "ShardingHealth"]


@attrs.frozen
class ControllerHealth:
    """One controller: its cache, its watch, its supervision and its queue."""

    name: str
    #: The informer's first list is in the cache.
    synced: bool
    #: The informer lists or watches (False while it waits to restart after a failure).
    watching: bool
    #: The controller's task runs (False while the supervisor waits to restart it).
    running: bool
    crashes: int
    watch_failures: int
    cached: int
    depth: int
    processing: int
    waiting: int
    #: How long the oldest reconcile in flight has been running, in seconds.
    longest_running: float

    def problems(self) -> list[str]:
        """What keeps this controller from being ready or healthy, in words."""
        found = []
        if not self.running:
            found.append(f"{self.name}: restarting after a crash ({self.crashes} so far)")
        if not self.watching:
            found.append(f"{self.name}: watch broken, restarting ({self.watch_failures} failures so far)")
        elif not self.synced:
            found.append(f"{self.name}: cache not synced yet")
        return found


@attrs.frozen
class ShardingHealth:
    """What a runner holds, for ``Runtime.health()``."""

    #: The runner's id (the leases' holder; the ``user`` of its controllers' events).
    runner: str
    #: The store's shard count.
    shards: int
    #: The shards this runner holds, in order.
    held: tuple[int, ...]
    #: Of those, the ones it no longer works on and releases at its next renewal.
    draining: tuple[int, ...]
    #: Live runners at the last renewal.
    runners: int
    #: Seconds since the last successful renewal.
    since_renewal: float


@attrs.frozen
class Health:
    """A snapshot of a Runtime."""

    #: The runtime is started and every controller is synced, watching and running.
    ready: bool
    #: No controller or watch is waiting to be restarted (a starting runtime is healthy).
    healthy: bool
    controllers: tuple[ControllerHealth, ...]
    #: The shards this runner holds (None: not sharing the store with other runners).
    sharding: ShardingHealth | None = None

    @classmethod
    def of(
        cls,
        controllers: tuple[ControllerHealth, ...],
        *,
        started: bool,
        sharding: ShardingHealth | None = None,
    ) -> Health:
        """Sum up the controllers."""
        healthy = all(c.running and c.watching for c in controllers)
        ready = started and all(c.running and c.synced and c.watching for c in controllers)
        return cls(ready=ready, healthy=healthy, controllers=controllers, sharding=sharding)

    def problems(self) -> list[str]:
        """Every controller's problems (empty when ready)."""
        return [problem for c in self.controllers for problem in c.problems()]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, for a probe endpoint."""
        return {
            "ready": self.ready,
            "healthy": self.healthy,
            "problems": self.problems(),
            "controllers": [attrs.asdict(c) for c in self.controllers],
            "sharding": None if self.sharding is None else attrs.asdict(self.sharding),
        }
