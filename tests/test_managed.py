"""The managed reconciler end to end: Runtime + in-memory provider, on a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import settle

from reconcile import Behaviour, ExternalClient, Observation, Runtime
from reconcile.errors import PermanentError, ReconcileError, TransientError
from reconcile.model import Condition, ConditionStatus, ObjectKey, Status
from reconcile.model.external import (
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_MANAGEMENT_POLICY,
    ANNOTATION_PAUSED,
    FINALIZER,
)
from reconcile.testing import BUCKET, WIDGET, FakeClock, MemoryCloud, MemoryProvider, example_kinds, let_run
from reconcile.testing.memory import MemoryClient

DEADLINE = 20.0
POLL = 60.0


def bucket(name: str, value: str = "v", **metadata: Any) -> dict[str, Any]:
    """A Bucket manifest whose external id is its name."""
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name, **metadata},
        "spec": {"name": name, "value": value},
    }


async def idle(runtime: Runtime) -> None:
    """Wait until no controller has work queued or in flight (delayed keys aside)."""
    for _ in range(3):
        for controller in runtime.controllers.values():
            await settle(
                lambda c=controller: c.queue.statistics().depth == 0 and c.queue.statistics().processing == 0
            )
        for _ in range(20):
            await asyncio.sleep(0)


async def quiet_polls(runtime: Runtime, cloud: MemoryCloud, clock: FakeClock, count: int) -> None:
    """Let ``count`` polls run to the end, each observing once (and, for a converged
    object, writing nothing)."""
    for _ in range(count):
        observes = cloud.calls["observe"]
        clock.advance(POLL * 1.11)
        await settle(lambda observes=observes: cloud.calls["observe"] > observes)
        await idle(runtime)
        assert cloud.calls["observe"] == observes + 1


async def resync_passes(runtime: Runtime, cloud: MemoryCloud, clock: FakeClock, passes: int = 2) -> None:
    """Let ``passes`` resyncs (period 600 s) run to the end: each observes again."""
    observed = cloud.calls["observe"]
    for _ in range(passes):
        clock.advance(660)  # past the resync, jitter (10 %) included
        await settle(lambda observed=observed: cloud.calls["observe"] > observed)
        await idle(runtime)
        observed = cloud.calls["observe"]


class TerseClient(MemoryClient):
    """Observes truthfully whether the item is up to date, but reports no field of it."""

    async def observe(self, resource: Any) -> Observation:
        """The memory client's observation without its observed fields."""
        return attrs.evolve(await super().observe(resource), observed={})


class TerseProvider(MemoryProvider):
    """A provider built on the terse client."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The terse client."""
        return TerseClient(self.cloud)


@pytest.fixture
def cloud(clock: FakeClock) -> MemoryCloud:
    """The fake external system."""
    return MemoryCloud(clock=clock)


@contextlib.asynccontextmanager
async def started(db: Path, cloud: MemoryCloud, clock: FakeClock, **options: Any) -> AsyncIterator[Runtime]:
    """A Runtime over the memory provider, on the fake clock."""
    runtime = Runtime(
        db, providers=[MemoryProvider(cloud)], clock=clock, wall_clock=clock, poll_interval=POLL, **options
    )
    async with runtime:
        await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
        yield runtime


async def ready(runtime: Runtime, name: str, kind: str = "bucket") -> Any:
    """Wait until the object is Ready."""
    return await asyncio.wait_for(runtime.wait_ready(kind, name), DEADLINE)


class TestConvergence:
    """Create, converge, stay converged."""

    async def test_thousand_resources_converge(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """1,000 buckets reach Ready, each created exactly once."""
        async with started(db_path, cloud, clock) as runtime:
            await asyncio.gather(*(runtime.apply(bucket(f"b{i:04d}", str(i))) for i in range(1000)))
            for i in range(1000):
                obj = await ready(runtime, f"b{i:04d}")
                assert obj.status.at_provider["value"] == str(i)
            assert len(cloud.items) == 1000
            assert cloud.calls["create"] == 1000

    async def test_apply_is_in_the_cache_at_once(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Read-your-writes for the runtime's own apply: the controller's cache holds the
        applied version as soon as apply returns, before the watch brings its event."""
        async with started(db_path, cloud, clock) as runtime:
            [controller] = [c for c in runtime.controllers.values() if c.kind.kind == "Bucket"]
            applied = await runtime.apply(bucket("b1", "one"))
            cached = controller.informer.get(applied.key)
            assert cached is not None
            assert cached.metadata.resource_version == applied.metadata.resource_version
            assert cached.spec.value == "one"
            changed = await runtime.apply(bucket("b1", "two"))
            cached = controller.informer.get(changed.key)
            assert cached is not None
            assert cached.spec.value == "two"
            assert (await ready(runtime, "b1")).status.at_provider["value"] == "two"

    async def test_second_pass_writes_nothing(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A poll of converged resources observes again but writes nowhere."""
        async with started(db_path, cloud, clock) as runtime:
            for i in range(20):
                await runtime.apply(bucket(f"b{i}"))
            for i in range(20):
                await ready(runtime, f"b{i}")
            await idle(runtime)
            writes, revision, observes = cloud.writes, await runtime.client.revision(), cloud.calls["observe"]
            clock.advance(POLL * 1.2)
            await settle(lambda: cloud.calls["observe"] >= observes + 20)
            await idle(runtime)
            assert cloud.writes == writes
            assert await runtime.client.revision() == revision

    async def test_history_tells_the_story(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """The log holds the create's request, success and the resulting status."""
        async with started(db_path, cloud, clock) as runtime:
            await runtime.apply(bucket("b"))
            await ready(runtime, "b")
            events = await runtime.client.history("bucket", "b")
        types = [e.type for e in events]
        # Two writes besides the apply (whose Created carries the finalizer): the pending
        # marker with CreateRequested (this kind's create is not atomic), then the success
        # marker and the status with CreateSucceeded.
        assert types == ["Created", "CreateRequested", "MetadataChanged", "CreateSucceeded", "StatusChanged"]
        created = events[0].object
        assert created is not None
        assert created.metadata.finalizers == (FINALIZER,)


class TestDrift:
    """Out-of-band changes are repaired on the next poll."""

    async def test_drift_is_repaired_within_a_poll(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A value changed by hand is set back and recorded as DriftDetected with the diff."""
        async with started(db_path, cloud, clock) as runtime:
            await runtime.apply(bucket("b", "good"))
            await ready(runtime, "b")
            await idle(runtime)
            cloud.tamper("b", "evil")
            clock.advance(POLL * 1.11)
            await settle(lambda: cloud.items["b"].value == "good")
            await idle(runtime)
            events = await runtime.client.history("bucket", "b")
        drift = [e for e in events if e.type == "DriftDetected"]
        assert drift
        assert drift[-1].data is not None
        assert "'evil' -> 'good'" in drift[-1].data["message"]

    async def test_drift_after_quiet_polls_is_repaired(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Polls that found nothing to do (the short way: one observe each, no write)
        still notice drift, and repair it with the observation they made."""
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("b", "good"))
            await ready(runtime, "b")
            await idle(runtime)
            revision = await runtime.client.revision()
            await quiet_polls(runtime, cloud, clock, 3)
            assert await runtime.client.revision() == revision
            cloud.tamper("b", "evil")
            observes, updates = cloud.calls["observe"], cloud.calls["update"]
            clock.advance(POLL * 1.11)
            await settle(lambda: cloud.items["b"].value == "good")
            await idle(runtime)
            # One look found the drift (the pass acted on it, without a second look
            # first); one more after the update, which answers with no observation.
            assert cloud.calls["update"] == updates + 1
            assert cloud.calls["observe"] == observes + 2
            events = await runtime.client.history("bucket", "b")
        assert [e.type for e in events if e.revision > revision] == [
            "DriftDetected",
            "UpdateRequested",
            "UpdateSucceeded",
        ]

    async def test_out_of_date_after_quiet_polls_is_updated(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A provider that reports no observed field of the drift (``atProvider`` stays
        as it was) but says "not up to date": quiet polls still notice it and update."""
        provider = TerseProvider(cloud)
        runtime = Runtime(db_path, providers=[provider], clock=clock, wall_clock=clock, poll_interval=POLL)
        async with runtime:
            await runtime.apply(bucket("b", "good"))
            await ready(runtime, "b")
            await idle(runtime)
            await quiet_polls(runtime, cloud, clock, 2)
            cloud.tamper("b", "evil")
            clock.advance(POLL * 1.11)
            await settle(lambda: cloud.items["b"].value == "good")
            await idle(runtime)

    async def test_taken_over_after_quiet_polls_is_left_alone(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A resource that became somebody else's after quiet polls: NotOwned, untouched."""
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("b", "good"))
            await ready(runtime, "b")
            await idle(runtime)
            await quiet_polls(runtime, cloud, clock, 2)
            writes = cloud.writes
            cloud.items["b"].owner = "someone-else"  # only the marker: what it observes is the same
            informer = runtime.controllers["bucket.memory.reconcile.dev"].informer
            key = ObjectKey("memory.reconcile.dev", "Bucket", "default", "b")

            def synced_reason() -> str | None:
                obj = informer.get(key)
                condition = None if obj is None else obj.status.condition("Synced")
                return None if condition is None else condition.reason

            clock.advance(POLL * 1.11)
            await settle(lambda: synced_reason() == "NotOwned")
            await idle(runtime)
            assert cloud.writes == writes

    async def test_out_of_band_deletion_is_recreated(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """An item deleted by hand comes back."""
        async with started(db_path, cloud, clock) as runtime:
            await runtime.apply(bucket("b"))
            await ready(runtime, "b")
            await idle(runtime)
            cloud.remove("b")
            clock.advance(POLL * 1.11)
            await settle(lambda: "b" in cloud.items)
            assert cloud.items["b"].owner == (await runtime.client.get("bucket", "b")).metadata.uid


class TestFailures:
    """Failures are classified, shown, and retried at the right pace."""

    async def test_permanent_failure_blocks_nothing_else(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A permanently failing bucket shows Synced=False with the reason; others converge;
        it is not retried until its spec changes."""
        cloud.break_item("bad", PermanentError("quota exceeded"))
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("bad"))
            for i in range(5):
                await runtime.apply(bucket(f"ok{i}"))
            for i in range(5):
                await ready(runtime, f"ok{i}")
            await idle(runtime)
            obj = await runtime.client.get("bucket", "bad")
            synced = obj.status.condition("Synced")
            assert synced is not None
            assert (synced.status.value, synced.reason, synced.message) == (
                "False",
                "ReconcileError",
                "quota exceeded",
            )
            attempts = cloud.calls["create"]
            clock.advance(3600)
            await idle(runtime)
            assert cloud.calls["create"] == attempts, "no retry of a permanent failure"
            del cloud.broken["bad"]
            await runtime.apply(bucket("bad", "new"))
            await ready(runtime, "bad")

    async def test_permanent_failure_waits_for_a_change_not_a_resync(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A resync does not call the provider again for the same spec and annotations;
        an annotation the user changes does, and so does a new process."""
        cloud.break_item("bad", PermanentError("quota exceeded"))
        async with started(db_path, cloud, clock, resync_period=600) as runtime:
            await runtime.apply(bucket("bad"))
            await idle(runtime)
            attempts = cloud.calls["create"]
            assert attempts >= 1
            revision = await runtime.client.revision()
            controller = runtime.controllers["bucket.memory.reconcile.dev"]
            reconciled = controller.queue.statistics().adds
            clock.advance(660)  # past the resync, jitter included
            await settle(lambda: controller.queue.statistics().adds > reconciled)
            await idle(runtime)
            assert cloud.calls["create"] == attempts, "the resync did not try again"
            assert await runtime.client.revision() == revision, "nor wrote anything"
            await runtime.client.patch("bucket", "bad", {"metadata": {"annotations": {"retry": "1"}}})
            await settle(lambda: cloud.calls["create"] > attempts)
            await idle(runtime)
            attempts = cloud.calls["create"]
        async with started(db_path, cloud, clock, resync_period=600) as runtime:
            await settle(lambda: cloud.calls["create"] > attempts)
            del cloud.broken["bad"]
            await runtime.client.patch("bucket", "bad", {"metadata": {"annotations": {"retry": "2"}}})
            await ready(runtime, "bad")

    async def test_transient_failures_back_off(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A transient failure is retried at 5, 10, 20 ms... of fake time, never without time
        passing (one provider attempt per reconcile here, so every retry is the queue's)."""
        cloud.break_item("flaky", TransientError("throttled"))
        attempts: list[float] = []
        enter = cloud.enter

        async def counting(operation: str) -> None:
            if operation == "create":
                attempts.append(clock.now())
            await enter(operation)

        cloud.enter = counting  # type: ignore[method-assign]
        async with started(db_path, cloud, clock, provider_attempts=1) as runtime:
            await runtime.apply(bucket("flaky"))
            await settle(lambda: len(attempts) == 1)
            await idle(runtime)
            for _ in range(50):
                await asyncio.sleep(0)
            assert len(attempts) == 1, "no retry without time passing: no hot loop"
            while len(attempts) < 9:
                await idle(runtime)
                deadline = clock.next_deadline()
                assert deadline is not None, "a retry is always scheduled"
                clock.advance(deadline - clock.now())
                before = len(attempts)
                await settle(lambda before=before: len(attempts) > before)
            gaps = [b - a for a, b in itertools.pairwise(attempts)]
            assert gaps == pytest.approx([0.005 * 2**i for i in range(8)], rel=1e-3)
            synced = (await runtime.client.get("bucket", "flaky")).status.condition("Synced")
            assert synced is not None
            assert synced.message == "throttled"
            await idle(runtime)
            del cloud.broken["flaky"]
            clock.advance(120)
            await ready(runtime, "flaky")


class TestDeletion:
    """Deletion policy."""

    async def test_delete_removes_external_and_finalizer(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Deleting the resource deletes the item, then the object."""
        async with started(db_path, cloud, clock) as runtime:
            obj = await runtime.apply(bucket("b"))
            obj = await ready(runtime, "b")
            assert FINALIZER in obj.metadata.finalizers
            await runtime.client.delete("bucket", "b")
            await settle(lambda: "b" not in cloud.items)
            await idle(runtime)
            with pytest.raises(Exception, match="not found"):
                await runtime.client.get("bucket", "b")
            types = [e.type for e in await runtime.client.history("bucket", "b")]
        assert types[-3:] == ["DeleteRequested", "DeleteSucceeded", "Deleted"]

    async def test_orphan_leaves_external(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """With deletion policy Orphan the item stays."""
        async with started(db_path, cloud, clock) as runtime:
            await runtime.apply(bucket("b", annotations={ANNOTATION_DELETION_POLICY: "Orphan"}))
            await ready(runtime, "b")
            await runtime.client.delete("bucket", "b")
            await settle(
                lambda: not runtime.controllers["bucket.memory.reconcile.dev"].informer.cached_keys()
            )
        assert "b" in cloud.items
        assert cloud.calls["delete"] == 0


class TestOwnership:
    """What we did not create, we never touch."""

    async def test_not_owned_is_left_alone(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """A pre-existing item with the same id: Synced=False NotOwned, unchanged, and kept on delete."""
        cloud.plant("b", "theirs", owner="someone-else")
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("b", "mine"))
            await settle(lambda: cloud.calls["observe"] >= 1)
            await idle(runtime)
            synced = (await runtime.client.get("bucket", "b")).status.condition("Synced")
            assert synced is not None
            assert synced.reason == "NotOwned"
            await runtime.client.delete("bucket", "b")
            await settle(
                lambda: not runtime.controllers["bucket.memory.reconcile.dev"].informer.cached_keys()
            )
        assert cloud.items["b"].value == "theirs"
        assert cloud.writes == 0

    async def test_not_owned_is_recorded_once(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Later resyncs look again (read only) but append nothing: a finding is not an
        action, and a resync of unchanged objects writes no event."""
        cloud.plant("b", "theirs", owner="someone-else")
        async with started(db_path, cloud, clock, resync_period=600) as runtime:
            await runtime.apply(bucket("b", "mine"))
            await settle(lambda: cloud.calls["observe"] >= 1)
            await idle(runtime)
            revision = await runtime.client.revision()
            await resync_passes(runtime, cloud, clock)
            assert await runtime.client.revision() == revision
        assert cloud.writes == 0

    async def test_unmarked_pre_existing_is_not_adopted(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """An item without any owner marker that we have no record of creating is not ours."""
        cloud.plant("b", "theirs")
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("b", "mine"))
            await settle(lambda: cloud.calls["observe"] >= 1)
            await idle(runtime)
            synced = (await runtime.client.get("bucket", "b")).status.condition("Synced")
        assert synced is not None
        assert synced.reason == "NotOwned"
        assert cloud.items["b"].value == "theirs"


class TestCrashBetweenCreateAndRecord:
    """A create whose outcome was never recorded neither leaks nor duplicates."""

    async def test_deterministic_identity_is_adopted(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Pending marker + our item exists: the engine records success; no second create."""
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            obj = await runtime.client.apply(
                bucket("b", annotations={ANNOTATION_CREATE_PENDING: "x", ANNOTATION_PAUSED: "true"})
            )
            cloud.plant("b", "v", owner=obj.metadata.uid)  # the create happened, then the crash
            await runtime.client.patch(
                "bucket", "b", {"metadata": {"annotations": {ANNOTATION_PAUSED: None}}}
            )
            await ready(runtime, "b")
        assert cloud.calls["create"] == 0
        assert len(cloud.items) == 1

    async def test_deterministic_identity_retries_create(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Pending marker and no item: the create is retried (it is idempotent)."""
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.client.apply(bucket("b", annotations={ANNOTATION_CREATE_PENDING: "x"}))
            await ready(runtime, "b")
        assert len(cloud.items) == 1

    async def test_nondeterministic_identity_stops(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Pending marker, no external name: the engine stops with CreatePendingUnknown."""
        note = {
            "apiVersion": "memory.reconcile.dev/v1",
            "kind": "Note",
            "metadata": {"name": "n", "annotations": {ANNOTATION_CREATE_PENDING: "x"}},
            "spec": {"text": "hello"},
        }
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.client.apply(note)
            await settle(lambda: cloud.calls["observe"] >= 1)
            await idle(runtime)
            synced = (await runtime.client.get("note", "n")).status.condition("Synced")
        assert synced is not None
        assert synced.reason == "CreatePendingUnknown"
        assert cloud.calls["create"] == 0


class TestPolicies:
    """Observe-only and pause."""

    async def test_observe_only(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """ObserveOnly reports what exists and never writes, not even a finalizer."""
        cloud.plant("b", "theirs")
        async with started(db_path, cloud, clock) as runtime:
            await runtime.apply(
                bucket("b", "mine", annotations={ANNOTATION_MANAGEMENT_POLICY: "ObserveOnly"})
            )
            obj = await ready(runtime, "b")
        assert obj.status.at_provider["value"] == "theirs"
        assert obj.metadata.finalizers == ()
        assert cloud.writes == 0

    async def test_paused(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """A paused resource is not touched; Synced says why."""
        async with started(db_path, cloud, clock) as runtime:
            await runtime.apply(bucket("b", annotations={ANNOTATION_PAUSED: "true"}))
            await settle(
                lambda: runtime.controllers["bucket.memory.reconcile.dev"].queue.statistics().adds >= 1
            )
            await idle(runtime)
            synced = (await runtime.client.get("bucket", "b")).status.condition("Synced")
        assert synced is not None
        assert synced.reason == "ReconcilePaused"
        assert cloud.calls["observe"] == 0

    async def test_eventual_consistency_with_grace(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A created item invisible for a while is not created twice within the grace period."""
        cloud.visibility_delay = 5
        async with started(db_path, cloud, clock, creation_grace=10) as runtime:
            await runtime.apply(bucket("b"))
            await settle(lambda: cloud.calls["create"] == 1)
            await idle(runtime)
            for _ in range(6):
                clock.advance(1)
                await idle(runtime)
            await ready(runtime, "b")
        assert cloud.calls["create"] == 1

    async def test_transient_errors_retried_within_a_reconcile(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """Two transient observe failures are absorbed by tenacity inside one reconcile."""
        cloud.fail_next("observe", TransientError("blip"), TransientError("blip"))
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("b"))
            # Fake time passes a second at a time until the create happened: the retries'
            # waits are not the only sleepers on the clock (the provider-call deadline's
            # watchdog sleeps too), so a count of sleepers cannot say when to advance.
            for _ in range(10):
                if cloud.calls["create"]:
                    break
                await settle(lambda: clock.sleepers > 0)
                clock.advance(1.0)
                for turn in range(20):
                    await let_run(turn)
            await ready(runtime, "b")
            history = [e.type for e in await runtime.client.history("bucket", "b")]
        assert "ObserveFailed" not in history
        assert cloud.calls["create"] == 1


class TestPollIntervals:
    """Drift polling per kind."""

    async def test_per_kind_poll_interval(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """poll_intervals={"bucket": 5} repairs drift after 5 s, not the default 60 s."""
        async with started(db_path, cloud, clock, poll_intervals={"bucket": 5.0}) as runtime:
            await runtime.apply(bucket("b", "good"))
            await ready(runtime, "b")
            await idle(runtime)
            cloud.tamper("b", "evil")
            clock.advance(5 * 1.11)
            await settle(lambda: cloud.items["b"].value == "good")
            assert runtime._poll_interval(runtime.client.kinds.resolve("note")) == POLL


class TestWaitReady:
    """Runtime.wait_ready: answered from the informers, without a watch per waiter."""

    async def test_many_waiters_before_and_after_apply(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Waiters registered before their object exists, and after it is Ready, all get
        the Ready object; none of them opens a watch of its own."""
        async with started(db_path, cloud, clock) as runtime:
            watches: list[Any] = []
            original = runtime.client.watch

            def counting(*args: Any, **kwargs: Any) -> Any:
                watches.append(args)
                return original(*args, **kwargs)

            monkeypatch.setattr(runtime.client, "watch", counting)
            early = [asyncio.create_task(ready(runtime, f"b{i}")) for i in range(20)]
            twice = asyncio.create_task(ready(runtime, "b0"))
            for i in range(20):
                await runtime.apply(bucket(f"b{i}"))
            done = await asyncio.wait_for(asyncio.gather(*early, twice), DEADLINE)
            assert [o.metadata.name for o in done] == [f"b{i}" for i in range(20)] + ["b0"]
            assert all(o.status.condition("Ready").status.value == "True" for o in done)
            late = await ready(runtime, "b3")
            assert late.metadata.name == "b3"
            assert watches == []
            assert runtime.tracker._ready_waiters == {}

    async def test_timeout_names_the_reason(
        self, db_path: Path, cloud: MemoryCloud, clock: FakeClock
    ) -> None:
        """A waiter that times out says why the object is not Ready (its Synced condition)."""
        cloud.break_item("bad", PermanentError("quota exceeded"))
        async with started(db_path, cloud, clock, resync_period=None) as runtime:
            await runtime.apply(bucket("bad"))
            await idle(runtime)
            before = clock.sleepers
            waiter = asyncio.create_task(runtime.wait_ready("bucket", "bad", timeout=0.2))
            await settle(lambda: clock.sleepers > before)
            clock.advance(0.2)  # the deadline runs on the runtime's clock
            with pytest.raises(
                TimeoutError, match="was not Ready in time: Synced=False ReconcileError quota"
            ):
                await asyncio.wait_for(waiter, DEADLINE)

    async def test_a_kind_no_controller_manages(self, db_path: Path, clock: FakeClock) -> None:
        """A registered kind this runtime does not reconcile is waited for from the store."""
        runtime = Runtime(db_path, providers=[], kinds=example_kinds(), clock=clock, wall_clock=clock)
        async with runtime:
            obj = await runtime.apply(
                {
                    "apiVersion": WIDGET.api_version,
                    "kind": "Widget",
                    "metadata": {"name": "w"},
                    "spec": {"size": 1},
                }
            )
            waiter = asyncio.create_task(asyncio.wait_for(runtime.wait_ready("widget", "w"), DEADLINE))
            ready_now = Condition("Ready", ConditionStatus.TRUE, "Available")
            status = Status(observed_generation=1, conditions=(ready_now,))
            await runtime.client.update_status(attrs.evolve(obj, status=status))
            assert (await waiter).status == status

    async def test_closing_ends_the_wait(self, db_path: Path, cloud: MemoryCloud, clock: FakeClock) -> None:
        """A waiter does not outlive the runtime: closing fails it with a clear error."""
        async with started(db_path, cloud, clock) as runtime:
            waiter = asyncio.create_task(runtime.wait_ready("bucket", "never"))
            await settle(lambda: bool(runtime.tracker._ready_waiters))
        with pytest.raises(ReconcileError, match="closed while waiting"):
            await asyncio.wait_for(waiter, DEADLINE)


class TestRuntimeLifecycle:
    """Starting and stopping."""

    async def test_conflicting_kinds_are_refused_at_start(self, db_path: Path) -> None:
        """Two providers declaring the same kind differently: start fails, nothing is left open."""

        class Clash(MemoryProvider):
            @property
            def kinds(self) -> Any:
                return (attrs.evolve(BUCKET, behaviour=Behaviour.ASSIGNED_NAME),)

        runtime = Runtime(db_path, providers=[MemoryProvider(), Clash()])
        with pytest.raises(ValueError, match="already registered"):
            await runtime.start()
        with pytest.raises(Exception, match="not started"):
            _ = runtime.client
