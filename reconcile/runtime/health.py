"""Health and readiness of a Runtime, for a service's probes (controller-runtime's
``healthz``/``readyz``, kopf's liveness endpoint).

* **ready**: every controller's cache holds its first list and its watch is running, so
  what is applied now gets reconciled;
* **healthy**: no controller is waiting to be restarted after a crash and no informer is
  waiting to restart a broken watch.

A store that fails the reconciles' writes (its server down or read-only, a full disk)
makes a runtime not ready, with the store's message among the problems, but not
unhealthy: the engine retries with backoff and resumes on its own once the store takes
writes again, so a liveness probe restarting it would only add a crash loop.

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
    #: The store failure its reconciles meet now (a server down or read-only, a full
    #: disk), retried with backoff, until they succeed again (None: none).
    store_failure: str | None = None

    def problems(self) -> list[str]:
        """What keeps this controller from being ready or healthy, in words."""
        found = []
        if self.store_failure is not None:
            found.append(f"{self.name}: the store failed, retrying with backoff: {self.store_failure}")
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
    #: Why this runner stopped reconciling: its runner lock lost to another runner (None:
    #: not lost). Neither ready nor healthy then: restarted as a standby, it waits its turn.
    lock_lost: str | None = None

    @classmethod
    def of(
        cls,
        controllers: tuple[ControllerHealth, ...],
        *,
        started: bool,
        sharding: ShardingHealth | None = None,
        lock_lost: str | None = None,
    ) -> Health:
        """Sum up the controllers."""
        healthy = lock_lost is None and all(c.running and c.watching for c in controllers)
        # A store that refuses writes (down, read-only) makes a runner not ready, yet
        # healthy: restarting it would not help, and it resumes on its own.
        ready = (
            started
            and lock_lost is None
            and all(c.running and c.synced and c.watching and c.store_failure is None for c in controllers)
        )
        return cls(
            ready=ready, healthy=healthy, controllers=controllers, sharding=sharding, lock_lost=lock_lost
        )

    def problems(self) -> list[str]:
        """The lost runner lock, if so, and every controller's problems (empty when ready)."""
        lost = [] if self.lock_lost is None else [self.lock_lost]
        return lost + [problem for c in self.controllers for problem in c.problems()]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, for a probe endpoint."""
        return {
            "ready": self.ready,
            "healthy": self.healthy,
            "problems": self.problems(),
            "controllers": [attrs.asdict(c) for c in self.controllers],
            "sharding": None if self.sharding is None else attrs.asdict(self.sharding),
        }
