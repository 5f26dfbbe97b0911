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
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import attrs

from reconcile.api.bulk import Applied
from reconcile.api.client import Client
from reconcile.api.reading import KindRef
from reconcile.controller.caching import Cache, CachedClient
from reconcile.controller.collecting import COLLECTOR_MANAGER, GarbageCollector
from reconcile.controller.context import Context
from reconcile.controller.controlling import Controller
from reconcile.controller.managed import ENGINE_MANAGER, ManagedReconciler
from reconcile.controller.reconciling import Reconciler
from reconcile.errors import InvalidError, LockedError, ReconcileError
from reconcile.model.discovery import discover
from reconcile.model.external import ExternalClient, Provider, bind_store
from reconcile.model.kinds import Kind
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.registry import KindRegistry
from reconcile.model.resource import AnyResource
from reconcile.runtime import collecting
from reconcile.runtime.converging import Convergence, Tracker, ready_from_store
from reconcile.runtime.health import ControllerHealth, Health
from reconcile.runtime.hosting import (
    ReconcileFunction,
    ReconcilerFactory,
    Registration,
    factory_of,
    function_reconciler,
    last_failure,
)
from reconcile.runtime.operators import Operator, operators_among
from reconcile.runtime.options import RuntimeOptions
from reconcile.runtime.supervising import Supervisor
from reconcile.store.contract import Claim, EventStore
from reconcile.store.finishing import finish
from reconcile.store.urls import open_store

__all__ = ["Runtime"]

LOG = logging.getLogger("reconcile.runtime")

#: The claim a Runtime holds on its store while it runs.
RUNNER_CLAIM = "runner"
#: Seconds between two tries of a standby runtime (``runner_lock="wait"``).
_STANDBY_POLL = 0.5


class Runtime:
    """Runs a managed controller for every kind of every provider, the controllers of
    every :class:`~reconcile.runtime.Operator` given or included, and any controller
    added with :meth:`add_controller` (or the :meth:`controller` decorator)."""

    def __init__(
        self,
        store: str | Path = "sqlite:///reconcile.db",
        *,
        providers: Sequence[Provider] | None = None,
        provider_config: Mapping[str, Mapping[str, Any]] | None = None,
        kinds: KindRegistry | None = None,
        operators: Sequence[Operator] | None = None,
        options: RuntimeOptions | None = None,
        **settings: Any,
    ) -> None:
        """``providers``: None discovers the installed ones (the ``reconcile.providers``
        entry points), and with them the installed kinds packages and operators, whose
        controllers then run too. ``operators``: applications' kinds and controllers
        (:class:`~reconcile.runtime.Operator`), run beside those. ``kinds``: more kinds
        the client knows. ``settings`` are :class:`RuntimeOptions` fields (overriding
        ``options``) and, beyond them, options of the store (``synchronous="NORMAL"``...)."""
        self.store_url = store
        self._providers = providers
        self._operators: list[Operator] = list(operators or ())
        self._provider_config = dict(provider_config or {})
        self._extra_kinds = kinds
        overrides = {name: value for name, value in settings.items() if name in RuntimeOptions.names()}
        self.options = attrs.evolve(options or RuntimeOptions(), **overrides)
        self.store_options = {n: v for n, v in settings.items() if n not in overrides}
        self.clock = self.options.clock
        self.wall_clock = self.options.wall_clock
        self.telemetry = self.options.telemetry
        self._claim: Claim | None = None
        self.controllers: dict[str, Controller] = {}
        self._registrations: list[Registration] = []
        self.supervisor = Supervisor(self.clock)
        self.tracker = Tracker(self.clock)
        self._cache: Cache | None = None
        self._connections: dict[str, ExternalClient] = {}
        self._connect_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._client: Client | None = None
        self._signals: list[signal.Signals] = []
        self._closing: asyncio.Task[bool] | None = None
        #: The garbage collector, once started (None with ``garbage_collection=False``).
        self.collector: GarbageCollector | None = None

    @property
    def client(self) -> Client:
        """The resource API of this runtime's store."""
        if self._client is None:
            raise ReconcileError("the runtime is not started")
        return self._client

    @property
    def cache(self) -> Cache:
        """The controllers' shared cache (one informer per kind)."""
        if self._cache is None:
            raise ReconcileError("the runtime is not started")
        return self._cache

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the store, connect every provider and start every controller.

        Raises InvalidError (having closed what it opened) when a provider refuses its
        config: nothing is reconciled with a config that cannot work."""
        self._closing = None
        operators = list(self._operators)
        registry = KindRegistry(self._extra_kinds or ())
        if self._providers is None:
            found = discover()
            providers = list(found.providers)
            for package in found.packages:
                for kind in package.kinds:
                    registry.register(kind)
            installed = operators_among(package.source for package in found.packages)
            operators = [*installed, *(o for o in operators if o not in installed)]
        else:
            providers = list(self._providers)
        for provider in providers:
            for kind in provider.kinds:
                registry.register(kind, provider=provider.name)
        for operator in operators:
            for kind in operator.kinds:
                registry.register(kind)
        store = await open_store(self.store_url, clock=self.wall_clock, **self.store_options)
        self._client = Client(store, registry, clock=self.wall_clock, provider_config=self._provider_config)
        self._cache = Cache(
            self._client,
            clock=self.clock,
            on_growth=collecting.cache_grew if self.options.gc_tuning else None,
            read_timeout=self.options.read_timeout,
        )
        if self.options.handle_signals:  # before standing by: a signal must end the wait too
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_stop)
                self._signals.append(sig)
        try:
            await self._connect_all(providers)
            await self._claim_runner(store)
            if self._claim is None and self.options.runner_lock != "off":
                return  # stopped while standing by: nothing to run (stop_requested says so)
            for provider in providers:
                for kind in provider.kinds:
                    self._add_managed(provider, kind)
            for operator in operators:
                for registration in operator.registrations:
                    self._start_controller(registration)
            for registration in self._registrations:
                self._start_controller(registration)
            if self.options.garbage_collection:
                self.collector = GarbageCollector(self._client, self._cache, clock=self.clock)
                self.tracker.follow_collector(self.collector)
                self.supervisor.start(COLLECTOR_MANAGER, self.collector.run)
        except BaseException:
            await self.close()  # a half-started runtime leaves nothing running or open
            raise

    async def _connect_all(self, providers: Sequence[Provider]) -> None:
        """Connect every provider before the first reconcile, so a config it refuses
        (InvalidError: a bad key, a missing profile) fails :meth:`start` with its reason,
        rather than every object of its kinds, later, as a transient error retried
        without end. Any other failure to connect (a server not up yet) is the
        reconciles' to retry, as before: it is logged and left to them."""
        for provider in providers:
            if not provider.kinds:
                continue
            try:
                await self._connect(provider)
            except InvalidError:
                raise
            except Exception as exc:  # noqa: BLE001 - not a config error: the reconciles retry it
                LOG.warning("provider %s: cannot connect yet (%s); its reconciles retry", provider.name, exc)

    async def _claim_runner(self, store: EventStore) -> None:
        """Become the store's one runner: two would both create what one object declares,
        and an external resource whose identity the system chooses would be made twice."""
        if self.options.runner_lock == "off":
            return
        waiting = False
        while True:
            try:
                self._claim = await store.claim(RUNNER_CLAIM)
            except LockedError as exc:
                if self.options.runner_lock == "fail":
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

    # -- controllers ---------------------------------------------------------------------------

    def add_controller(
        self,
        kind: KindRef,
        reconciler: Reconciler | ReconcilerFactory,
        *,
        name: str | None = None,
        manager: str | None = None,
        workers: int | None = None,
        resync_period: float | Literal["default"] | None = "default",
        ignore_own_writes: bool = True,
        owns: Sequence[KindRef] = (),
    ) -> None:
        """Run ``reconciler`` for ``kind`` beside the managed controllers, with the same
        cache, queue semantics, telemetry, supervision and shutdown.

        ``reconciler`` is a Reconciler (an object with a ``reconcile`` method, used as it
        is), a Reconciler class (instantiated with the
        :class:`~reconcile.controller.Context` this controller gives it: its cached
        client, clock and telemetry), or a factory called with that Context; anything
        else (a reconcile function among them: use :meth:`controller`) raises TypeError
        here, naming what was given. Its writes through ``context.client`` are recorded
        under ``manager`` (default: the controller's name) and, with
        ``ignore_own_writes``, do not trigger it again. ``owns``: the kinds of the
        children its objects control (controller-runtime's ``Owns()``): a change or
        deletion of one requeues its owner, and ``context.children(owner)`` prunes them.
        Before :meth:`start` it starts with the rest; after, at once."""
        registration = Registration(
            kind,
            factory_of(reconciler),
            name,
            manager,
            workers,
            resync_period,
            ignore_own_writes,
            tuple(owns),
        )
        self._registrations.append(registration)
        if self._cache is not None:
            self._start_controller(registration)

    def include(self, operator: Operator) -> None:
        """Run ``operator``'s controllers and know its kinds: before :meth:`start`, with
        the rest; after, at once (its kinds join the client's)."""
        if operator in self._operators:
            return
        self._operators.append(operator)
        if self._client is None:
            return
        for kind in operator.kinds:
            self._client.kinds.register(kind)
        if self._cache is not None:
            for registration in operator.registrations:
                self._start_controller(registration)

    def controller(self, kind: KindRef, **options: Any) -> Callable[[ReconcileFunction], ReconcileFunction]:
        """The decorator form of :meth:`add_controller`.

        ::


        @runtime.controller("Widget")
        async def widgets(request: Request, context: Context) -> Result | None:
            obj = await context.client.get(request.key)  # NotFoundError: deleted
            ...
        """

        def register(function: ReconcileFunction) -> ReconcileFunction:
            self.add_controller(kind, function_reconciler(function), **options)
            return function

        return register

    def _start_controller(self, registration: Registration) -> Controller:
        cache = self.cache
        kind = (
            registration.kind
            if isinstance(registration.kind, Kind)
            else self.client.kinds.resolve(registration.kind)
        )
        name = registration.name or f"{kind.kind.lower()}.{kind.api_group}"
        if name in self.controllers:
            msg = f"a controller named {name!r} already runs; give this one another name"
            raise ValueError(msg)
        manager = registration.manager or name
        owned = tuple(k if isinstance(k, Kind) else self.client.kinds.resolve(k) for k in registration.owns)
        context = Context(
            kind, CachedClient(self.client, cache, manager=manager), self.clock, self.telemetry, owned
        )
        reconciler = registration.factory(context)
        resync = (
            self.options.resync_period
            if registration.resync_period == "default"
            else registration.resync_period
        )
        controller = Controller(
            self.client,
            kind,
            reconciler,
            cache=cache,
            name=name,
            workers=registration.workers or self.options.workers,
            clock=self.clock,
            resync_period=resync,
            telemetry=self.telemetry,
            # A reconciler never needs its own writes (finalizer, markers, status) to
            # trigger it: each reconcile ends with its own requeue. Reacting to them
            # would turn every failed attempt into an immediate next attempt.
            ignore_actors=frozenset({manager}) if registration.ignore_own_writes else frozenset(),
        )
        for owned_kind in owned:
            controller.owns(owned_kind)
        self.controllers[name] = controller
        self.tracker.follow(controller)
        self.supervisor.start(name, controller.run)
        return controller

    def _add_managed(self, provider: Provider, kind: Kind) -> None:
        async def connect() -> ExternalClient:
            return await self._connect(provider)

        options = self.options

        def managed(context: Context) -> ManagedReconciler:
            return ManagedReconciler(
                context,
                connect,
                poll_interval=self._poll_interval(kind),
                poll_jitter=options.poll_jitter,
                creation_grace=options.creation_grace,
                attempts=options.provider_attempts,
                call_timeout=options.provider_timeout,
            )

        self._start_controller(
            Registration(kind, managed, None, ENGINE_MANAGER, kind.workers, "default", ignore_own_writes=True)
        )

    def _poll_interval(self, kind: Kind) -> float:
        """Drift polling for a kind: the Runtime's per-kind setting (by any of the kind's
        names), else the kind's own default, else the Runtime's default."""
        names = kind.names()
        for name, interval in self.options.poll_intervals.items():
            if name.lower() in names:
                return interval
        return kind.poll_interval if kind.poll_interval is not None else self.options.poll_interval

    async def _connect(self, provider: Provider) -> ExternalClient:
        async with self._connect_lock:
            connection = self._connections.get(provider.name)
            if connection is None:
                connection = await provider.connect(self._provider_config.get(provider.name, {}))
                bind_store(
                    connection,
                    await self.client.engine.store_identity(),
                    await self.client.engine.store_mark_key(),
                )
                self._connections[provider.name] = connection
            return connection

    def request_stop(self) -> None:
        """Ask :meth:`run_until_stopped` to return (what SIGINT and SIGTERM do)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called (or a handled signal arrived)."""
        return self._stop.is_set()

    async def wait_stop_requested(self) -> None:
        """Return once :meth:`request_stop` was called (or a handled signal arrived)."""
        await self._stop.wait()

    async def run_until_stopped(self) -> None:
        """Serve until :meth:`request_stop` (or a signal, with ``handle_signals``)."""
        await self._stop.wait()

    async def close(self, *, deadline: float | None = None) -> bool:
        """Drain and stop. In-flight reconciles get ``deadline`` seconds (default: the
        ``shutdown_deadline`` option) to finish; returns False if some had to be
        abandoned then (the log and the external markers keep that safe: a restart
        resumes). A caller with a deadline of its own (``reconcile run --once
        --timeout``) passes what is left of it.

        Idempotent, and shielded: a cancelled ``close()`` still finishes in the
        background (no store thread is left to keep the process alive), and a second
        ``close()`` waits for the first to end."""
        if self._closing is None:
            budget = self.options.shutdown_deadline if deadline is None else max(0.0, deadline)
            self._closing = asyncio.get_running_loop().create_task(self._close(budget), name="runtime close")
        return await finish(self._closing)

    async def _close(self, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals.clear()
        self.supervisor.stopping = True
        if self.collector is not None:
            self.collector.shut_down()
        results = [False]
        try:
            results = await asyncio.gather(*(c.shutdown(deadline) for c in self.controllers.values()))
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
            close = getattr(controller.reconciler, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        self.tracker.close(ReconcileError("the runtime closed while waiting"))
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
        force: bool = False,
    ) -> AnyResource:
        """Declare an object (``Client.apply``: server-side apply under ``manager``;
        ``force`` takes over other managers' fields), through the controllers' cache:
        the applied object is cached at once and its controller hears of it now."""
        cached = CachedClient(self.client, self.cache, manager=manager)
        return await cached.apply(manifest, origin=origin, force=force)

    async def delete(
        self,
        kind: KindRef,
        name: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str = "reconcile",
        propagation_policy: str = "Background",
    ) -> AnyResource | None:
        """Delete an object (``Client.delete``), through the controllers' cache: the object
        marked for deletion is cached at once, its controller hears of it now, and its
        watch event is dropped unparsed; None when it was removed at once (no finalizers),
        and reads of it then wait for the watch to bring the removal. ``propagation_policy``:
        what the garbage collector does with its dependents (``Client.delete``)."""
        cached = CachedClient(self.client, self.cache, manager=manager)
        return await cached.delete(kind, name, namespace=namespace, propagation_policy=propagation_policy)

    async def apply_many(
        self,
        manifests: Sequence[Mapping[str, Any] | AnyResource],
        *,
        manager: str = "reconcile",
        origins: Sequence[Path | None] | None = None,
        check_all_first: bool = False,
        atomic: bool = False,
    ) -> list[Applied]:
        """Declare many objects (``Client.apply_many``: one admission each, writes
        sharing group commits, one result per manifest), through the controllers' cache.
        ``atomic``: all stored in one transaction, or none. With ``gc_tuning``, the
        collector collects less while it runs (:func:`~reconcile.runtime.collecting.collecting_less`)."""
        cached = CachedClient(self.client, self.cache, manager=manager)
        with collecting.collecting_less() if self.options.gc_tuning else contextlib.nullcontext():
            return await cached.apply_many(
                manifests, origins=origins, check_all_first=check_all_first, atomic=atomic
            )

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
