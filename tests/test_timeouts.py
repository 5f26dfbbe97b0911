"""Deadlines: clocks' timeout blocks, and provider calls that hang."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from helpers import settle

from reconcile import ObjectKey, Runtime
from reconcile.controller import LoopClock
from reconcile.model.external import ANNOTATION_CREATE_PENDING
from reconcile.testing import FakeClock, MemoryCloud, MemoryProvider
from reconcile.testing.memory import MemoryClient

DEADLINE = 20.0


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
    return {"api_version": "memory.reconcile.dev/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


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
        runtime = Runtime(
            db_path,
            providers=[MemoryProvider(cloud)],
            clock=clock,
            wall_clock=clock,
            provider_timeout=5,
            provider_attempts=1,
        )
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
        runtime = Runtime(
            db_path,
            providers=[MemoryProvider(cloud)],
            clock=clock,
            wall_clock=clock,
            provider_timeout=5,
            provider_attempts=1,
        )
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
        runtime = Runtime(
            db_path,
            providers=[MemoryProvider(cloud)],
            clock=clock,
            wall_clock=clock,
            provider_timeout=5,
            provider_attempts=1,
        )
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
        runtime = Runtime(
            db_path, providers=[MemoryProvider(cloud)], clock=clock, wall_clock=clock, provider_attempts=1
        )
        async with runtime:
            await runtime.apply(manifest("Bucket", "b"))
            await settle(lambda: synced(runtime, "Bucket", "b") == ("ReconcileError", "connect timed out"))
            clock.advance(1)
            await runtime.wait_ready("Bucket", "b", timeout=DEADLINE)
