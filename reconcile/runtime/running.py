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
import logging
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import attrs

from reconcile.api.client import Client
from reconcile.api.reading import KindRef
from reconcile.controller.admitting import HookReader
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
from reconcile.model.registry import KindRegistry
from reconcile.runtime import collecting
from reconcile.runtime.applying import Applying
from reconcile.runtime.converging import Tracker
from reconcile.runtime.hosting import (
    ReconcileFunction,
    ReconcilerFactory,
    Registration,
    factory_of,
    function_reconciler,
)
from reconcile.runtime.leading import RunnerGate
from reconcile.runtime.operators import Operator, operators_among
from reconcile.runtime.options import RuntimeOptions
from reconcile.runtime.readiness import Readiness
from reconcile.runtime.sharding import Sharding, share
from reconcile.runtime.stopping import Stopping
from reconcile.runtime.supervising import Supervisor
from reconcile.store.contract import Claim, EventStore
from reconcile.store.urls import open_store

__all__ = ["Runtime"]

LOG = logging.getLogger("reconcile.runtime")

#: The claim a Runtime holds on its store while it runs.
RUNNER_CLAIM = "runner"
#: Seconds between two tries of a standby runtime (``runner_lock="wait"``).
_STANDBY_POLL = 0.5


class Runtime(Applying, Readiness, Stopping):
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
        #: This runner's shard leases, once started with ``sharding`` on a store that
        #: shares (PostgreSQL); None otherwise (the runner lock instead).
        self.sharding: Sharding | None = None
        #: The runner lock's gate, when the lock can be lost and fences (PostgreSQL
        #: without sharding; see :mod:`reconcile.runtime.leading`).
        self._gate: RunnerGate | None = None
        #: Why this runner stopped: its runner lock lost to another runner (None: held).
        self.lock_lost: LockedError | None = None

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
        self._gate, self.lock_lost = None, None
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
            listing=collecting.collecting_less if self.options.gc_tuning else None,
            read_timeout=self.options.read_timeout,
        )
        # Admission hooks read other objects as a webhook reads its informers: from this
        # cache where a kind's informer has synced, from the store otherwise.
        self._client.engine.reader = HookReader(self._client, self._cache)
        if self.options.handle_signals:  # before standing by: a signal must end the wait too
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_stop)
                self._signals.append(sig)
        try:
            await self._connect_all(providers)
            if not await self._share(store):
                await self._claim_runner(store)
            if self._claim is None and self.sharding is None and self.options.runner_lock != "off":
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
                if self.sharding is not None:
                    self._gate_collector(self.collector, self.sharding)
                else:
                    self.collector.gate = self._gate
                self.tracker.follow_collector(self.collector)
                self.supervisor.start(COLLECTOR_MANAGER, self.collector.run)
        except BaseException:
            await self.close()  # a half-started runtime leaves nothing running or open
            raise

    @staticmethod
    def _gate_collector(collector: GarbageCollector, sharding: Sharding) -> None:
        """Have ``collector`` handle only the keys of ``sharding``'s shards, fenced as the
        controllers' writes are, and look again at the keys of each shard gained."""
        collector.gate = sharding
        sharding.on_gained(lambda shards: collector.revisit(lambda key: sharding.shard(key) in shards))

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
            await self._fence_runner(store, self._claim)
            return

    async def _fence_runner(self, store: EventStore, claim: Claim) -> None:
        """Fence this runner's controllers by its lock, where the lock can be lost
        (see :mod:`reconcile.runtime.leading`): their writes carry its fence, a loss
        stops them."""
        fence = await claim.fence()
        if fence is None:
            return
        self._gate = RunnerGate(claim, fence)
        self.client.user = fence.holder  # as a sharded runner's: which runner wrote

        def lost(holder: str) -> None:
            self.lock_lost = LockedError(
                f"{store.url}: lost the runner lock to {holder}: this runner stops reconciling (its "
                "writes since are refused)",
                holder=holder,
            )
            LOG.error("%s", self.lock_lost)
            self.request_stop()

        claim.on_lost(lost)

    async def _share(self, store: EventStore) -> bool:
        """With ``sharding``: a share of the store's shard leases instead of the runner
        lock (:func:`~reconcile.runtime.sharding.share`); False when off or not shared."""
        if self.options.sharding:
            self.sharding = await share(store, self.options, self.client, self.controllers, self.supervisor)
        return self.sharding is not None

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
        controller.gate = self.sharding if self.sharding is not None else self._gate
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
