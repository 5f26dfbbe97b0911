"""How ready a Runtime is: its health for a service's probes, where convergence stands,
and waits for it or for one object to be Ready (a base class of
:class:`~reconcile.runtime.running.Runtime`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from reconcile.api.client import Client
from reconcile.controller.clocks import Clock
from reconcile.controller.controlling import Controller
from reconcile.errors import LockedError
from reconcile.model.kinds import Kind
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.runtime.converging import Convergence, Tracker, ready_from_store
from reconcile.runtime.health import ControllerHealth, Health
from reconcile.runtime.hosting import last_failure
from reconcile.runtime.sharding import Sharding
from reconcile.runtime.supervising import Supervisor

__all__ = ["Readiness"]


class Readiness:
    """A Runtime's health and convergence (what the Runtime sets in its ``__init__`` is
    declared here)."""

    clock: Clock
    controllers: dict[str, Controller]
    supervisor: Supervisor
    tracker: Tracker
    sharding: Sharding | None
    lock_lost: LockedError | None
    _client: Client | None

    if TYPE_CHECKING:

        @property
        def client(self) -> Client:
            """The Runtime's client (:attr:`Runtime.client`)."""

    def _controller_for(self, api_group: str, kind: str) -> Controller | None:
        return next(
            (c for c in self.controllers.values() if (c.kind.api_group, c.kind.kind) == (api_group, kind)),
            None,
        )

    def health(self) -> Health:
        """Readiness and health, for a service's probes: every controller synced, watching
        and running (see :mod:`reconcile.runtime.health`). Cheap: no store query."""
        controllers = []
        for name, controller in self.controllers.items():
            informer, queue = controller.informer, controller.queue
            stats, cache = queue.statistics(), informer.statistics()
            controllers.append(
                ControllerHealth(
                    name=name,
                    synced=informer.synced.is_set(),
                    watching=not informer.failing,
                    running=name not in self.supervisor.down,
                    crashes=self.supervisor.crashes[name],
                    watch_failures=cache.watch_failures,
                    cached=cache.objects,
                    depth=stats.depth,
                    processing=stats.processing,
                    waiting=stats.waiting,
                    longest_running=max(queue.processing_times(), default=0.0),
                    store_failure=controller.store_failure,
                )
            )
        sharding = None if self.sharding is None else self.sharding.health()
        lost = None if self.lock_lost is None else str(self.lock_lost)
        return Health.of(
            tuple(controllers), started=self._client is not None, sharding=sharding, lock_lost=lost
        )

    async def wait_synced(self) -> None:
        """Wait until every controller's cache holds its first list."""
        await asyncio.gather(*(c.wait_synced() for c in self.controllers.values()))

    def convergence(self, kinds: Iterable[str] | None = None) -> Convergence:
        """Where convergence stands now (see :class:`Convergence`): what is Ready, what
        waits, what the engine gave up on; every kind unless some are named."""
        return self.tracker.convergence(kinds)

    async def wait_converged(
        self,
        *,
        kinds: Iterable[str] | None = None,
        timeout: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Convergence:
        """Wait until every object (of the kinds named, by any of their names) is Ready
        for its generation, or settled short of it: every cache loaded, every queue idle,
        and what is not Ready given up on (a terminal error: waiting will not change it).
        ``converged`` on the result says which. TimeoutError after ``timeout`` seconds on
        the runtime's clock; CorruptError at once when a cache met a corrupt body.
        ``progress(ready, total)`` is called whenever something moved."""
        return await self.tracker.wait_converged(kinds, timeout, progress)

    async def wait_ready(
        self, kind: str | Kind, name: str, *, namespace: str = DEFAULT_NAMESPACE, timeout: float | None = None
    ) -> AnyResource:
        """Wait until the object is Ready for its current generation; return it.

        Raises TimeoutError (with the object's last Synced message) after ``timeout``
        seconds on the runtime's clock.
        """
        last: list[AnyResource] = []
        deadline = contextlib.nullcontext() if timeout is None else self.clock.timeout(timeout)
        try:
            async with deadline:
                return await self._ready(kind, name, namespace, last)
        except TimeoutError:
            detail = ""
            if last:
                synced = last[-1].status.condition("Synced")
                if synced is not None:
                    detail = f": Synced={synced.status.value} {synced.reason} {synced.message}".rstrip()
            # A reconciler of the host's own writes no Synced condition: its last failure,
            # which only the controller knows, says why.
            found = kind if isinstance(kind, Kind) else self.client.kinds.resolve(kind)
            failure = last_failure(
                self.controllers.values(), ObjectKey(found.api_group, found.kind, namespace, name)
            )
            if failure is not None and failure not in detail:
                detail += f"; its last reconcile failed: {failure}"
            raise TimeoutError(f"{kind} {namespace}/{name} was not Ready in time{detail}") from None

    async def _ready(
        self, kind: str | Kind, name: str, namespace: str, last: list[AnyResource]
    ) -> AnyResource:
        found = kind if isinstance(kind, Kind) else self.client.kinds.resolve(kind)
        controller = self._controller_for(found.api_group, found.kind)
        if controller is None:
            return await ready_from_store(self.client, found, name, namespace, last)
        # A kind this runtime runs: its informer already decodes every change, so a
        # waiter costs a dictionary entry, not a watch of the whole kind of its own.
        key = ObjectKey(found.api_group, found.kind, namespace, name)
        return await self.tracker.wait_ready(controller, key, last)
