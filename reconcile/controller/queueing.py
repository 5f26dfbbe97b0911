"""The work queue, with client-go's semantics, in asyncio.

Keys, never events, go through it: a controller is told *which* object to look at and
reads the object itself, so any number of changes to one object collapse into one
reconcile.

* **Dedup**: a key waiting in the queue is there once, however often it is added.
* **Exclusivity**: a key handed out by :meth:`WorkQueue.get` is not handed out again
  until :meth:`WorkQueue.done`; adds meanwhile are deferred into one follow-up.
* **Delays**: :meth:`add_after` parks a key until its time; the earliest deadline wins.
* **Backoff**: :meth:`add_rate_limited` delays a key by ``base * 2**failures`` (capped),
  and by an optional global token bucket; :meth:`forget` resets the key's failures.
* **Priorities with aging**: a key is ordered by the time it was queued plus its
  priority's offset, so a change queued now goes before a resync queued less than the
  offset ago, yet a resync never waits behind changes for longer than that offset.
* **Shutdown**: :meth:`shut_down` stops accepting keys; getters still receive what is
  queued, then :class:`QueueShutDown`; :meth:`drain` waits for in-flight work.
* **Timing** (client-go's queue metrics): how long each key waited from its first add to
  being handed out (to :attr:`WorkQueue.wait_observer`), and how long the keys in
  flight have been processed (:meth:`WorkQueue.processing_times`).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import heapq
import itertools
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import attrs

from reconcile.controller.clocks import Clock, LoopClock

__all__ = ["Priority", "QueueShutDown", "QueueStatistics", "WorkQueue"]

_MAX_EXPONENT = 64

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):  # noqa: N818 - named for what happened, like asyncio.QueueShutDown
    """The queue was shut down and holds nothing more."""


class Priority(enum.IntEnum):
    """How urgent a key is; lower values go first."""

    #: A change someone made (an object was applied, deleted, its status changed).
    CHANGE = 0
    #: A retry or a requested requeue.
    RETRY = 1
    #: A periodic resync or drift poll: level-triggered housekeeping.
    RESYNC = 2


#: A ready key: (order, seq, key, time of its first add, that add's priority as a plain
#: int, whether that add was a delayed one coming due). Of atoms and the key only, so the
#: cyclic collector stops tracking it at its first pass (an enum member would keep every
#: queued entry tracked, and scanned by every collection, while it waits).
_Entry = tuple[float, int, K, float, int, bool]
#: Each priority as a plain int, indexed by the priority.
_PLAIN = [int(p) for p in Priority]


#: Seconds added to a key's queueing time, by priority: how long a resync may be
#: overtaken by changes before it goes first anyway.
DEFAULT_AGING: Mapping[Priority, float] = {Priority.CHANGE: 0.0, Priority.RETRY: 0.0, Priority.RESYNC: 5.0}


@attrs.frozen
class QueueStatistics:
    """A snapshot of the queue."""

    depth: int
    processing: int
    waiting: int
    adds: int
    retries: int


class _TokenBucket:
    """qps tokens a second, up to ``burst`` saved; a reservation may go into debt."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.last: float | None = None

    def reserve(self) -> float:
        now = self.clock.now()
        if self.last is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        self.tokens -= 1
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps


class WorkQueue(Generic[K]):
    """A deduplicating, rate-limited, delaying, prioritized queue of keys."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        qps: float | None = None,
        burst: int = 100,
        aging: Mapping[Priority, float] = DEFAULT_AGING,
    ) -> None:
        self._clock = clock or LoopClock()
        # The loop's own clock is read without a frame of ours (every add and take reads it).
        self._now: Callable[[], float] = time.monotonic if type(self._clock) is LoopClock else self._clock.now
        self._base_delay, self._max_delay = base_delay, max_delay
        self._bucket = None if qps is None else _TokenBucket(qps, burst, self._clock)
        self._aging = dict(aging)
        # The offsets by priority value, for a list index rather than a hash per add.
        self._offsets = [self._aging.get(p, 0.0) for p in Priority]
        self._counter = itertools.count()
        # Ready keys as entries (order, seq, key, time of the key's first add since it
        # was last handed out, that add's priority, whether it came due after a delay),
        # ordered by (order, seq); _queued[key]
        # is the key's live entry, the same tuple (older entries of a key, left behind
        # when it moved up, are skipped when popped). Orders mostly arrive in increasing
        # order (now plus a per-priority constant), so those go to a FIFO that pops in
        # O(1); one that would break its order (a change overtaking a resync backlog) goes
        # to a heap; the smaller head of the two is next.
        self._fifo: collections.deque[_Entry[K]] = collections.deque()
        self._heap: list[_Entry[K]] = []
        self._queued: dict[K, _Entry[K]] = {}
        # Keys added while being processed: requeued at done() with this order (and the
        # priority and delayedness of the first such add).
        self._deferred: dict[K, tuple[float, Priority, bool]] = {}
        # Keys handed out, with when.
        self._processing: dict[K, float] = {}
        #: Called with the seconds each key waited between its first add and being handed out.
        self.wait_observer: Callable[[float], None] | None = None
        # The entry of the key handed out last, and when (see waited, taken_priority).
        self._taken: _Entry[K] | None = None
        self._taken_at = 0.0
        # Delayed keys: heap of (ready_at, seq, key, priority); _waiting[key] = ready_at.
        self._delayed: list[tuple[float, int, K, Priority]] = []
        self._waiting: dict[K, float] = {}
        self._failures: collections.Counter[K] = collections.Counter()
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        # Nothing queued, delayed or processed; wait_idle's waiters (a flag and futures,
        # not an asyncio.Event: every add clears it, and an attribute costs no call).
        self._is_idle = True
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline: float | None = None
        self._shutting_down = False
        self._adds = 0
        self._retries = 0

    # -- adding ------------------------------------------------------------------------

    def add(self, key: K, priority: Priority = Priority.CHANGE) -> None:
        """Queue ``key`` now (a no-op if it is already queued at the same or better order)."""
        if self._shutting_down:
            return
        self._adds += 1
        now = self._now()
        self._put(key, now + self._offsets[priority], now, priority, False)  # noqa: FBT003 - positional (see _put)

    def add_many(self, keys: Iterable[K], priority: Priority = Priority.RESYNC) -> None:
        """:meth:`add` for many keys at once (a resync): one clock reading, one order."""
        if self._shutting_down:
            return
        now = self._now()
        order = now + self._offsets[priority]
        put = self._put
        count = 0
        for key in keys:
            count += 1
            put(key, order, now, priority, False)  # noqa: FBT003 - positional (see _put)
        self._adds += count

    def _put(self, key: K, order: float, now: float, priority: Priority, delayed: bool) -> None:
        """Queue ``key`` at ``order``, or defer it while it is processed.

        A new ready entry wakes a waiting worker. The one way into the ready queue (every
        add, a delayed key coming due, a deferred one at done()), hashing the key once
        when it is new; ``delayed`` is positional, as a keyword would cost every add (a
        resync's ``add_many`` makes 100,000 of these calls)."""
        if self._processing and key in self._processing:
            self._defer(key, order, priority, delayed=delayed)
            return
        entry = (order, next(self._counter), key, now, _PLAIN[priority], delayed)
        current = self._queued.setdefault(key, entry)
        if current is not entry:
            if current[0] <= order:
                return
            # Moved up: it has waited since its first add, for that add's reason.
            entry = self._queued[key] = (order, entry[1], key, current[3], current[4], current[5])
        fifo = self._fifo
        if not fifo or order >= fifo[-1][0]:
            fifo.append(entry)
        else:
            heapq.heappush(self._heap, entry)
        self._is_idle = False
        if self._getters:
            self._wake_one()

    def _defer(self, key: K, order: float, priority: Priority, *, delayed: bool) -> None:
        previous = self._deferred.get(key)
        self._deferred[key] = (
            (order, priority, delayed) if previous is None else (min(previous[0], order), *previous[1:])
        )

    def add_after(self, key: K, delay: float, priority: Priority = Priority.RETRY) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending deadline wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key, priority)
            return
        ready_at = self._now() + delay
        previous = self._waiting.get(key)
        if previous is not None and previous <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._delayed, (ready_at, next(self._counter), key, priority))
        self._is_idle = False
        if self._timer_deadline is None or ready_at < self._timer_deadline:
            self._restart_timer(ready_at)

    def add_rate_limited(
        self, key: K, priority: Priority = Priority.RETRY, *, at_least: float = 0.0
    ) -> float:
        """Queue ``key`` after its backoff (and the global bucket's); count the failure;
        return the delay. ``at_least`` (a provider's ``retry_after``) is where the backoff
        starts for this key: a failure that repeats waits it, then twice it, and so on,
        up to the maximum delay (or ``at_least`` itself when that is longer)."""
        failures = self._failures[key]
        self._failures[key] = failures + 1
        self._retries += 1
        # The exponent is capped: 2.0**1024 overflows, and 2**64 times any base is past
        # every sensible maximum already.
        growth = 2.0 ** min(failures, _MAX_EXPONENT)
        delay = max(min(max(self._base_delay, at_least) * growth, self._max_delay), at_least)
        if self._bucket is not None:
            delay = max(delay, self._bucket.reserve())
        self.add_after(key, delay, priority)
        return delay

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts from the base delay again."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited adds ``key`` had since it was last forgotten."""
        return self._failures[key]

    # -- delayed keys --------------------------------------------------------------------

    def _restart_timer(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_deadline = deadline
        self._timer = asyncio.get_running_loop().create_task(self._fire_at(deadline), name="workqueue-timer")

    async def _fire_at(self, deadline: float) -> None:
        await self._clock.sleep(deadline - self._clock.now())
        self._timer, self._timer_deadline = None, None
        self._release_due()

    def _release_due(self) -> None:
        now = self._clock.now()
        while self._delayed and self._delayed[0][0] <= now:
            ready_at, _, key, priority = heapq.heappop(self._delayed)
            if self._waiting.get(key) != ready_at:
                continue  # superseded by an earlier deadline
            del self._waiting[key]
            if not self._shutting_down:
                self._adds += 1
                self._put(key, now + self._offsets[priority], now, priority, True)  # noqa: FBT003 - positional (see _put)
        while self._delayed and self._waiting.get(self._delayed[0][2]) != self._delayed[0][0]:
            heapq.heappop(self._delayed)
        if self._delayed:
            self._restart_timer(self._delayed[0][0])
        self._check_idle()

    # -- taking --------------------------------------------------------------------------

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def get_nowait(self) -> K | None:
        """The next key, marked as processing, or None when nothing is ready."""
        fifo, heap = self._fifo, self._heap
        while fifo or heap:
            entry = heapq.heappop(heap) if heap and (not fifo or heap[0] < fifo[0]) else fifo.popleft()
            key = entry[2]
            live = self._queued.pop(key, None)
            if live is not entry:
                if live is not None:
                    self._queued[key] = live  # stale: the key moved up since; its entry stays
                continue  # (or stale: the key was taken since)
            now = self._now()
            self._processing[key] = now
            self._taken, self._taken_at = entry, now
            if self.wait_observer is not None:
                self.wait_observer(now - entry[3])
            return key
        if self._shutting_down:
            raise QueueShutDown
        return None

    @property
    def waited(self) -> float:
        """The seconds the key handed out last waited, from its first add (what a caller
        that meters reads after a take, instead of a callback per key for nobody)."""
        return 0.0 if self._taken is None else self._taken_at - self._taken[3]

    @property
    def taken_priority(self) -> Priority:
        """Why the key handed out last was queued: the priority of its first add since
        it was last handed out (a controller's span says "change", "retry", "resync")."""
        return Priority.CHANGE if self._taken is None else Priority(self._taken[4])

    @property
    def taken_after_delay(self) -> bool:
        """Whether that add was an :meth:`add_after` (or a rate-limited add) coming due."""
        return self._taken is not None and self._taken[5]

    async def get(self) -> K:
        """Wait for the next key; :class:`QueueShutDown` once shut down and empty."""
        while True:
            key = self.get_nowait()
            if key is not None:
                return key
            getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                # Pass the wake-up on if we were woken and cancelled at once.
                if getter.done() and not getter.cancelled():
                    self._wake_one()
                raise

    def done(self, key: K, *, forget: bool = False) -> None:
        """Processing of ``key`` finished (with ``forget``: and succeeded, as
        :meth:`forget`); a deferred add of it is queued now."""
        self._processing.pop(key, None)
        if forget and self._failures:
            self._failures.pop(key, None)
        if self._deferred:
            deferred = self._deferred.pop(key, None)
            if deferred is not None:
                # Also while draining, as client-go's ShutDownWithDrain does: the key
                # changed while it was processed, before the drain began, and that change
                # is still owed a reconcile.
                order, priority, delayed = deferred
                self._put(key, order, self._now(), priority, delayed)
        if not self._queued and not self._processing:
            self._check_idle()

    # -- lifecycle -------------------------------------------------------------------------

    def _check_idle(self) -> None:
        if not self._queued and not self._processing and (self._shutting_down or not self._waiting):
            self._is_idle = True
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def shut_down(self) -> None:
        """Accept no more keys; delayed keys are dropped; queued keys can still be taken."""
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_deadline = None, None
        self._waiting.clear()
        self._delayed.clear()
        for getter in self._getters:
            if not getter.done():
                getter.set_result(None)
        self._getters.clear()
        self._check_idle()

    @property
    def shutting_down(self) -> bool:
        """Whether :meth:`shut_down` was called."""
        return self._shutting_down

    async def wait_idle(self) -> None:
        """Wait until nothing is queued, delayed or being processed."""
        if self._is_idle:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(waiter)
        await waiter

    async def drain(self) -> None:
        """Shut down, then wait until the queued and in-flight keys are done."""
        self.shut_down()
        await self.wait_idle()

    def processing_times(self) -> list[float]:
        """Seconds each key in flight has been processed so far."""
        now = self._clock.now()
        return [now - started for started in self._processing.values()]

    def __len__(self) -> int:
        """The number of keys ready to be taken (the depth)."""
        return len(self._queued)

    def statistics(self) -> QueueStatistics:
        """Depth, in-flight and delayed counts, and totals."""
        return QueueStatistics(
            len(self._queued), len(self._processing), len(self._waiting), self._adds, self._retries
        )
