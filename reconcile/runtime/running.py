"""The Runtime: store, client, controllers and providers, wired and supervised, in the
caller's event loop.

    async with Runtime("sqlite:///state.db") as runtime:
        await runtime.apply(manifest)
        await runtime.wait_ready("bucket", "photos")

No global state, no threads beyond aiosqlite's, no signal handlers unless asked
(``handle_signals=True``, for a process whose main job this is, like ``reconcile run``).
Leaving the ``async with`` drains: controllers stop taking keys, in-flight reconciles
get ``shutdown_deadline`` seconds to finish, then the store closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from reconcile.api.client import Client
from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.controlling import Controller
from reconcile.controller.informing import InformerEvent
from reconcile.controller.managed import ENGINE_MANAGER, ManagedReconciler
from reconcile.controller.telemetry import Telemetry
from reconcile.errors import LockedError, NotFoundError, ReconcileError
from reconcile.model.conditions import ConditionStatus
from reconcile.model.discovery import discover_providers
from reconcile.model.events import Event
from reconcile.model.external import ExternalClient, Provider
from reconcile.model.kinds import Kind, KindRegistry
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import Resource
from reconcile.runtime.health import ControllerHealth, Health
from reconcile.runtime.supervising import Supervisor
from reconcile.store.contract import Claim, EventStore
from reconcile.store.finishing import finish
from reconcile.store.urls import open_store

__all__ = ["Runtime"]

LOG = logging.getLogger("reconcile.runtime")

AnyResource = Resource[Any, Any]
#: The claim a Runtime holds on its store while it runs.
RUNNER_CLAIM = "runner"
#: Seconds between two tries of a standby runtime (``runner_lock="wait"``).
_STANDBY_POLL = 0.5


class Runtime:
    """Runs a managed controller for every kind of every provider."""

    def __init__(
        self,
        store: str | Path = "sqlite:///reconcile.db",
        *,
        providers: Sequence[Provider] | None = None,
        provider_config: Mapping[str, Mapping[str, Any]] | None = None,
        kinds: KindRegistry | None = None,
        clock: Clock | None = None,
        wall_clock: Callable[[], float] = time.time,
        workers: int = 16,
        poll_interval: float = 60.0,
        poll_intervals: Mapping[str, float] | None = None,
        poll_jitter: float = 0.1,
        creation_grace: float = 0.0,
        provider_attempts: int = 3,
        provider_timeout: float | None = 60.0,
        resync_period: float | None = 600.0,
        shutdown_deadline: float = 30.0,
        telemetry: Telemetry | None = None,
        handle_signals: bool = False,
        freeze_gc: bool = False,
        runner_lock: Literal["fail", "wait", "off"] = "fail",
        **store_options: Any,
    ) -> None:
        self.store_url = store
        self._providers = providers
        self._provider_config = dict(provider_config or {})
        self._extra_kinds = kinds
        self.clock = clock or LoopClock()
        self.wall_clock = wall_clock
        self.workers = workers
        self.poll_interval = poll_interval
        self.poll_intervals = dict(poll_intervals or {})
        self.poll_jitter = poll_jitter
        self.creation_grace = creation_grace
        self.provider_attempts = provider_attempts
        self.provider_timeout = provider_timeout
        self.resync_period = resync_period
        self.shutdown_deadline = shutdown_deadline
        self.telemetry = telemetry or Telemetry()
        self.handle_signals = handle_signals
        self.freeze_gc = freeze_gc
        if runner_lock not in ("fail", "wait", "off"):
            msg = f"runner_lock must be 'fail', 'wait' or 'off', not {runner_lock!r}"
            raise ValueError(msg)
        #: One Runtime reconciles a store at a time: a second one fails to start
        #: (``"fail"``), waits until the first stops (``"wait"``, a standby), or does not
        #: check (``"off"``).
        self.runner_lock = runner_lock
        self._claim: Claim | None = None
        self.store_options = store_options
        self.controllers: dict[str, Controller] = {}
        #: wait_ready() callers by key, resolved from the informers' notifications
        self._ready_waiters: dict[ObjectKey, list[asyncio.Future[AnyResource]]] = {}
        self.supervisor = Supervisor(self.clock)
        self._connections: dict[str, ExternalClient] = {}
        self._connect_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._client: Client | None = None
        self._signals: list[signal.Signals] = []
        self._closing: asyncio.Task[bool] | None = None

    @property
    def client(self) -> Client:
        """The resource API of this runtime's store."""
        if self._client is None:
            raise ReconcileError("the runtime is not started")
        return self._client

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the store and start every controller."""
        self._closing = None
        providers = list(discover_providers() if self._providers is None else self._providers)
        registry = KindRegistry(self._extra_kinds or ())
        for provider in providers:
            for kind in provider.kinds:
                registry.register(kind, provider=provider.name)
        store = await open_store(self.store_url, clock=self.wall_clock, **self.store_options)
        self._client = Client(store, registry, clock=self.wall_clock, provider_config=self._provider_config)
        if self.handle_signals:  # before standing by: a signal must end the wait too
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_stop)
                self._signals.append(sig)
        try:
            await self._claim_runner(store)
            if self._claim is None and self.runner_lock != "off":
                return  # stopped while standing by: nothing to run (stop_requested says so)
            for provider in providers:
                for kind in provider.kinds:
                    self._add_controller(provider, kind)
        except BaseException:
            await self.close()  # a half-started runtime leaves nothing running or open
            raise

    async def _claim_runner(self, store: EventStore) -> None:
        """Become the store's one runner: two would both create what one object declares,
        and an external resource whose identity the system chooses would be made twice."""
        if self.runner_lock == "off":
            return
        waiting = False
        while True:
            try:
                self._claim = await store.claim(RUNNER_CLAIM)
            except LockedError as exc:
                if self.runner_lock == "fail":
                    raise
                if not waiting:
                    LOG.warning("%s; standing by until it stops", exc)
                    waiting = True
                if await self._stopped_within(_STANDBY_POLL):
                    LOG.warning("%s: stopped while standing by", store.url)
                    return
                continue
            if waiting:
                LOG.warning("%s: the runner lock is ours; starting", store.url)
            return

    async def _stopped_within(self, seconds: float) -> bool:
        """Sleep ``seconds`` on the clock, or less if a stop is requested meanwhile."""
        sleeping = asyncio.ensure_future(self.clock.sleep(seconds))
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({sleeping, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, stopping):
                task.cancel()
        return self._stop.is_set()

    def _add_controller(self, provider: Provider, kind: Kind) -> None:
        assert self._client is not None

        async def connect() -> ExternalClient:
            return await self._connect(provider)

        reconciler = ManagedReconciler(
            self._client,
            kind,
            connect,
            clock=self.clock,
            poll_interval=self._poll_interval(kind),
            poll_jitter=self.poll_jitter,
            creation_grace=self.creation_grace,
            attempts=self.provider_attempts,
            call_timeout=self.provider_timeout,
            telemetry=self.telemetry,
        )
        name = f"{kind.kind.lower()}.{kind.api_group}"
        controller = Controller(
            self._client,
            kind,
            reconciler,
            name=name,
            workers=self.workers,
            clock=self.clock,
            resync_period=self.resync_period,
            telemetry=self.telemetry,
            # The engine never needs its own writes (finalizer, markers, status) to
            # trigger it: each reconcile ends with its own requeue. Reacting to them
            # would turn every failed attempt into an immediate next attempt.
            ignore_actors=frozenset({ENGINE_MANAGER}),
            freeze_gc=self.freeze_gc,
        )
        reconciler.bind(controller.informer)
        controller.informer.add_handler(self._on_change)
        self.controllers[name] = controller
        self.supervisor.start(name, controller.run)

    def _poll_interval(self, kind: Kind) -> float:
        """Drift polling for a kind: the Runtime's per-kind setting (by any of the kind's
        names), else the kind's own default, else the Runtime's default."""
        names = kind.names()
        for name, interval in self.poll_intervals.items():
            if name.lower() in names:
                return interval
        return kind.poll_interval if kind.poll_interval is not None else self.poll_interval

    async def _connect(self, provider: Provider) -> ExternalClient:
        async with self._connect_lock:
            connection = self._connections.get(provider.name)
            if connection is None:
                connection = await provider.connect(self._provider_config.get(provider.name, {}))
                self._connections[provider.name] = connection
            return connection

    def request_stop(self) -> None:
        """Ask :meth:`run_until_stopped` to return (what SIGINT and SIGTERM do)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called (or a handled signal arrived)."""
        return self._stop.is_set()

    async def run_until_stopped(self) -> None:
        """Serve until :meth:`request_stop` (or a signal, with ``handle_signals``)."""
        await self._stop.wait()

    async def close(self) -> bool:
        """Drain and stop. Returns False if in-flight reconciles had to be abandoned at the
        deadline (the log and the external markers keep that safe: a restart resumes).

        Idempotent, and shielded: a cancelled ``close()`` still finishes in the
        background (no store thread is left to keep the process alive), and a second
        ``close()`` waits for the first to end."""
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._close(), name="runtime close")
        return await finish(self._closing)

    async def _close(self) -> bool:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals.clear()
        self.supervisor.stopping = True
        results = [False]
        try:
            results = await asyncio.gather(
                *(c.shutdown(self.shutdown_deadline) for c in self.controllers.values())
            )
        finally:
            # Cancelled or not, what holds threads, files and locks is released.
            try:
                await self._release_controllers()
            finally:
                if self._claim is not None:
                    self._claim.release()  # after the last reconcile: the next runner may start
                    self._claim = None
                if self._client is not None:
                    client, self._client = self._client, None
                    await client.store.close()
        return all(results)

    async def _release_controllers(self) -> None:
        await self.supervisor.stop()
        for controller in self.controllers.values():
            if isinstance(controller.reconciler, ManagedReconciler):
                await controller.reconciler.close()
        waiters, self._ready_waiters = self._ready_waiters, {}
        for waiting in waiters.values():
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_exception(ReconcileError("the runtime closed while waiting"))
        for connection in self._connections.values():
            with contextlib.suppress(Exception):
                await connection.close()
        self._connections.clear()

    # -- conveniences ----------------------------------------------------------------------------

    async def apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str = "reconcile",
        origin: Path | None = None,
    ) -> AnyResource:
        """Declare an object (``Client.apply``). When a controller of this runtime manages
        its kind, the applied object enters that controller's cache at once (its watch
        event is then not decoded again) and the controller hears of it now."""
        applied = await self.client.apply(manifest, manager=manager, origin=origin)
        if applied.metadata.deletion_timestamp is not None and not applied.metadata.finalizers:
            return applied  # the apply completed a deletion: this is the object's last state
        controller = self._controller_for(applied.key.api_group, applied.key.kind)
        if controller is not None:
            controller.informer.remember(applied, manager)
        return applied

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
                )
            )
        return Health.of(tuple(controllers), started=self._client is not None)

    async def wait_synced(self) -> None:
        """Wait until every controller's cache holds its first list."""
        await asyncio.gather(*(c.wait_synced() for c in self.controllers.values()))

    async def wait_ready(
        self, kind: str | Kind, name: str, *, namespace: str = DEFAULT_NAMESPACE, timeout: float | None = None
    ) -> AnyResource:
        """Wait until the object is Ready for its current generation; return it.

        Raises TimeoutError (with the object's last Synced message) after ``timeout``.
        """
        last: list[AnyResource] = []
        try:
            async with asyncio.timeout(timeout):
                return await self._ready(kind, name, namespace, last)
        except TimeoutError:
            detail = ""
            if last:
                synced = last[-1].status.condition("Synced")
                if synced is not None:
                    detail = f": Synced={synced.status.value} {synced.reason} {synced.message}".rstrip()
            raise TimeoutError(f"{kind} {namespace}/{name} was not Ready in time{detail}") from None

    def _on_change(self, event: InformerEvent) -> None:
        waiters = self._ready_waiters.get(event.key)
        if waiters is None or event.new is None or not _is_ready(event.new):
            return
        del self._ready_waiters[event.key]
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(event.new)

    async def _ready(
        self, kind: str | Kind, name: str, namespace: str, last: list[AnyResource]
    ) -> AnyResource:
        found = kind if isinstance(kind, Kind) else self.client.kinds.resolve(kind)
        controller = self._controller_for(found.api_group, found.kind)
        if controller is None:
            return await self._ready_from_store(found, name, namespace, last)
        # A kind this runtime manages: its informer already decodes every change, so a
        # waiter costs a dictionary entry, not a watch of the whole kind of its own.
        informer = controller.informer
        key = ObjectKey(found.api_group, found.kind, namespace, name)
        try:
            await informer.synced.wait()
            cached = informer.get(key)
            if cached is not None and _is_ready(cached):
                return cached
            waiter: asyncio.Future[AnyResource] = asyncio.get_running_loop().create_future()
            self._ready_waiters.setdefault(key, []).append(waiter)
            try:
                return await waiter
            finally:
                waiters = self._ready_waiters.get(key)
                if waiters is not None and waiter in waiters:
                    waiters.remove(waiter)
                    if not waiters:
                        del self._ready_waiters[key]
        finally:
            seen = informer.get(key)
            if seen is not None:
                last.append(seen)

    async def _ready_from_store(
        self, kind: Kind, name: str, namespace: str, last: list[AnyResource]
    ) -> AnyResource:
        since = 0
        with contextlib.suppress(NotFoundError):
            obj = await self.client.get(kind, name, namespace=namespace)
            last.append(obj)
            if _is_ready(obj):
                return obj
            since = obj.metadata.resource_version or 0
        async for event in self.client.watch(kind, namespace=namespace, since=since):
            if not isinstance(event, Event) or event.key.name != name or event.object is None:
                continue
            last.append(event.object)
            if _is_ready(event.object):
                return event.object
        raise ReconcileError("the store closed while waiting")


def _is_ready(obj: AnyResource) -> bool:
    ready = obj.status.condition("Ready") if hasattr(obj.status, "condition") else None
    return (
        ready is not None
        and ready.status == ConditionStatus.TRUE
        and obj.status.observed_generation == obj.metadata.generation
    )
