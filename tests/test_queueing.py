"""Work queue semantics (client-go's), driven by a fake clock: nothing sleeps for real."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconcile.controller.queueing import Priority, QueueShutDown, WorkQueue
from reconcile.testing import FakeClock

DEADLINE = 5.0  # real seconds a test waits for something that should be immediate


async def take(queue: WorkQueue[str]) -> str:
    """The next key, failing the test rather than hanging."""
    return await asyncio.wait_for(queue.get(), DEADLINE)


def drain_ready(queue: WorkQueue[str]) -> list[str]:
    """Every key ready now, in order (each marked processing)."""
    keys = []
    while (key := queue.get_nowait()) is not None:
        keys.append(key)
    return keys


@pytest.fixture
def clock() -> FakeClock:
    """A hand-driven clock."""
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue[str]:
    """A queue on the fake clock."""
    return WorkQueue(clock=clock)


class TestDedupAndExclusivity:
    """A key is queued once and processed by one worker at a time."""

    async def test_dedup(self, queue: WorkQueue[str]) -> None:
        """Adding a queued key again does not queue it twice."""
        for _ in range(5):
            queue.add("a")
        queue.add("b")
        assert len(queue) == 2
        assert drain_ready(queue) == ["a", "b"]

    async def test_fifo_within_a_priority(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """Keys of one priority come out in the order they were first added."""
        for key in "cab":
            queue.add(key)
            clock.advance(0.001)
        assert drain_ready(queue) == ["c", "a", "b"]

    async def test_not_handed_out_twice_while_processing(self, queue: WorkQueue[str]) -> None:
        """A key being processed is not given to another worker; re-adds defer to one follow-up."""
        queue.add("a")
        assert await take(queue) == "a"
        queue.add("a")
        queue.add("a")
        assert queue.get_nowait() is None, "a is in flight"
        queue.done("a")
        assert drain_ready(queue) == ["a"], "exactly one follow-up"
        queue.done("a")
        assert queue.get_nowait() is None

    async def test_concurrent_workers_never_share_a_key(self, queue: WorkQueue[str]) -> None:
        """Many workers and many re-adds: no key is ever processed twice at once."""
        active: set[str] = set()
        processed = 0
        enough = asyncio.Event()

        async def worker() -> None:
            nonlocal processed
            while True:
                try:
                    key = await queue.get()
                except QueueShutDown:
                    return
                assert key not in active
                active.add(key)
                await asyncio.sleep(0)
                if processed < 200:
                    queue.add(key)  # re-added while in flight
                processed += 1
                if processed >= 200:
                    enough.set()
                active.discard(key)
                queue.done(key)

        for i in range(10):
            queue.add(f"k{i % 3}")
        workers = [asyncio.create_task(worker()) for _ in range(8)]
        await asyncio.wait_for(enough.wait(), DEADLINE)
        await asyncio.wait_for(queue.drain(), DEADLINE)
        await asyncio.wait_for(asyncio.gather(*workers), DEADLINE)
        assert processed >= 200


class TestDelays:
    """add_after and the fake clock."""

    async def test_add_after(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """A delayed key becomes ready only when its time comes."""
        queue.add_after("a", 10)
        assert queue.get_nowait() is None
        clock.advance(9.9)
        await asyncio.sleep(0)
        assert queue.get_nowait() is None
        clock.advance(0.2)
        assert await take(queue) == "a"

    async def test_earliest_deadline_wins(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """Adding a delayed key again keeps the earlier deadline, and fires once."""
        queue.add_after("a", 10)
        queue.add_after("a", 3)
        queue.add_after("a", 20)
        assert queue.statistics().waiting == 1
        clock.advance(3)
        assert await take(queue) == "a"
        queue.done("a")
        clock.advance(30)
        await asyncio.sleep(0)
        assert queue.get_nowait() is None, "the superseded deadlines do not fire"

    async def test_delayed_keys_in_deadline_order(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """Several delayed keys come out in deadline order."""
        queue.add_after("late", 5)
        queue.add_after("early", 1)
        clock.advance(1)
        assert await take(queue) == "early"
        clock.advance(4)
        assert await take(queue) == "late"


class TestBackoff:
    """Per-key exponential backoff and the global token bucket."""

    async def test_backoff_grows_and_resets(self, queue: WorkQueue[str]) -> None:
        """Delays double from 5 ms per failure, are per key, and reset on forget."""
        delays = [queue.add_rate_limited("a") for _ in range(5)]
        assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
        assert queue.add_rate_limited("b") == pytest.approx(0.005)
        assert queue.num_requeues("a") == 5
        queue.forget("a")
        assert queue.num_requeues("a") == 0
        assert queue.add_rate_limited("a") == pytest.approx(0.005)

    async def test_backoff_is_capped(self, clock: FakeClock) -> None:
        """The delay never exceeds max_delay (1000 s by default)."""
        queue: WorkQueue[str] = WorkQueue(clock=clock)
        delays = [queue.add_rate_limited("a") for _ in range(30)]
        assert max(delays) == 1000.0
        assert delays[-1] == 1000.0

    async def test_token_bucket(self, clock: FakeClock) -> None:
        """With qps and burst, retries beyond the burst are spaced by 1/qps."""
        queue: WorkQueue[str] = WorkQueue(clock=clock, qps=10, burst=2, base_delay=0.0001)
        delays = [queue.add_rate_limited(f"k{i}") for i in range(5)]
        assert delays[:2] == pytest.approx([0.0001, 0.0001])
        assert delays[2:] == pytest.approx([0.1, 0.2, 0.3])

    async def test_backoff_never_overflows(self, queue: WorkQueue[str]) -> None:
        """Thousands of failures of one key keep returning the maximum delay
        (``2.0 ** 1024`` would raise OverflowError on the retry path)."""
        delays = [queue.add_rate_limited("a") for _ in range(2000)]
        assert delays[-1] == delays[1500] == 1000.0
        assert queue.num_requeues("a") == 2000


class TestPriorities:
    """Changes overtake resyncs, but resyncs age."""

    async def test_change_overtakes_fresh_resync(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """A change queued after a backlog of resyncs goes first."""
        for i in range(100):
            queue.add(f"resync-{i}", Priority.RESYNC)
        clock.advance(1)
        queue.add("change", Priority.CHANGE)
        assert drain_ready(queue)[0] == "change"

    async def test_resync_ages_past_later_changes(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """A resync waiting longer than its aging offset goes before newer changes."""
        queue.add("resync", Priority.RESYNC)
        clock.advance(6)
        queue.add("change", Priority.CHANGE)
        assert drain_ready(queue) == ["resync", "change"]

    async def test_upgrade_priority_of_queued_key(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """A queued resync that becomes a change moves up."""
        queue.add("x", Priority.CHANGE)
        queue.add("a", Priority.RESYNC)
        clock.advance(1)
        queue.add("y", Priority.CHANGE)
        queue.add("a", Priority.CHANGE)
        assert drain_ready(queue) == ["x", "y", "a"]


class TestShutdown:
    """Shutdown and drain."""

    async def test_getters_are_released(self, queue: WorkQueue[str]) -> None:
        """A waiting get raises QueueShutDown when the queue shuts down empty."""
        getter = asyncio.create_task(queue.get())
        await asyncio.sleep(0)
        queue.shut_down()
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(getter, DEADLINE)

    async def test_drain_waits_for_in_flight(self, queue: WorkQueue[str]) -> None:
        """drain hands out what is queued, ignores new adds, and waits for done."""
        queue.add("a")
        queue.add("b")
        assert await take(queue) == "a"
        drained = asyncio.create_task(queue.drain())
        await asyncio.sleep(0)  # let drain() shut the queue down
        queue.add("c")
        assert await take(queue) == "b"
        with pytest.raises(QueueShutDown):
            queue.get_nowait()
        assert not drained.done()
        queue.done("a")
        queue.done("b")
        await asyncio.wait_for(drained, DEADLINE)

    async def test_drain_delivers_a_key_readded_while_processing(self, queue: WorkQueue[str]) -> None:
        """A key re-added while it was processed, before the drain began, is delivered once
        more during the drain (client-go's TestQueueDrainageUsingShutDownWithDrainWithDirtyItem):
        the change seen mid-reconcile is reconciled before the queue stops."""
        queue.add("a")
        assert await take(queue) == "a"
        queue.add("a")  # changed while processing: deferred
        drained = asyncio.create_task(queue.drain())
        await asyncio.sleep(0)
        queue.done("a")
        assert await take(queue) == "a"
        assert not drained.done()
        queue.done("a")
        await asyncio.wait_for(drained, DEADLINE)
        with pytest.raises(QueueShutDown):
            queue.get_nowait()

    async def test_statistics(self, queue: WorkQueue[str]) -> None:
        """statistics() reports depth, in-flight, waiting, adds and retries."""
        queue.add("a")
        queue.add("b")
        queue.add_rate_limited("c")
        await take(queue)
        stats = queue.statistics()
        assert (stats.depth, stats.processing, stats.waiting, stats.retries) == (1, 1, 1, 1)


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=30),  # key
            st.sampled_from(list(Priority)),
            st.floats(min_value=0, max_value=5, allow_nan=False),  # time passing first
        ),
        max_size=200,
    )
)
def test_keys_come_out_in_order_of_priority_and_arrival(adds: list[tuple[int, Priority, float]]) -> None:
    """Whatever mix of adds, re-adds and priorities: each key once, in the order of its
    best (earliest aged) add, ties by arrival; the same as a plain sort."""
    clock = FakeClock()
    queue: WorkQueue[int] = WorkQueue(clock=clock)
    best: dict[int, tuple[float, int]] = {}
    for arrival, (key, priority, wait) in enumerate(adds):
        clock.advance(wait)
        order = clock.now() + queue._aging.get(priority, 0.0)
        if key not in best or order < best[key][0]:
            best[key] = (order, arrival)
        queue.add(key, priority)
    taken = []
    while (key := queue.get_nowait()) is not None:
        taken.append(key)
    assert taken == sorted(best, key=lambda k: best[k])


@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=8),  # keys
            st.sampled_from(list(Priority)),
            st.floats(min_value=0, max_value=5, allow_nan=False),
            st.booleans(),  # add_many rather than one add per key
        ),
        max_size=60,
    )
)
def test_add_many_is_many_adds(steps: list[tuple[list[int], Priority, float, bool]]) -> None:
    """add_many(keys) leaves the queue exactly as adding each key in turn would."""
    clock_one, clock_many = FakeClock(), FakeClock()
    one: WorkQueue[int] = WorkQueue(clock=clock_one)
    many: WorkQueue[int] = WorkQueue(clock=clock_many)
    for keys, priority, wait, bulk in steps:
        clock_one.advance(wait)
        clock_many.advance(wait)
        for key in keys:
            one.add(key, priority)
        if bulk:
            many.add_many(keys, priority)
        else:
            for key in keys:
                many.add(key, priority)
    assert one.statistics() == many.statistics()
    drained = []
    for queue in (one, many):
        taken = []
        while (key := queue.get_nowait()) is not None:
            taken.append(key)
        drained.append(taken)
    assert drained[0] == drained[1]


async def test_add_many_defers_keys_in_flight(clock: FakeClock) -> None:
    """A key being processed is deferred to one follow-up, as with add; idle workers wake."""
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    assert queue.get_nowait() == "a"
    waiter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.add_many(["a", "b"])
    assert await asyncio.wait_for(waiter, DEADLINE) == "b"
    assert queue.get_nowait() is None, "a is still in flight"
    queue.done("a")
    assert queue.get_nowait() == "a"


class TestTiming:
    """What the queue reports for client-go's queue metrics."""

    async def test_wait_counts_from_the_first_add(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """A key added, added again, then moved up by a change waited since its first add;
        a key re-added while processed waits from when it was queued again."""
        waits: list[float] = []
        queue.wait_observer = waits.append
        queue.add("a", Priority.RESYNC)
        clock.advance(2)
        queue.add("a", Priority.RESYNC)
        queue.add("a", Priority.CHANGE)  # a better order: same wait, counted from the first add
        clock.advance(1)
        assert queue.get_nowait() == "a"
        assert waits == [3.0]
        queue.add("a")  # deferred while processing
        clock.advance(4)
        queue.done("a")
        clock.advance(0.5)
        assert queue.get_nowait() == "a"
        assert waits == [3.0, 0.5]

    async def test_processing_times(self, queue: WorkQueue[str], clock: FakeClock) -> None:
        """How long each key in flight has been processed; done keys drop out."""
        queue.add("a")
        queue.add("b")
        assert queue.get_nowait() == "a"
        clock.advance(2)
        assert queue.get_nowait() == "b"
        clock.advance(1)
        assert sorted(queue.processing_times()) == [1.0, 3.0]
        queue.done("a")
        assert queue.processing_times() == [1.0]
        assert queue.statistics().processing == 1

    async def test_taken_priority_and_wait_of_the_key_handed_out(
        self, queue: WorkQueue[str], clock: FakeClock
    ) -> None:
        """After a take, ``waited`` and ``taken_priority`` describe that key: the priority
        of its first add since it was last handed out, kept when a change moves it up, and
        that of the first add deferred while it was processed."""
        queue.add("a", Priority.RESYNC)
        clock.advance(2)
        queue.add("a", Priority.CHANGE)  # moves up; still queued by the resync
        queue.add("b", Priority.RETRY)
        assert queue.get_nowait() == "a"
        assert (queue.taken_priority, queue.waited) == (Priority.RESYNC, 2.0)
        queue.add("a", Priority.RETRY)  # deferred while processing
        queue.add("a", Priority.CHANGE)
        clock.advance(1)
        assert queue.get_nowait() == "b"
        assert (queue.taken_priority, queue.waited) == (Priority.RETRY, 1.0)
        queue.done("a")
        assert queue.get_nowait() == "a"
        assert queue.taken_priority == Priority.RETRY


async def test_done_with_forget_resets_the_backoff(queue: WorkQueue[str]) -> None:
    """``done(key, forget=True)`` is done and forget in one call; plain done keeps the
    failures."""
    for key in ("a", "b"):
        queue.add_rate_limited(key)
        queue.add_rate_limited(key)
    queue.add("a")
    queue.add("b")
    assert drain_ready(queue) == ["a", "b"]
    queue.done("a", forget=True)
    queue.done("b")
    assert (queue.num_requeues("a"), queue.num_requeues("b")) == (0, 2)


async def test_wait_idle_wakes_every_waiter_and_returns_at_once_when_idle(queue: WorkQueue[str]) -> None:
    """Waiters of ``wait_idle`` all wake when the last key is done; an idle queue
    answers at once."""
    await asyncio.wait_for(queue.wait_idle(), DEADLINE)
    queue.add("a")
    waiters = [asyncio.ensure_future(queue.wait_idle()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    assert queue.get_nowait() == "a"
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters), "a key in flight is not idle"
    queue.done("a")
    await asyncio.wait_for(asyncio.gather(*waiters), DEADLINE)
