"""Runtime.health(): readiness and health for a service's probes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from helpers import settle

from reconcile import Runtime
from reconcile.api.engine import Engine
from reconcile.runtime import ControllerHealth, Health, Supervisor
from reconcile.testing import FakeClock, MemoryCloud, MemoryProvider

BUCKETS = "bucket.memory.reconcile.dev"


def runtime(db_path: Path, clock: FakeClock) -> Runtime:
    """A Runtime over the memory provider, on the fake clock."""
    provider = MemoryProvider(MemoryCloud(clock=clock))
    return Runtime(db_path, providers=[provider], clock=clock, wall_clock=clock)


def part(name: str = "c", **changes: Any) -> ControllerHealth:
    """A controller's health: fine unless changed."""
    fields: dict[str, Any] = {
        "name": name,
        "synced": True,
        "watching": True,
        "running": True,
        "crashes": 0,
        "watch_failures": 0,
        "cached": 0,
        "depth": 0,
        "processing": 0,
        "waiting": 0,
        "longest_running": 0.0,
    }
    return ControllerHealth(**(fields | changes))


class TestRuntimeHealth:
    """What a started, a starting and a closed runtime report."""

    async def test_ready_once_synced_and_not_after_close(self, db_path: Path, clock: FakeClock) -> None:
        """Not ready before start; ready with every cache synced; counts come along."""
        rt = runtime(db_path, clock)
        assert not rt.health().ready
        async with rt:
            await rt.wait_synced()
            await rt.apply(
                {
                    "apiVersion": "memory.reconcile.dev/v1",
                    "kind": "Bucket",
                    "metadata": {"name": "b"},
                    "spec": {"name": "b", "value": "v"},
                }
            )
            health = rt.health()
            assert (health.ready, health.healthy) == (True, True)
            assert health.problems() == []
            buckets = {c.name: c for c in health.controllers}[BUCKETS]
            assert buckets.cached == 1
            report = health.as_dict()
            assert report["ready"] is True
            assert {c["name"] for c in report["controllers"]} == {BUCKETS, "note.memory.reconcile.dev"}  # type: ignore[attr-defined]
        assert not rt.health().ready

    async def test_a_broken_watch_is_unhealthy_until_it_is_back(
        self, db_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The list worked, the watch breaks: not healthy, not ready, and the problem says
        which controller; after the informer's backoff the watch is back."""
        original = Engine.raw_watch
        failures = {BUCKETS: 1}

        def flaky(self: Engine, kind: Any, *args: Any, **kwargs: Any) -> Any:
            name = f"{kind.kind.lower()}.{kind.api_group}"
            if failures.get(name):
                failures[name] -= 1
                raise RuntimeError("network down")
            return original(self, kind, *args, **kwargs)

        monkeypatch.setattr(Engine, "raw_watch", flaky)
        async with runtime(db_path, clock) as rt:
            notes = rt.controllers["note.memory.reconcile.dev"].informer
            # The other kind's cache loads independently: wait for it too, so the one
            # problem left is the broken watch.
            await settle(
                lambda: (
                    rt.controllers[BUCKETS].informer.statistics().watch_failures == 1
                    and notes.synced.is_set()
                )
            )
            health = rt.health()
            assert (health.ready, health.healthy) == (False, False)
            assert health.problems() == [f"{BUCKETS}: watch broken, restarting (1 failures so far)"]
            clock.advance(0.1)  # the informer's backoff
            await settle(lambda: rt.health().ready)
            assert rt.health().healthy


class TestSummary:
    """How controllers add up."""

    def test_each_problem_in_words(self) -> None:
        """A crashed controller, an unsynced cache: neither ready; only the crash is unhealthy."""
        starting = Health.of((part("a"), part("b", synced=False)), started=True)
        assert (starting.ready, starting.healthy) == (False, True)
        assert starting.problems() == ["b: cache not synced yet"]
        crashed = Health.of((part("a", running=False, crashes=2),), started=True)
        assert (crashed.ready, crashed.healthy) == (False, False)
        assert crashed.problems() == ["a: restarting after a crash (2 so far)"]

    def test_a_store_refusing_writes_is_not_ready_yet_healthy(self) -> None:
        """A store failure (a read-only server): not ready, its message among the
        problems, but healthy: a restart would not help, the engine retries."""
        failing = Health.of((part("a", store_failure="db: the server is read-only"),), started=True)
        assert (failing.ready, failing.healthy) == (False, True)
        assert failing.problems() == [
            "a: the store failed, retrying with backoff: db: the server is read-only"
        ]
        assert failing.as_dict()["controllers"][0]["store_failure"] == "db: the server is read-only"  # type: ignore[index]

    def test_not_started_is_not_ready(self) -> None:
        """No runtime, no readiness, even with nothing to sync."""
        assert not Health.of((), started=False).ready
        assert Health.of((), started=True).ready


class TestSupervisorDown:
    """The supervisor says which names wait to be restarted."""

    async def test_down_during_the_backoff_only(self, clock: FakeClock) -> None:
        """Down from the crash until the restart."""
        supervisor = Supervisor(clock)
        runs: list[int] = []
        release = asyncio.Event()

        async def crash_once() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise RuntimeError("boom")
            await release.wait()

        supervisor.start("c", crash_once)
        await settle(lambda: supervisor.crashes["c"] == 1)
        assert supervisor.down == {"c"}
        clock.advance(0.1)
        await settle(lambda: len(runs) == 2)
        assert supervisor.down == set()
        release.set()
        await supervisor.stop()
