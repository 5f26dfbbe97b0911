"""Deadlines: clocks' timeout blocks, and provider calls that hang."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from helpers import running, settle, widget

from reconcile import Client, ObjectKey, Runtime
from reconcile.controller import Controller, LoopClock, Request, Result, WorkQueue
from reconcile.controller.deadlines import Deadlines
from reconcile.errors import DeadlineExceededError
from reconcile.model.external import ANNOTATION_CREATE_PENDING
from reconcile.testing import WIDGET, FakeClock, MemoryCloud, MemoryProvider
from reconcile.testing.memory import MemoryClient

DEADLINE = 20.0


class TestFakeClockSleep:
    """``FakeClock.sleep`` wakes once the clock has been advanced by its seconds."""

    @pytest.mark.parametrize(
        ("seconds", "steps"),
        [(0.3, [0.1, 0.1, 0.1]), (0.01, [0.001] * 10), (0.005, [0.0045, 0.0005])],
        ids=["thirds", "tenths", "ninety-ten"],
    )
    async def test_wakes_when_advanced_by_its_seconds_in_steps(
        self, clock: FakeClock, seconds: float, steps: list[float]
    ) -> None:
        """Advanced by exactly its seconds, in steps whose float sum falls short of them
        (1800000000.2999997 for three tenths), it wakes; a moment before, it does not."""
        task = asyncio.create_task(clock.sleep(seconds))
        await settle(lambda: clock.sleepers == 1)
        for step in steps[:-1]:
            clock.advance(step)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done()
        clock.advance(steps[-1])
        await asyncio.wait_for(task, DEADLINE)
        assert clock.now() == pytest.approx(1_800_000_000.0 + seconds, abs=1e-6)

    async def test_a_deadline_computed_from_now_is_woken(self, clock: FakeClock) -> None:
        """A caller's ``sleep(deadline - now())`` (the work queue's timer) wakes when the
        clock reaches the deadline it computed, despite the rounding of both sums."""
        clock.advance(0.1)
        deadline = clock.now() + 0.2
        task = asyncio.create_task(clock.sleep(deadline - clock.now()))
        await settle(lambda: clock.sleepers == 1)
        clock.advance(0.1)
        clock.advance(0.1)
        await asyncio.wait_for(task, DEADLINE)

    async def test_a_delayed_key_comes_due(self, clock: FakeClock) -> None:
        """A work queue's ``add_after(key, 0.3)`` is ready once the clock was advanced by
        0.3 s in three steps (its timer compares the deadline with ``now()``)."""
        queue: WorkQueue[str] = WorkQueue(clock=clock)
        queue.add_after("k", 0.3)
        await settle(lambda: clock.sleepers == 1)
        for _ in range(3):
            clock.advance(0.1)
        await settle(lambda: len(queue) == 1)
        assert queue.get_nowait() == "k"


class TestFakeClockTimeout:
    """``FakeClock.timeout`` behaves like ``asyncio.timeout`` on fake time."""

    async def test_fires_when_time_passes_the_deadline(self, clock: FakeClock) -> None:
        """Not a moment before; then TimeoutError, and the block was cancelled."""
        reached: list[str] = []

        async def block() -> None:
            async with clock.timeout(5) as expiry:
                try:
                    await asyncio.Event().wait()
                finally:
                    reached.append("cancelled")
            assert expiry.expired()  # pragma: no cover - never reached

        task = asyncio.create_task(block())
        await settle(lambda: clock.sleepers == 1)
        clock.advance(4.9)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done()
        clock.advance(0.1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(task, DEADLINE)
        assert reached == ["cancelled"]

    async def test_a_finished_block_is_never_cancelled_later(self, clock: FakeClock) -> None:
        """The deadline is dropped when the block ends, even if it is due in the same turn."""
        async with clock.timeout(5) as expiry:
            pass
        assert not expiry.expired()
        assert clock.sleepers == 0
        clock.advance(10)
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # still running: no stray cancellation arrived

        async with clock.timeout(5):
            clock.advance(5)  # due now; its callback runs after the block is left
        for _ in range(5):
            await asyncio.sleep(0)

    async def test_an_outside_cancellation_stays_a_cancellation(self, clock: FakeClock) -> None:
        """Cancelling the task is not turned into a TimeoutError."""

        async def block() -> None:
            async with clock.timeout(5):
                await asyncio.Event().wait()

        task = asyncio.create_task(block())
        await settle(lambda: clock.sleepers == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_the_loop_clock_is_asyncio_timeout(self) -> None:
        """LoopClock.timeout is asyncio's (0 s: expired at the next turn, no waiting)."""
        with pytest.raises(TimeoutError):
            async with LoopClock().timeout(0) as expiry:
                await asyncio.Event().wait()
        assert expiry.expired()


def hang_on(cloud: MemoryCloud, clock: FakeClock, operation: str) -> list[int]:
    """Make ``operation`` hang (on fake time) while the returned list holds a 1."""
    hanging = [1]
    enter = cloud.enter

    async def entering(name: str) -> None:
        await enter(name)
        if name == operation and hanging:
            await clock.sleep(3600)

    cloud.enter = entering  # type: ignore[method-assign]
    return hanging


def manifest(kind: str, name: str) -> dict[str, object]:
    """A Bucket (deterministic identity) or a Note (identity chosen by the system)."""
    spec = {"name": name, "value": "v"} if kind == "Bucket" else {"text": "t"}
    return {"apiVersion": "memory.reconcile.dev/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def hurried(db: Path, cloud: MemoryCloud, clock: FakeClock, provider_timeout: float = 5) -> Runtime:
    """A Runtime over ``cloud`` on the fake clock: one attempt per provider call, cut
    short after ``provider_timeout`` fake seconds."""
    return Runtime(
        db,
        providers=[MemoryProvider(cloud)],
        clock=clock,
        wall_clock=clock,
        provider_timeout=provider_timeout,
        provider_attempts=1,
    )


def synced(runtime: Runtime, kind: str, name: str) -> tuple[str, str]:
    """The Synced condition's reason and message, as the kind's controller caches them."""
    controller = runtime.controllers[f"{kind.lower()}.memory.reconcile.dev"]
    obj = controller.informer.get(ObjectKey("memory.reconcile.dev", kind, "default", name))
    condition = None if obj is None else obj.status.condition("Synced")
    return ("", "") if condition is None else (condition.reason, condition.message)


class TestProviderTimeout:
    """A provider call that never answers costs a retry, not a worker."""

    async def test_a_hung_create_is_retried_and_made_once(self, db_path: Path, clock: FakeClock) -> None:
        """Deterministic identity: the create is cut short after provider_timeout, the
        status says why, the next attempt creates it, once."""
        cloud = MemoryCloud(clock=clock)
        hanging = hang_on(cloud, clock, "create")
        runtime = hurried(db_path, cloud, clock)
        async with runtime:
            await runtime.apply(manifest("Bucket", "b"))
            await settle(lambda: cloud.calls["create"] == 1 and clock.sleepers >= 2)
            clock.advance(5)
            message = "provider create did not answer within 5 s"
            await settle(lambda: synced(runtime, "Bucket", "b") == ("ReconcileError", message))
            assert "b" not in cloud.items
            hanging.clear()
            clock.advance(3600)  # past any backoff; the hung sleep ends too, cancelled long ago
            ready = await runtime.wait_ready("Bucket", "b", timeout=DEADLINE)
        assert ready.metadata.annotations.get(ANNOTATION_CREATE_PENDING) is None
        assert cloud.calls["create"] == 2
        assert list(cloud.items) == ["b"]

    async def test_a_create_that_happened_then_hung_is_found_not_repeated(
        self, db_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The create took effect but its answer never came: the kept pending marker makes
        the next reconcile look first, find it, and record CreateSucceeded."""
        cloud = MemoryCloud(clock=clock)
        create = MemoryClient.create
        hanging = [1]

        async def create_then_hang(self: MemoryClient, resource: Any) -> str | None:
            made = await create(self, resource)
            if hanging:
                await clock.sleep(3600)
            return made

        monkeypatch.setattr(MemoryClient, "create", create_then_hang)
        runtime = hurried(db_path, cloud, clock)
        async with runtime:
            await runtime.apply(manifest("Bucket", "b"))
            await settle(lambda: "b" in cloud.items and clock.sleepers >= 2)
            hanging.clear()
            clock.advance(5)
            await settle(lambda: synced(runtime, "Bucket", "b")[0] == "ReconcileError")
            clock.advance(1)
            await runtime.wait_ready("Bucket", "b", timeout=DEADLINE)
            history = await runtime.client.history("Bucket", "b")
        outcomes = [
            (e.type, (e.data or {}).get("message"))
            for e in history
            if e.type.startswith("Create") and e.type != "Created"
        ]
        assert outcomes == [
            ("CreateRequested", None),
            ("CreateFailed", "provider create did not answer within 5 s"),
            ("CreateSucceeded", "found after an interrupted create"),
        ]
        assert cloud.calls["create"] == 1

    async def test_a_hung_create_of_unknowable_identity_stops(self, db_path: Path, clock: FakeClock) -> None:
        """The system chooses the id: a create cut short may have made something, so the
        engine stops with CreatePendingUnknown instead of risking a duplicate."""
        cloud = MemoryCloud(clock=clock)
        hang_on(cloud, clock, "create")
        runtime = hurried(db_path, cloud, clock)
        async with runtime:
            await runtime.apply(manifest("Note", "n"))
            await settle(lambda: cloud.calls["create"] == 1 and clock.sleepers >= 2)
            clock.advance(5)
            await settle(lambda: synced(runtime, "Note", "n")[0] == "ReconcileError")
            clock.advance(1)  # past the backoff: the retry finds the pending marker
            await settle(lambda: synced(runtime, "Note", "n")[0] == "CreatePendingUnknown")
        assert cloud.calls["create"] == 1, "never created twice"

    async def test_the_providers_own_timeout_keeps_its_message(self, db_path: Path, clock: FakeClock) -> None:
        """A TimeoutError the provider raises itself is a transient failure with its own
        words, not reported as the engine's deadline."""
        cloud = MemoryCloud(clock=clock)
        cloud.fail_next("observe", TimeoutError("connect timed out"))
        runtime = hurried(db_path, cloud, clock, provider_timeout=60)
        async with runtime:
            await runtime.apply(manifest("Bucket", "b"))
            await settle(lambda: synced(runtime, "Bucket", "b") == ("ReconcileError", "connect timed out"))
            clock.advance(1)
            await runtime.wait_ready("Bucket", "b", timeout=DEADLINE)


class TestReconcileTimeout:
    """``Controller(reconcile_timeout=...)``: a reconcile that hangs is cut short and retried."""

    async def test_a_hung_reconcile_is_retried_with_backoff(self, client: Client, clock: FakeClock) -> None:
        """Cancelled after the timeout (on the controller's clock), counted as an error,
        retried after the key's backoff; other keys go on meanwhile."""
        await client.apply(widget("slow"))
        await client.apply(widget("fast"))
        calls: dict[str, int] = {}
        cancelled: list[str] = []

        class Hanging:
            async def reconcile(self, request: Request) -> Result | None:
                calls[request.name] = calls.get(request.name, 0) + 1
                if request.name == "slow" and calls["slow"] == 1:
                    try:
                        await clock.sleep(3600)
                    except asyncio.CancelledError:
                        cancelled.append(request.name)
                        raise
                return None

        controller = Controller(
            client, WIDGET, Hanging(), clock=clock, workers=2, resync_period=None, reconcile_timeout=5
        )
        key = ObjectKey(WIDGET.api_group, WIDGET.kind, "default", "slow")
        async with running(controller):
            await settle(lambda: calls.get("slow") == 1 and calls.get("fast") == 1)
            clock.advance(5)
            await settle(lambda: controller.queue.num_requeues(key) == 1)
            assert cancelled == ["slow"]
            assert calls["slow"] == 1, "not retried before its backoff"
            clock.advance(0.005)
            await settle(lambda: calls["slow"] == 2)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            assert controller.queue.num_requeues(key) == 0, "the retry succeeded"


class TestDeadlines:
    """One watchdog for many calls."""

    async def test_only_the_late_call_is_cut_and_the_watchdog_ends(self, clock: FakeClock) -> None:
        """Two calls in flight, one finishes: the other is cancelled at its deadline with
        DeadlineExceededError naming it; then the watchdog ends (no sleeper left)."""
        deadlines = Deadlines(clock, 5, "provider")
        release = asyncio.Event()

        async def quick() -> str:
            await release.wait()
            return "done"

        hung = asyncio.create_task(deadlines.call("create", clock.sleep, 3600))
        fast = asyncio.create_task(deadlines.call("observe", quick))
        await settle(lambda: clock.sleepers == 2)  # the hung call and the watchdog
        release.set()
        assert await asyncio.wait_for(fast, DEADLINE) == "done"
        clock.advance(5)
        with pytest.raises(DeadlineExceededError, match="provider create did not answer within 5 s"):
            await asyncio.wait_for(hung, DEADLINE)
        await settle(lambda: clock.sleepers == 0)
        assert await deadlines.call("observe", quick) == "done"  # a new watchdog when needed
        await deadlines.close()

    async def test_a_swallowed_cancellation_leaves_no_debt(self, clock: FakeClock) -> None:
        """A call that catches the cancellation and returns: its result stands, and the
        task is not left cancelling (a later await is not interrupted)."""
        deadlines = Deadlines(clock, 5)

        async def stubborn() -> str:
            with contextlib.suppress(asyncio.CancelledError):
                await clock.sleep(3600)
            return "kept"

        async def caller() -> str:
            result = await deadlines.call("x", stubborn)
            task = asyncio.current_task()
            assert task is not None
            assert task.cancelling() == 0
            await asyncio.sleep(0)
            return result

        task = asyncio.create_task(caller())
        await settle(lambda: clock.sleepers == 2)
        clock.advance(5)
        assert await asyncio.wait_for(task, DEADLINE) == "kept"
        await deadlines.close()

    async def test_an_outside_cancellation_stays_a_cancellation(self, clock: FakeClock) -> None:
        """Cancelling the caller is not turned into a deadline error."""
        deadlines = Deadlines(clock, 5)
        task = asyncio.create_task(deadlines.call("x", clock.sleep, 3600))
        await settle(lambda: clock.sleepers == 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await deadlines.close()
        assert clock.sleepers == 0
