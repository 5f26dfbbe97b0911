"""The controller: informer -> work queue -> workers -> ``reconcile(request)``.

One controller per kind. The informer's changes enqueue keys (``Priority.CHANGE``); a
periodic resync with jitter enqueues every cached key (``Priority.RESYNC``) so the loop
stays level-triggered even if a change were missed; workers take keys one at a time per
key and call the reconciler, then act on its result (see
:mod:`reconcile.controller.reconciling`).

Read-your-writes is the :class:`~reconcile.controller.caching.Cache`'s: the controller
reads and writes through it like any reconciler does, and the cache makes a read wait
until it holds the key's last write.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
from collections.abc import Callable, Iterable

from opentelemetry import trace

from reconcile.api.client import Client
from reconcile.controller.amending import Amending
from reconcile.controller.caching import Cache, CachedClient
from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.following import Following
from reconcile.controller.gating import KeyGate
from reconcile.controller.informing import Informer, InformerEvent
from reconcile.controller.landing import FORGETTING, Landing
from reconcile.controller.owning import owner_handler
from reconcile.controller.queueing import Priority, QueueShutDown, WorkQueue
from reconcile.controller.reconciling import Reconciler, Request, Result
from reconcile.controller.telemetry import Telemetry
from reconcile.controller.terminal import CONTROLLER_MANAGER, records_terminal
from reconcile.controller.tracing import Tracing
from reconcile.errors import DeadlineExceededError
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectKey
from reconcile.store.fencing import FENCE

__all__ = ["Controller"]

LOG = logging.getLogger("reconcile.controller")

#: Keys a worker takes before it lets the event loop run whatever else is ready (a
#: multiple of 64: the worker asks the telemetry again every 64 keys).
_KEYS_PER_TURN = 256
#: Keys a periodic resync enqueues at once (about 10 ms of the loop) before it lets the
#: loop run whatever else is ready.
_RESYNC_CHUNK = 8192
#: Seconds a key of a shard just gained waits for the cache to reach the former holder's
#: last writes before it is given back to the queue for later.
_CATCH_UP = 5.0


class Controller(Tracing, Following, Amending, Landing):
    """Runs one reconciler for one kind."""

    def __init__(
        self,
        client: Client,
        kind: Kind,
        reconciler: Reconciler,
        *,
        cache: Cache | None = None,
        name: str | None = None,
        workers: int = 16,
        namespace: str | None = None,
        clock: Clock | None = None,
        queue: WorkQueue[ObjectKey] | None = None,
        resync_period: float | None = 600.0,
        resync_jitter: float = 0.1,
        read_your_writes_timeout: float = 5.0,
        telemetry: Telemetry | None = None,
        random_source: Callable[[], float] = random.random,
        ignore_actors: frozenset[str] = frozenset(),
        reconcile_timeout: float | None = None,
        max_pending_writes: int | None = None,
    ) -> None:
        self.client = client
        self.kind = kind
        self.reconciler = reconciler
        self.name = name or kind.kind.lower()
        self.workers = workers
        self.clock = clock or LoopClock()
        self.queue: WorkQueue[ObjectKey] = queue or WorkQueue(clock=self.clock)
        #: The cache this controller reads from (shared with the other controllers of a
        #: Runtime; a controller made alone has its own).
        self.cache = cache or Cache(
            client,
            clock=self.clock,
            namespace=namespace,
            read_timeout=read_your_writes_timeout,
        )
        self.informer = self.cache.informer(kind)
        #: How the controller writes its own bookkeeping (the terminal error record).
        self._writer = CachedClient(client, self.cache, manager=CONTROLLER_MANAGER)
        self.resync_period = resync_period
        self.resync_jitter = resync_jitter
        self.telemetry = telemetry or Telemetry()
        self._random = random_source
        self.ignore_actors = ignore_actors
        #: Seconds a reconcile may take before it is cancelled and retried (None: no limit).
        self.reconcile_timeout = reconcile_timeout
        #: How many reconciles' last writes (``Result.pending``) may land at once while
        #: the workers go on (see :mod:`~reconcile.controller.landing`): 4 per worker.
        if max_pending_writes is not None and max_pending_writes < 1:
            msg = f"max_pending_writes must be at least 1, not {max_pending_writes}"
            raise ValueError(msg)
        self.max_pending_writes = max(1, 4 * workers) if max_pending_writes is None else max_pending_writes
        self._landing: set[asyncio.Task[None]] = set()
        self._landing_count = 0
        self._room: collections.deque[asyncio.Future[None]] = collections.deque()
        #: Keys whose pending delayed add is a requeue their reconcile asked for (the span
        #: says "requeue" when it comes due); any other add's trigger is its priority in
        #: the queue ("change", "retry", "resync").
        self._requeued: set[ObjectKey] = set()
        #: One Request per cached key, made once and handed to every reconcile of it
        #: (dropped when the object goes): a request is only its key.
        self._requests: dict[ObjectKey, Request] = {}
        #: Keys whose status holds a terminal error this controller recorded (any process's
        #: controller: the informer tells): a success clears it.
        self._terminal: set[ObjectKey] = set()
        #: Why each key's last reconcile failed, until one succeeds: what a one-shot
        #: caller can say of an object whose status could not be written (a full disk).
        self.failures: dict[ObjectKey, str] = {}
        #: Keys whose last reconcile ended in a TerminalError (a provider's PermanentError
        #: or NotOwned among them), until one succeeds or the object goes: no retry is
        #: scheduled for them, so a one-shot caller need not wait for them.
        self.gave_up: dict[ObjectKey, str] = {}
        #: The store failure last said (a full disk), until reconciles succeed again: said
        #: once as a warning, not once per key and retry (it is nobody's object's fault,
        #: and its status cannot say it: status is written to the same store).
        self._store_failure: str | None = None
        #: Per failing key, when its failure was last said at WARNING and how many of its
        #: failures were not said since (see :meth:`_warn`), until a reconcile succeeds.
        self._warned: dict[ObjectKey, tuple[float, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._attributes = {"controller": self.name}
        self._outcomes = {
            outcome: {"controller": self.name, "result": outcome}
            for outcome in ("success", "error", "terminal", "requeue", "requeue_after", "fenced")
        }
        self._listeners: list[Callable[[ObjectKey, str], None]] = []
        self.informer.add_handler(self._on_change)
        #: The informers of the kinds this controller owns (:meth:`owns`).
        self.owned: list[Informer] = []
        #: Which keys this controller may reconcile (None: all of them, unfenced). A key
        #: the gate does not admit is dropped when a worker takes it (its listeners hear
        #: "skipped": another process reconciles it); the others are reconciled with the
        #: gate's fence in force (:data:`reconcile.store.fencing.FENCE`).
        self.gate: KeyGate | None = None

    # -- feeding the queue -----------------------------------------------------------------

    @property
    def store_failure(self) -> str | None:
        """The store failure its reconciles last met (a full disk, a server down or
        read-only), until they succeed again (None: none)."""
        return self._store_failure

    def enqueue(self, key: ObjectKey, priority: Priority = Priority.CHANGE) -> None:
        """Ask for ``key`` to be reconciled (the queue counts the adds for the metrics, and
        keeps the priority, which the span names as the trigger)."""
        self.queue.add(key, priority)

    def enqueue_many(self, keys: Iterable[ObjectKey], priority: Priority = Priority.RESYNC) -> None:
        """Ask for all these keys to be reconciled (a resync): cheaper than one by one."""
        self.queue.add_many(keys, priority)

    def _on_change(self, event: InformerEvent) -> None:
        if event.new is not None and records_terminal(event.new):
            self._terminal.add(event.key)
        elif self._terminal:
            self._terminal.discard(event.key)
        if event.new is None:
            self._requests.pop(event.key, None)
            self._requeued.discard(event.key)
            if self.gave_up:
                self.gave_up.pop(event.key, None)
        actor = event.actor
        if (
            actor is not None
            and (actor in self.ignore_actors or actor == CONTROLLER_MANAGER)
            and event.type != "deleted"
        ):
            return
        self.enqueue(event.key, Priority.CHANGE)

    def owns(self, kind: Kind) -> None:
        """Requeue the owner of each ``kind`` object this controller's kind controls when
        it changes or goes (controller-runtime's ``Owns()``); the controller runs that
        kind's informer too."""
        informer = self.cache.informer(kind)
        ignored = self.ignore_actors | {CONTROLLER_MANAGER}
        informer.add_handler(owner_handler(self.kind, self.enqueue, ignored))
        self.owned.append(informer)

    def add_listener(self, listener: Callable[[ObjectKey, str], None]) -> None:
        """Call ``listener(key, outcome)`` after every reconcile, once the key is done in
        the queue (``success``, ``error``, ``terminal``, ``requeue``, ``requeue_after``):
        how a host knows the queue moved."""
        self._listeners.append(listener)

    async def _resync_loop(self) -> None:
        assert self.resync_period is not None
        await self.informer.synced.wait()
        while True:
            spread = self.resync_period * self.resync_jitter
            await self.clock.sleep(self.resync_period + spread * (2 * self._random() - 1))
            keys = self.informer.cached_keys()
            for start in range(0, len(keys), _RESYNC_CHUNK):
                if start:
                    await asyncio.sleep(0)  # the loop's other tasks, between two chunks
                self.enqueue_many(keys[start : start + _RESYNC_CHUNK], Priority.RESYNC)

    # -- working -------------------------------------------------------------------------------

    async def _worker(self) -> None:  # noqa: PLR0915 - the hot loop, kept inline (see below)
        """Take keys and reconcile them until the queue shuts down.

        One body calls the reconciler (within :attr:`reconcile_timeout`, when there is
        one) and acts on how it ended, each way in a helper of its own; it is written
        here, in the loop, because a resync of 100,000 objects is made of it and a
        coroutine of its own would cost every one of them. When something records spans
        or metrics, :meth:`_traced` opens the key's span and reads the clock before that
        same body, and :meth:`_untraced` closes them after it. Whether anybody records is
        asked again every 64 keys (the host may install an SDK while we run); every
        :data:`_KEYS_PER_TURN` keys the worker lets the loop run anything else that is
        ready.

        A reconcile that returns its last write unawaited (``Result.pending``) is handed
        to a landing task (:mod:`~reconcile.controller.landing`), which finishes the key
        once the write is durable; the worker takes the next key at once, unless
        :attr:`max_pending_writes` writes are landing already.

        Waiting until the cache reflects the key's last write is the cache's part, done
        when the reconciler reads."""
        queue, telemetry = self.queue, self.telemetry
        requests, listeners, forgetting = self._requests, self._listeners, FORGETTING
        failures, gave_up, terminal = self.failures, self.gave_up, self._terminal
        invalid_span: trace.Span = trace.INVALID_SPAN
        bare, asked, turns = False, 0, 0
        while True:
            if not asked:
                asked = 64
                bare = not telemetry.recording and not telemetry.metering
                turns = (turns + 1) % (_KEYS_PER_TURN // 64)
                if not turns:
                    # A turn of the loop for everything else it runs (the host's tasks,
                    # the informer's watch): reconciles that never wait (a resync of a
                    # cache, a provider answering from memory) would otherwise hold it
                    # for the whole backlog, a second for 100,000 keys.
                    await asyncio.sleep(0)
            asked -= 1
            try:
                # A ready key is taken without a coroutine of its own (a no-op reconcile
                # costs about as much as the queue's await would).
                key = queue.get_nowait()
                if key is None:
                    key = await queue.get()
            except QueueShutDown:
                if not self._landing_count:
                    return
                # A write still landing may release a deferred add of its key, which a
                # worker must take: wait for them, then look again.
                await self._wait_landed()
                continue
            gate = self.gate
            if gate is not None:
                if not gate.owns(key):
                    queue.done(key, forget=True)
                    for listener in listeners:
                        listener(key, "skipped")
                    continue
                minimum = gate.minimum(key)
                if minimum > self.informer.revision:
                    if not await self._caught_up(key, minimum):
                        continue
                    if not gate.owns(key):  # the shard moved on, or began draining, meanwhile
                        queue.done(key, forget=True)
                        for listener in listeners:
                            listener(key, "skipped")
                        continue
                # Set for this worker task's context only, until its next key: every
                # write of this reconcile is submitted under the key's shard's fence.
                FENCE.set(gate.fence(key))
            outcome, traced, span, held = "error", None, invalid_span, False
            try:
                if not bare:
                    traced = self._traced(key)
                    span = traced.span
                request = requests.get(key) or self._request(key)
                if self.reconcile_timeout is None:
                    result = await self.reconciler.reconcile(request)
                else:
                    result = await self._bounded(request, self.reconcile_timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a reconciler means retry
                outcome = await self._failed_with(key, exc, span)
            else:
                # The common end (a success while nothing is failing, given up on or
                # recorded as terminal) has nothing to follow.
                if result is None and not (failures or gave_up or terminal):
                    outcome = "success"
                elif result is not None and result.pending is not None:
                    # Its last write lands off the worker; the key stays in flight until
                    # it has (see reconcile.controller.landing).
                    self._hold(key, result, traced, span)
                    held = True
                else:
                    # (Landing._succeeded, inline: a resync's polls end here.)
                    outcome = self._follow(key, result)
                    if terminal and key in terminal:
                        await self._clear_terminal(key)
            finally:
                if held:
                    if traced is not None:
                        traced.block.__exit__(None, None, None)  # the landing ends the span
                else:
                    if traced is not None:
                        self._untraced(traced, outcome)
                    queue.done(key, forget=outcome in forgetting)
            if held:
                if self._landing_count >= self.max_pending_writes:
                    await self._wait_for_room()
                continue
            if listeners:  # after done(): a listener sees the queue as it now is
                for listener in listeners:
                    listener(key, outcome)

    def _request(self, key: ObjectKey) -> Request:
        """A Request for ``key`` not kept yet (the worker reads the kept ones): one per
        cached object, made once and kept for its next reconciles (a deletion drops it; a
        key without an object gets one each time)."""
        request = Request(key)
        if self.informer.get(key) is not None:
            self._requests[key] = request
        return request

    async def _caught_up(self, key: ObjectKey, revision: int) -> bool:
        """Wait (bounded) until the cache reached ``revision``: the last writes of the
        former holder of ``key``'s shard, which a reconcile must not contradict. False
        (the key taken is given back, to come again) when it did not in time."""
        try:
            async with self.clock.timeout(_CATCH_UP):
                await self.informer.wait_for_revision(revision)
        except TimeoutError:
            self.queue.done(key)
            self.queue.add_after(key, _CATCH_UP, Priority.CHANGE)
            return False
        return True

    async def _bounded(self, request: Request, seconds: float) -> Result | None:
        """The reconcile, cancelled after ``seconds`` (controller-runtime's
        ReconciliationTimeout): a reconcile that hangs costs a retry, not a worker."""
        expiry = None
        try:
            async with self.clock.timeout(seconds) as expiry:
                return await self.reconciler.reconcile(request)
        except TimeoutError:
            if expiry is not None and expiry.expired():
                raise DeadlineExceededError(f"the reconcile did not finish within {seconds:g} s") from None
            raise

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the informer, the workers and the resync until cancelled or shut down."""
        self.telemetry.watch_queue(self.name, self.queue, self.workers)
        loop = asyncio.get_running_loop()
        informer = loop.create_task(self.informer.run(), name=f"{self.name}-informer")
        extras = [informer]
        extras += [
            loop.create_task(owned.run(), name=f"{self.name}-owns-{owned.kind.kind}") for owned in self.owned
        ]
        if self.resync_period is not None:
            extras.append(loop.create_task(self._resync_loop(), name=f"{self.name}-resync"))
        workers = [
            loop.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self.workers)
        ]
        self._tasks = extras + workers
        try:
            # Workers end when the queue is shut down; the informer ending early (the store
            # closed) or failing is reported by the Runtime's supervision.
            done, _ = await asyncio.wait([*workers, informer], return_when=asyncio.FIRST_COMPLETED)
            if informer in done and not self.queue.shutting_down:
                informer.result()
                msg = f"{self.name}: the informer stopped"
                raise RuntimeError(msg)
            await asyncio.gather(*workers)
        finally:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self._abandon_landing()
            self.telemetry.forget_queue(self.name)

    async def wait_synced(self) -> None:
        """Wait until the informer's first list is in the cache."""
        await self.informer.synced.wait()

    async def shutdown(self, deadline: float = 30.0) -> bool:
        """Stop taking keys; let in-flight reconciles finish within ``deadline`` seconds.
        Returns False if the deadline cut them short."""
        self.queue.shut_down()
        try:
            # Real time, not the injected clock: a process being stopped has a budget in
            # seconds of the world, whatever drives the reconciles' own time.
            async with asyncio.timeout(deadline):
                await self.queue.wait_idle()
        except TimeoutError:
            return False
        return True
