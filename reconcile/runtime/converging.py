"""Is everything Ready? The Runtime's answer, kept up to date as the caches change.

Converged means, for each object: **observed in this run** (a reconcile of it finished
without failing since the Runtime started; a status written by an earlier run proves
nothing about now), ``Synced`` not False or Unknown and ``Ready=True``, both for its
current generation, and not being deleted. An object paused by annotation is not
waited for (the engine does nothing for it by request). ``wait_ready``,
``wait_converged`` and ``reconcile run --once`` use this one definition.

A :class:`Tracker` listens to every controller it is given: each informer change and
each finished reconcile updates the set of objects not converged, and wakes whoever
waits. So :meth:`Tracker.wait_converged` costs nothing while nothing moves, and a check
is a look at that set, not a scan of every cache; its deadline runs on the Runtime's
clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

import attrs

from reconcile.api.client import Client
from reconcile.controller.clocks import Clock
from reconcile.controller.collecting import GarbageCollector
from reconcile.controller.controlling import Controller
from reconcile.controller.informing import InformerEvent
from reconcile.errors import CorruptError, NotFoundError, ReconcileError
from reconcile.model.conditions import ConditionStatus
from reconcile.model.events import Event
from reconcile.model.external import ANNOTATION_PAUSED
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource

__all__ = ["Convergence", "Tracker", "is_ready", "ready_from_store"]

#: A reconcile's outcomes (see ``Controller.add_listener``) that observed nothing sure.
_FAILED = frozenset({"error", "terminal"})


def is_ready(obj: AnyResource) -> bool:
    """Ready=True, and Synced neither False nor Unknown, for the object's current
    generation (what its status says; whether it was observed in this run is the
    Tracker's to know)."""
    status = obj.status
    if not hasattr(status, "condition") or status.observed_generation != obj.metadata.generation:
        return False
    ready = status.condition("Ready")
    if ready is None or ready.status != ConditionStatus.TRUE:
        return False
    synced = status.condition("Synced")
    return synced is None or synced.status == ConditionStatus.TRUE


def _paused(obj: AnyResource) -> bool:
    return obj.metadata.annotations.get(ANNOTATION_PAUSED) == "true"


def _settled(obj: AnyResource) -> bool:
    return obj.metadata.deletion_timestamp is None and (is_ready(obj) or _paused(obj))


@attrs.frozen
class Convergence:
    """Where convergence stands for some kinds."""

    #: Objects cached.
    total: int
    #: Those not converged: not observed in this run yet, not Synced and Ready for their
    #: generation, or being deleted.
    waiting: tuple[AnyResource, ...]
    #: Of ``waiting``, those the engine gave up on: no retry is scheduled, so only a new
    #: spec or a fix outside will change them.
    stuck: tuple[AnyResource, ...]
    #: Kinds whose cache has not loaded yet.
    unsynced: tuple[str, ...]
    #: Whether a controller has a key queued or in flight (delayed polls aside).
    busy: bool
    #: Why each waiting key's last reconcile failed, when its status could not say it.
    failures: dict[ObjectKey, str] = attrs.field(factory=dict)
    #: Of ``waiting``, the keys not observed in this run yet (whatever their status says).
    unobserved: frozenset[ObjectKey] = frozenset()

    @property
    def ready(self) -> int:
        """How many objects are Ready."""
        return self.total - len(self.waiting)

    @property
    def settled(self) -> bool:
        """Every cache loaded, every queue idle, and whatever is not Ready will not change
        by waiting."""
        return not self.unsynced and not self.busy and len(self.stuck) == len(self.waiting)

    @property
    def converged(self) -> bool:
        """Settled, with everything Ready."""
        return self.settled and not self.waiting


class _Moved:
    """Whether anything moved since :meth:`clear`, and a way to wait for the next move:
    an ``asyncio.Event`` called as a listener once per reconcile (100,000 times in a
    resync), answered by an attribute when it is set already."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._set = False

    def __call__(self, *_: object) -> None:
        """Something moved (any arguments: a listener's, a handler's)."""
        if not self._set:
            self._set = True
            self._event.set()

    def clear(self) -> None:
        """Forget the moves so far."""
        self._set = False
        self._event.clear()

    async def wait(self) -> bool:
        """Return (True, as ``asyncio.Event.wait``) at the next move, at once when one
        came since :meth:`clear`."""
        return await self._event.wait()


class Tracker:
    """Follows controllers' caches and queues; answers and waits for convergence."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.controllers: list[Controller] = []
        #: (api_group, kind) -> the keys not converged (see the module's docstring)
        self._waiting: dict[tuple[str, str], dict[ObjectKey, None]] = {}
        #: The keys a reconcile observed in this run, its last one not failing.
        self._observed: set[ObjectKey] = set()
        self._moved = _Moved()
        self._ready_waiters: dict[ObjectKey, list[asyncio.Future[AnyResource]]] = {}
        #: The garbage collector, when the Runtime runs one: convergence waits until it
        #: has nothing left to do (a background deletion's dependents are collected).
        self.collector: GarbageCollector | None = None

    def follow_collector(self, collector: GarbageCollector) -> None:
        """Count ``collector``'s pending work as not settled, and its moves as moves."""
        self.collector = collector
        collector.add_listener(self._moved)

    def follow(self, controller: Controller) -> None:
        """Track this controller's objects and queue."""
        self.controllers.append(controller)
        controller.informer.add_handler(self._on_change)
        controller.informer.add_error_handler(self._moved)
        get = controller.informer.get

        def reconciled(key: ObjectKey, outcome: str) -> None:
            # Called once per reconcile (100,000 times in a resync): the common case, a
            # key observed already and observed again, is one set lookup.
            if outcome in _FAILED:
                self._observed.discard(key)
            elif key in self._observed:
                self._moved()
                return
            else:
                self._observed.add(key)
            self._place(key, get(key))
            self._moved()

        controller.add_listener(reconciled)

    def _on_change(self, event: InformerEvent) -> None:
        if event.new is None:
            self._observed.discard(event.key)
        self._place(event.key, event.new)
        self._moved()

    def _place(self, key: ObjectKey, obj: AnyResource | None) -> None:
        """Put ``key`` among the waiting or not, as ``obj`` (its cached object) says;
        answer whoever waits for it to be Ready."""
        if obj is None or (key in self._observed and _settled(obj)):
            waiting = self._waiting.get((key.api_group, key.kind))
            if waiting:
                waiting.pop(key, None)
        else:
            self._waiting.setdefault((key.api_group, key.kind), {})[key] = None
        if obj is not None and self._ready_waiters and key in self._observed and is_ready(obj):
            for waiter in self._ready_waiters.pop(key, ()):
                if not waiter.done():
                    waiter.set_result(obj)

    # -- convergence -----------------------------------------------------------------------

    def _chosen(self, kinds: Iterable[str] | None) -> list[Controller]:
        if kinds is None:
            return self.controllers
        wanted = {name.lower() for name in kinds}
        return [c for c in self.controllers if c.kind.names() & wanted]

    def convergence(self, kinds: Iterable[str] | None = None) -> Convergence:
        """Where convergence stands now, for the kinds named (by any of their names;
        every kind when None)."""
        controllers = self._chosen(kinds)
        total, waiting, stuck, failures = 0, [], [], {}
        for controller in controllers:
            informer = controller.informer
            total += len(informer.cached_keys())
            for key in self._waiting.get((controller.kind.api_group, controller.kind.kind), ()):
                obj = informer.get(key)
                if obj is None:
                    continue
                waiting.append(obj)
                if key in controller.gave_up:
                    stuck.append(obj)
                if key in controller.failures:
                    failures[key] = controller.failures[key]
        unsynced = self._unsynced(controllers)
        busy = self._busy(controllers) or (self.collector is not None and self.collector.busy)
        unobserved = frozenset(o.key for o in waiting if o.key not in self._observed)
        return Convergence(total, tuple(waiting), tuple(stuck), unsynced, busy, failures, unobserved)

    @staticmethod
    def _unsynced(controllers: list[Controller]) -> tuple[str, ...]:
        return tuple(c.kind.kind for c in controllers if not c.informer.synced.is_set())

    @staticmethod
    def _busy(controllers: list[Controller]) -> bool:
        return any(len(c.queue) or c.queue.statistics().processing for c in controllers)

    def counts(self, kinds: Iterable[str] | None = None) -> tuple[int, int]:
        """(Ready, total) now: cheap, for a progress display."""
        controllers = self._chosen(kinds)
        total = sum(len(c.informer.cached_keys()) for c in controllers)
        waiting = sum(len(self._waiting.get((c.kind.api_group, c.kind.kind), ())) for c in controllers)
        return total - waiting, total

    def _settled(self, controllers: list[Controller]) -> bool:
        """:attr:`Convergence.settled` without building it: what a waiter checks at every
        move, in time independent of how many objects there are (what was given up on is
        few)."""
        if self._unsynced(controllers) or self._busy(controllers):
            return False
        if self.collector is not None and self.collector.busy:
            return False
        for controller in controllers:
            waiting = self._waiting.get((controller.kind.api_group, controller.kind.kind), {})
            if len(waiting) > len(controller.gave_up):
                return False
            if any(key not in controller.gave_up for key in waiting):
                return False
        return True

    def corruption(self) -> CorruptError | None:
        """The first corrupt body a cache met (retrying will not help)."""
        return next((c.informer.corrupt for c in self.controllers if c.informer.corrupt), None)

    async def wait_converged(
        self,
        kinds: Iterable[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the deadline runs on the injected clock
        progress: Callable[[int, int], None] | None = None,
    ) -> Convergence:
        """Wait until :attr:`Convergence.settled` for these kinds; return where it stands
        (``converged`` says whether everything is Ready). TimeoutError after ``timeout``
        seconds on the clock; CorruptError at once when a cache met a corrupt body.
        ``progress(ready, total)`` is called at each move."""
        chosen = None if kinds is None else list(kinds)
        controllers = self._chosen(chosen)
        deadline = contextlib.nullcontext() if timeout is None else self.clock.timeout(timeout)
        try:
            async with deadline:
                while True:
                    self._moved.clear()
                    corrupt = self.corruption()
                    if corrupt is not None:
                        raise corrupt
                    if progress is not None:
                        progress(*self.counts(chosen))
                    if self._settled(controllers):
                        return self.convergence(chosen)
                    await self._next_move(controllers)
        except TimeoutError:
            state = self.convergence(chosen)
            waiting = f"{len(state.waiting)} of {state.total}"
            msg = f"not converged in {timeout:g} s: {waiting} not Synced and Ready"
            raise TimeoutError(msg) from None

    async def _next_move(self, controllers: list[Controller]) -> None:
        """Wait for a change, a finished reconcile, a watch failure, or a cache loading."""
        waits = [asyncio.ensure_future(self._moved.wait())]
        waits += [
            asyncio.ensure_future(c.informer.synced.wait())
            for c in controllers
            if not c.informer.synced.is_set()
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    # -- one object ----------------------------------------------------------------------------

    async def wait_ready(
        self, controller: Controller, key: ObjectKey, last: list[AnyResource]
    ) -> AnyResource:
        """Wait until the cached object is observed in this run, Synced and Ready for its
        generation (``last`` gets the last version seen, for the caller's timeout
        message)."""
        informer = controller.informer
        try:
            await informer.synced.wait()
            cached = informer.get(key)
            if cached is not None and key in self._observed and is_ready(cached):
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

    def close(self, error: BaseException) -> None:
        """Fail every waiter with ``error``."""
        waiters, self._ready_waiters = self._ready_waiters, {}
        for waiting in waiters.values():
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_exception(error)


async def ready_from_store(
    client: Client, kind: Kind, name: str, namespace: str, last: list[AnyResource]
) -> AnyResource:
    """Wait for an object of a kind no controller here caches: read it, then watch."""
    since = 0
    with contextlib.suppress(NotFoundError):
        obj = await client.get(kind, name, namespace=namespace)
        last.append(obj)
        if is_ready(obj):
            return obj
        since = obj.metadata.resource_version or 0
    async for event in client.watch(kind, namespace=namespace, since=since):
        if not isinstance(event, Event) or event.key.name != name or event.object is None:
            continue
        last.append(event.object)
        if is_ready(event.object):
            return event.object
    raise ReconcileError("the store closed while waiting")
