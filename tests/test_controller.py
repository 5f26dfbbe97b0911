"""The controller runtime: informer, workers, retries, resync, read-your-writes, tracing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import attrs
import pytest
from helpers import running, settle, widget
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reconcile import Client, ExpiredError, InvalidError, ObjectKey, Status, TerminalError, TransientError
from reconcile.api import mutations
from reconcile.api.decoding import Unconverted
from reconcile.controller import Controller, Informer, Request, Result, Telemetry, controlling, informing
from reconcile.model import EventType, Kind, KindRegistry
from reconcile.store import EventStore, Put, StoredObject
from reconcile.testing import WIDGET, FakeClock

DEADLINE = 10.0


@attrs.frozen
class BlobSpec:
    """A spec of free JSON (as an S3 bucket's policy)."""

    data: dict[str, Any] = attrs.Factory(dict)


BLOB = Kind("example.reconcile.dev/v1", "Blob", BlobSpec)
FROZEN_BLOB = Kind("example.reconcile.dev/v1", "FrozenBlob", BlobSpec, immutable=("data",))


class StatusWriter:
    """Writes status.observedGeneration = generation; counts calls per name."""

    def __init__(self, client: Client, informer: Callable[[], Informer]) -> None:
        self.client = client
        self.informer = informer
        self.calls: dict[str, int] = {}
        self.fail: dict[str, BaseException] = {}
        self.seen_versions: dict[str, list[int]] = {}
        #: Results to return, in order, per name (None once they run out).
        self.results: dict[str, list[Result]] = {}

    async def reconcile(self, request: Request) -> Result | None:
        """Observe the cached object and record its generation in status."""
        self.calls[request.name] = self.calls.get(request.name, 0) + 1
        if request.name in self.fail:
            raise self.fail[request.name]
        obj = self.informer().get(request.key)
        if obj is None:
            return None
        self.seen_versions.setdefault(request.name, []).append(obj.metadata.resource_version or 0)
        if obj.status.observed_generation != obj.metadata.generation:
            status = Status(observed_generation=obj.metadata.generation)
            await self.client.update_status(attrs.evolve(obj, status=status))
        queued = self.results.get(request.name)
        return queued.pop(0) if queued else None


class Instant:
    """A reconciler that never waits: records each key it is called with."""

    def __init__(self) -> None:
        self.calls: list[ObjectKey] = []

    async def reconcile(self, request: Request) -> Result | None:
        """Record the key; nothing to do."""
        self.calls.append(request.key)
        return None


@contextlib.asynccontextmanager
async def sampled_each_turn(probe: Callable[[], int]) -> AsyncIterator[list[int]]:
    """``probe()`` read by another task at each turn of the loop it gets, for the block."""
    seen: list[int] = []

    async def sample() -> None:
        while True:
            seen.append(probe())
            await asyncio.sleep(0)

    task = asyncio.create_task(sample())
    try:
        yield seen
    finally:
        task.cancel()
        seen.append(probe())  # where the block ended, whatever turn the sampler had last


def make(client: Client, clock: FakeClock, **options: Any) -> tuple[Controller, StatusWriter]:
    """A Widget controller with a StatusWriter reconciler."""
    holder: dict[str, Controller] = {}
    reconciler = StatusWriter(client, lambda: holder["c"].informer)
    controller = Controller(client, WIDGET, reconciler, clock=clock, workers=4, **options)
    holder["c"] = controller
    return controller, reconciler


async def converged(client: Client) -> bool:
    """Every widget's status has caught up with its generation."""
    items = (await client.list("widget")).items
    return all(o.status.observed_generation == o.metadata.generation for o in items)


class TestConvergence:
    """Objects reach their desired state."""

    async def test_all_objects_converge(self, client: Client, clock: FakeClock) -> None:
        """Every object, existing before or created after start, gets its status."""
        for i in range(20):
            await client.apply(widget(f"w{i}", i))
        controller, reconciler = make(client, clock)
        async with running(controller):
            for i in range(20, 40):
                await client.apply(widget(f"w{i}", i))
            await client.apply(widget("w3", 100))
            await settle(lambda: controller.queue.statistics().depth == 0 and len(reconciler.calls) == 40)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            await settle(lambda: controller.informer.revision >= 81)
        assert await converged(client)
        obj = await client.get("widget", "w3")
        assert obj.status.observed_generation == 2

    async def test_reconciles_that_never_wait_share_the_loop(self, client: Client, clock: FakeClock) -> None:
        """A backlog of reconciles that never suspend (a resync of a large cache) does not
        hold the event loop: other tasks run at least once per 256 keys a worker takes."""
        count = 2500
        await client.apply_many([widget(f"w{i}") for i in range(count)])
        reconciler = Instant()
        controller = Controller(client, WIDGET, reconciler, clock=clock, workers=4, resync_period=None)
        # Sampling from once the cache is synced: a task spinning the loop from the start
        # kept the informer's first list of 2,500 from ending within 20 s under coverage.
        async with running(controller), sampled_each_turn(lambda: len(reconciler.calls)) as seen:
            await settle(lambda: len(reconciler.calls) >= count)
            controller.enqueue_many(controller.informer.cached_keys())
            await settle(lambda: len(reconciler.calls) >= 2 * count)
        steps = [b - a for a, b in itertools.pairwise(seen)]
        assert seen[-1] >= 2 * count
        assert max(steps) <= 4 * 256

    async def test_a_large_resync_is_enqueued_in_chunks(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The periodic resync enqueues a large cache a chunk at a time, letting other
        tasks run in between; every key is reconciled once."""
        monkeypatch.setattr(controlling, "_RESYNC_CHUNK", 100)
        count = 450
        await client.apply_many([widget(f"w{i}") for i in range(count)])
        reconciler = Instant()
        controller = Controller(
            client, WIDGET, reconciler, clock=clock, workers=2, resync_period=600, resync_jitter=0
        )
        calls = reconciler.calls
        async with running(controller):
            await settle(lambda: len(calls) >= count)
            async with sampled_each_turn(lambda: controller.queue.statistics().adds) as adds:
                clock.advance(600)
                await settle(lambda: len(calls) >= 2 * count)
        steps = [b - a for a, b in itertools.pairwise(adds)]
        assert sum(steps) == count
        assert max(steps) == 100
        assert sorted(calls[count:]) == sorted(calls[:count])

    async def test_second_pass_writes_nothing(self, client: Client, clock: FakeClock) -> None:
        """After convergence a resync reconciles everything again and appends no event."""
        for i in range(10):
            await client.apply(widget(f"w{i}", i))
        controller, reconciler = make(client, clock, resync_period=60, resync_jitter=0)
        async with running(controller):
            await settle(lambda: sum(reconciler.calls.values()) >= 20)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            revision = await client.revision()
            before = sum(reconciler.calls.values())
            clock.advance(60)
            await settle(lambda: sum(reconciler.calls.values()) >= before + 10)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            assert await client.revision() == revision

    async def test_read_your_writes(self, client: Client, clock: FakeClock) -> None:
        """The reconcile that follows a write sees the written revision in the cache."""
        await client.apply(widget("w1"))
        controller, reconciler = make(client, clock)
        async with running(controller):
            await settle(lambda: reconciler.calls.get("w1", 0) >= 2)
        versions = reconciler.seen_versions["w1"]
        assert versions[0] == 1
        assert versions[1] >= 2, "the second reconcile saw the status write"


class TestResults:
    """What the controller does with a reconcile's Result."""

    async def test_requeue_follows_the_backoff_and_success_forgets(
        self, client: Client, clock: FakeClock
    ) -> None:
        """``Result(requeue=True)`` comes back after the rate-limited delay (5 ms of fake
        time, then 10 ms), never at once; a plain ``Result()`` is a success that resets
        the key's backoff."""
        applied = await client.apply(widget("w1"))
        # Already converged: the reconciler writes nothing, so only the results decide.
        await client.update_status(attrs.evolve(applied, status=Status(observed_generation=1)))
        controller, reconciler = make(client, clock)
        key = ObjectKey(WIDGET.api_group, WIDGET.kind, "default", "w1")
        reconciler.results["w1"] = [Result(requeue=True), Result(requeue=True), Result()]
        async with running(controller):
            await settle(lambda: controller.queue.num_requeues(key) == 1)
            for _ in range(50):
                await asyncio.sleep(0)
            assert reconciler.calls["w1"] == 1, "no requeue before the backoff elapses"
            clock.advance(0.005)
            await settle(lambda: controller.queue.num_requeues(key) == 2)
            assert reconciler.calls["w1"] == 2
            clock.advance(0.005)
            for _ in range(50):
                await asyncio.sleep(0)
            assert reconciler.calls["w1"] == 2, "the second requeue waits 10 ms"
            clock.advance(0.005)
            await settle(lambda: reconciler.calls.get("w1") == 3)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            assert controller.queue.num_requeues(key) == 0, "the success forgot the failures"
            assert reconciler.results["w1"] == []


class TestFailures:
    """Retries follow the backoff; terminal errors stop; one failure blocks nothing else."""

    async def test_backoff_without_hot_loop(self, client: Client, clock: FakeClock) -> None:
        """A failing key is retried at 5, 10, 20 ms... of fake time, never in a hot loop."""
        await client.apply(widget("bad"))
        await client.apply(widget("good"))
        controller, reconciler = make(client, clock)
        reconciler.fail["bad"] = RuntimeError("boom")
        async with running(controller):
            await settle(lambda: reconciler.calls.get("bad") == 1 and reconciler.calls.get("good", 0) >= 1)
            for _ in range(50):
                await asyncio.sleep(0)
            assert reconciler.calls["bad"] == 1, "no retry before the backoff elapses"
            for expected, delay in enumerate([0.005, 0.01, 0.02, 0.04], start=2):
                clock.advance(delay * 0.9)
                for _ in range(20):
                    await asyncio.sleep(0)
                assert reconciler.calls["bad"] == expected - 1
                clock.advance(delay * 0.1 + 1e-6)  # past the deadline despite float rounding
                await settle(lambda expected=expected: reconciler.calls["bad"] == expected)
            assert controller.queue.num_requeues(widget_key("bad")) == 5
        assert (await client.get("widget", "good")).status.observed_generation == 1

    async def test_failures_are_warned_once_per_streak_and_period(
        self, client: Client, clock: FakeClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A reconciler's exception is logged at WARNING the first time (its traceback at
        DEBUG); its retries within a minute only at INFO; then once more, with how many
        were not said; a success ends the streak, so the next failure is said at once."""
        caplog.set_level(logging.DEBUG, logger="reconcile.controller")
        await client.apply(widget("bad"))
        controller, reconciler = make(client, clock, resync_period=None)
        reconciler.fail["bad"] = KeyError("size")

        def warnings() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.levelno == logging.WARNING and "bad" in r.getMessage()]

        async with running(controller):
            await settle(lambda: reconciler.calls.get("bad") == 1)
            [first] = warnings()
            assert "failed: 'size'" in first.getMessage()
            assert first.exc_info is None
            assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [reconciler.fail["bad"]]
            for calls in range(2, 6):  # retries at 5, 10, 20, 40 ms
                clock.advance(0.05)
                await settle(lambda calls=calls: reconciler.calls["bad"] == calls)
            assert len(warnings()) == 1
            clock.advance(60)
            await settle(lambda: reconciler.calls["bad"] == 6)
            second = warnings()[1].getMessage()
            assert "failed again: 'size'; 4 more failures since the last warning" in second
            del reconciler.fail["bad"]
            clock.advance(3600)
            await settle(lambda: reconciler.calls["bad"] >= 7 and not controller.failures)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            reconciler.fail["bad"] = KeyError("size")
            before = reconciler.calls["bad"]
            controller.enqueue(widget_key("bad"))
            await settle(lambda: reconciler.calls["bad"] == before + 1)
            assert len(warnings()) == 3
            assert "failed: 'size'" in warnings()[2].getMessage()

    async def test_transient_retry_after(self, client: Client, clock: FakeClock) -> None:
        """TransientError(retry_after) waits at least that long."""
        await client.apply(widget("slow"))
        controller, reconciler = make(client, clock)
        reconciler.fail["slow"] = TransientError("busy", retry_after=30)
        async with running(controller):
            await settle(lambda: reconciler.calls.get("slow") == 1)
            clock.advance(29)
            for _ in range(20):
                await asyncio.sleep(0)
            assert reconciler.calls["slow"] == 1
            clock.advance(1)
            await settle(lambda: reconciler.calls["slow"] == 2)

    async def test_terminal_error_is_not_retried(self, client: Client, clock: FakeClock) -> None:
        """TerminalError stops retries until the object changes (resync off here)."""
        await client.apply(widget("stop"))
        controller, reconciler = make(client, clock, resync_period=None)
        reconciler.fail["stop"] = TerminalError("cannot")
        async with running(controller):
            await settle(lambda: reconciler.calls.get("stop") == 1)
            clock.advance(3600)
            for _ in range(50):
                await asyncio.sleep(0)
            assert reconciler.calls["stop"] == 1
            del reconciler.fail["stop"]
            await client.apply(widget("stop", 2))
            await settle(lambda: reconciler.calls["stop"] == 2)

    async def test_requeue_after(self, client: Client, clock: FakeClock) -> None:
        """Result(requeue_after) brings the key back after that much time."""
        await client.apply(widget("poll"))
        calls = 0

        class Poller:
            async def reconcile(self, request: Request) -> Result:  # noqa: ARG002
                nonlocal calls
                calls += 1
                return Result(requeue_after=10)

        controller = Controller(client, WIDGET, Poller(), clock=clock, resync_period=None)
        async with running(controller):
            await settle(lambda: calls == 1)
            clock.advance(10)
            await settle(lambda: calls == 2)


class TestInformer:
    """The informer survives broken and expired watches."""

    async def test_watch_failure_is_reported_and_restarted(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A watch that raises is counted, reported to handlers, and restarted after backoff."""
        await client.apply(widget("w1"))
        original = client.engine.raw_watch
        failures = [RuntimeError("network down")]

        def flaky(*args: Any, **kwargs: Any) -> Any:
            if failures:
                raise failures.pop()
            return original(*args, **kwargs)

        monkeypatch.setattr(client.engine, "raw_watch", flaky)
        informer = Informer(client, WIDGET, clock=clock)
        errors: list[BaseException] = []
        informer.add_error_handler(errors.append)
        task = asyncio.create_task(informer.run())
        await settle(lambda: informer.statistics().watch_failures == 1)
        assert [str(e) for e in errors] == ["network down"]
        clock.advance(0.1)
        await settle(lambda: informer.statistics().lists == 2)
        await client.apply(widget("w2"))
        await settle(lambda: informer.get(widget_key("w2")) is not None)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def test_list_keeps_what_the_cache_wrote_undecoded(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Objects a write put in the cache before the first list (a bulk apply racing the
        informer's start) are kept as they are: the list decodes none of them, and one
        written after the list's snapshot is not deleted by it, nor decoded when its
        watch event comes."""
        informer = Informer(client, WIDGET, clock=clock)
        first = await client.apply(widget("w1"))
        informer.written(first, "me")
        snapshot = await client.engine.raw_list(WIDGET)
        later = await client.apply(widget("w2"))
        informer.written(later, "me")

        async def stale_list(*args: Any, **kwargs: Any) -> Any:
            return snapshot  # taken before w2 was written

        monkeypatch.setattr(client.engine, "raw_list", stale_list)
        decodes: list[Any] = []
        decode = client.decode

        def counting(body: Any, **kwargs: Any) -> Any:
            decodes.append(body)
            return decode(body, **kwargs)

        monkeypatch.setattr(client, "decode", counting)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), DEADLINE)
            await settle(lambda: informer.revision >= (later.metadata.resource_version or 0))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert informer.get(widget_key("w1")) is first
        assert informer.get(widget_key("w2")) is later
        assert decodes == []

    async def test_expired_watch_relists_and_reports_differences(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ExpiredError relists at once; the relist reports what changed meanwhile."""
        await client.apply(widget("w1"))
        await client.apply(widget("gone"))
        original = client.engine.raw_watch
        expired = [True]

        async def expiring(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            if expired:
                expired.pop()
                await client.delete("widget", "gone")
                await client.apply(widget("w1", 7))
                raise ExpiredError("compacted", horizon=99)
            async for item in original(*args, **kwargs):
                yield item

        monkeypatch.setattr(client.engine, "raw_watch", expiring)
        informer = Informer(client, WIDGET, clock=clock)
        heard: list[tuple[str, str]] = []
        informer.add_handler(lambda e: heard.append((e.type, e.key.name)))
        task = asyncio.create_task(informer.run())
        await settle(lambda: informer.statistics().lists == 2)
        assert informer.get(widget_key("gone")) is None
        w1 = informer.get(widget_key("w1"))
        assert w1 is not None
        assert w1.spec.size == 7
        assert ("deleted", "gone") in heard
        assert ("modified", "w1") in heard
        assert informer.statistics().watch_failures == 0
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def test_indexes(self, client: Client, clock: FakeClock) -> None:
        """The cache answers label selectors and owner lookups, and follows changes."""
        owner = {"apiVersion": "example.reconcile.dev/v1", "kind": "Widget", "name": "p", "uid": "u-1"}
        await client.apply(widget("a", labels={"app": "web"}, ownerReferences=[owner]))
        await client.apply(widget("b", labels={"app": "db"}))
        informer = Informer(client, WIDGET, clock=clock)
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), DEADLINE)
        assert [o.metadata.name for o in informer.list("app=web")] == ["a"]
        assert sorted(o.metadata.name for o in informer.list("app in (web,db)")) == ["a", "b"]
        assert [o.metadata.name for o in informer.owned_by("u-1")] == ["a"]
        await client.apply(widget("a", labels={"app": "db"}))
        revision = await client.revision()
        await asyncio.wait_for(informer.wait_for_revision(revision), DEADLINE)
        assert informer.list("app=web") == []
        assert sorted(o.metadata.name for o in informer.list("app=db")) == ["a", "b"]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def test_a_spec_change_only_json_sees_bumps_the_generation(
        self, store: EventStore, clock: FakeClock
    ) -> None:
        """``1`` and ``true`` are one value to Python's ``==`` and two in the stored JSON:
        an apply that turns one into the other (and changes a label beside) is a spec
        change, with its generation, and the cache, which reuses a spec only at the same
        generation, holds what the store holds."""
        client = Client(store, KindRegistry([BLOB]), clock=clock)

        def blob(value: object, labels: dict[str, str]) -> dict[str, Any]:
            return {
                "apiVersion": BLOB.api_version,
                "kind": "Blob",
                "metadata": {"name": "b", "labels": labels},
                "spec": {"data": {"x": value}},
            }

        await client.apply(blob(1, {}))
        informer = Informer(client, BLOB, clock=clock)
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), DEADLINE)
        changed = await client.apply(blob(value=True, labels={"a": "b"}))
        assert changed.metadata.generation == 2
        assert changed.spec.data["x"] is True
        again = await client.apply(blob(1, {"a": "b"}))  # nothing else changed
        assert again.metadata.generation == 3
        await asyncio.wait_for(informer.wait_for_revision(await client.revision()), DEADLINE)
        cached = informer.get(again.key)
        assert cached is not None
        assert cached.spec.data["x"] == 1
        assert cached.spec.data["x"] is not True
        history = [e.type for e in await client.history("blob", "b")]
        assert history == [EventType.CREATED, EventType.SPEC_CHANGED, EventType.SPEC_CHANGED]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def test_an_immutable_field_and_a_status_change_only_json_sees(
        self, store: EventStore, clock: FakeClock
    ) -> None:
        """``1`` made ``true`` in an immutable field is refused as any change of it is;
        in a status, it is a change to write (a status write and an action's)."""
        client = Client(store, KindRegistry([FROZEN_BLOB]), clock=clock)
        document = {
            "apiVersion": FROZEN_BLOB.api_version,
            "kind": "FrozenBlob",
            "metadata": {"name": "b"},
            "spec": {"data": {"x": 1}},
        }
        stored = await client.apply(document)
        with pytest.raises(InvalidError, match=r"spec\.data"):
            await client.apply({**document, "spec": {"data": {"x": True}}})
        with pytest.raises(InvalidError, match=r"spec\.data"):
            await client.update(attrs.evolve(stored, spec=BlobSpec({"x": True})))
        current = StoredObject(stored.key, "u", 1, {"metadata": {"name": "b"}, "status": {"ready": 1}})
        for mutation in (
            mutations.update_status(stored.key, {"ready": True}, None),
            mutations.record_actions(
                stored.key, [], annotations=None, finalizer=None, status={"ready": True}
            ),
        ):
            change = mutation(current)
            changes = change if isinstance(change, list) else [change]
            assert [c.body["status"] for c in changes if isinstance(c, Put)] == [{"ready": True}]

    async def test_a_change_of_status_or_metadata_reuses_the_cached_spec(
        self, client: Client, clock: FakeClock
    ) -> None:
        """Another writer's status or metadata change (same uid, same generation) is put
        in with the spec the cache holds, not structured again; a spec change, or a new
        incarnation of the key, is decoded whole. Either way the object equals a fresh
        read."""
        await client.apply(widget("w1", 3))
        informer = Informer(client, WIDGET, clock=clock)
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), DEADLINE)
        key = widget_key("w1")
        listed = informer.get(key)
        assert listed is not None

        async def caught_up() -> Any:
            await asyncio.wait_for(informer.wait_for_revision(await client.revision()), DEADLINE)
            cached = informer.get(key)
            assert cached == await client.get("widget", "w1")
            return cached

        stored = await client.get("widget", "w1")
        await client.update_status(attrs.evolve(stored, status=Status(observed_generation=1)))
        statused = await caught_up()
        assert statused.spec is listed.spec
        assert statused.status.observed_generation == 1
        await client.patch("widget", "w1", {"metadata": {"labels": {"tier": "db"}}})
        labelled = await caught_up()
        assert labelled.spec is listed.spec
        assert labelled.metadata.labels == {"tier": "db"}
        await client.apply(widget("w1", 4))  # generation 2
        changed = await caught_up()
        assert changed.spec is not listed.spec
        assert changed.spec.size == 4
        await client.delete("widget", "w1")
        await client.apply(widget("w1", 4))  # a new uid, generation 1 again
        again = await caught_up()
        assert again.metadata.uid != changed.metadata.uid
        assert again.spec is not changed.spec
        # An object the cache holds unconverted (its version's spec) lends nothing.
        body = (await client.engine.raw_list(WIDGET)).items[0].body
        unconverted = Unconverted(again.api_version, again.kind, again.metadata, again.spec, again.status)
        assert client.decoder.cached(body, unconverted).spec is not again.spec
        assert client.decoder.cached(body, again).spec is again.spec
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def hold_watch(client: Client, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Make the client's watches wait before each item until the returned gate opens."""
    gate = asyncio.Event()
    original = client.engine.raw_watch

    async def held(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in original(*args, **kwargs):
            await gate.wait()
            yield item

    monkeypatch.setattr(client.engine, "raw_watch", held)
    return gate


@contextlib.asynccontextmanager
async def running_informer(informer: Informer) -> AsyncIterator[Informer]:
    """Run an informer (its first list done) for the duration of the block."""
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), DEADLINE)
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class TestWritten:
    """The mutation cache: a process's own writes enter the cache at once, once."""

    async def test_own_write_is_cached_at_once_and_not_decoded_again(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """written() puts the written object in the cache and tells the handlers; its
        watch event then advances the revision without a second notice, and the cache
        keeps the very object the write returned (the event was dropped, not decoded
        into a copy)."""
        await client.apply(widget("w1"))
        gate = hold_watch(client, monkeypatch)
        informer = Informer(client, WIDGET, clock=clock)
        heard: list[tuple[str, int]] = []
        informer.add_handler(lambda e: heard.append((e.key.name, e.new.metadata.resource_version or 0)))
        async with running_informer(informer):
            cached = informer.get(widget_key("w1"))
            assert cached is not None
            written = await client.engine.record_actions(cached, [("Noted", None)], annotations={"a": "1"})
            revision = written.metadata.resource_version
            assert revision is not None
            informer.written(written, "engine")
            assert informer.get(widget_key("w1")) is written
            assert informer.revision < revision  # the cache's revision moves with the watch only
            assert heard[-1] == ("w1", revision)
            gate.set()
            await asyncio.wait_for(informer.wait_for_revision(revision), DEADLINE)
            assert informer.get(widget_key("w1")) is written
            assert [h for h in heard if h == ("w1", revision)] == [("w1", revision)]
            # A change by someone else after it is decoded by the watch and heard as usual.
            theirs = (await client.apply(widget("w1", 5))).metadata.resource_version
            await settle(lambda: informer.get(widget_key("w1")).spec.size == 5)  # type: ignore[union-attr]
            assert heard[-1] == ("w1", theirs)

    async def test_a_change_inside_our_write_is_still_heard(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Somebody changes the object between our read and our write: the remembered
        object contains their change, and its watch event still tells the handlers who
        made it (a controller ignoring its own writes must not miss it)."""
        read = await client.apply(widget("w1"))
        gate = hold_watch(client, monkeypatch)
        informer = Informer(client, WIDGET, clock=clock)
        heard: list[tuple[str, str | None]] = []
        informer.add_handler(lambda e: heard.append((e.type, e.actor)))
        async with running_informer(informer):
            await client.patch("widget", "w1", {"metadata": {"labels": {"by": "them"}}}, manager="someone")
            written = await client.engine.record_actions(read, [], annotations={"a": "1"}, manager="engine")
            assert written.metadata.labels == {"by": "them"}
            informer.written(written, "engine")
            gate.set()
            await asyncio.wait_for(informer.wait_for_revision(await client.revision()), DEADLINE)
            assert heard == [("added", None), ("modified", "engine"), ("modified", "someone")]
            assert informer.get(widget_key("w1")) is written

    async def test_stale_or_foreign_objects_are_ignored(self, client: Client, clock: FakeClock) -> None:
        """An object the watch has passed already, of another kind or without a version,
        changes nothing: a deleted object is not brought back."""
        first = await client.apply(widget("w1"))
        informer = Informer(client, WIDGET, clock=clock)
        heard: list[str] = []
        informer.add_handler(lambda e: heard.append(e.type))
        async with running_informer(informer):
            await client.delete("widget", "w1")
            await asyncio.wait_for(informer.wait_for_revision(await client.revision()), DEADLINE)
            assert heard == ["added", "deleted"]
            informer.written(first, "engine")
            informer.written(attrs.evolve(first, kind="Gadget"), "engine")
            informer.written(
                attrs.evolve(first, metadata=attrs.evolve(first.metadata, resource_version=None))
            )
            assert informer.get(widget_key("w1")) is None
            assert heard == ["added", "deleted"]

    async def test_an_older_delete_does_not_remove_a_newer_object(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Deleted and created again, then written by us: the watch's older delete
        event leaves the remembered newer object in place."""
        await client.apply(widget("w1"))
        gate = hold_watch(client, monkeypatch)
        informer = Informer(client, WIDGET, clock=clock)
        heard: list[tuple[str, str | None]] = []
        informer.add_handler(lambda e: heard.append((e.type, e.actor)))
        async with running_informer(informer):
            await client.apply(widget("w1", 9))  # the first incarnation changes, then goes
            await client.delete("widget", "w1")
            again = await client.apply(widget("w1", 2))
            written = await client.engine.record_actions(again, [], annotations={"a": "1"})
            assert written.spec is again.spec  # the generation did not move: the spec is reused
            informer.written(written, "engine")
            gate.set()
            await asyncio.wait_for(informer.wait_for_revision(await client.revision()), DEADLINE)
            cached = informer.get(widget_key("w1"))
            assert cached is written
            # From the list, then ours; the delete and the create are heard as changes by
            # their author, but the cache never goes back to "deleted".
            assert heard == [
                ("added", None),
                ("modified", "engine"),
                ("modified", "reconcile"),
                ("modified", "reconcile"),
                ("modified", "reconcile"),
            ]
            # The first incarnation's later change (size 9) never replaced our newer object.


def widget_key(name: str) -> ObjectKey:
    """The ObjectKey of a Widget in the default namespace."""
    return ObjectKey("example.reconcile.dev", "Widget", "default", name)


class TestTelemetry:
    """Spans and metrics through the OpenTelemetry SDK's in-memory exporters."""

    async def test_span_and_metrics_per_reconcile(self, client: Client, clock: FakeClock) -> None:
        """Each reconcile has a span with kind, key, generation, trigger and result; counters count."""
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        telemetry = Telemetry(
            tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
        )
        await client.apply(widget("w1", 3))
        controller, reconciler = make(client, clock, telemetry=telemetry)
        reconciler.fail["w2"] = RuntimeError("boom")
        async with running(controller):
            await client.apply(widget("w2"))
            await settle(lambda: reconciler.calls.get("w1", 0) >= 2 and reconciler.calls.get("w2", 0) >= 1)
            # Nothing in flight or ready (w2 waits for its backoff on the fake clock).
            await settle(lambda: (stats := controller.queue.statistics()).depth + stats.processing == 0)
            data = reader.get_metrics_data()
        spans = [s for s in exporter.get_finished_spans() if s.name == "reconcile"]
        first = next(s for s in spans if s.attributes["reconcile.key"] == "default/w1")
        assert first.attributes["reconcile.kind"] == "Widget"
        assert first.attributes["reconcile.generation"] == 1
        assert first.attributes["reconcile.trigger"] == "change"
        assert first.attributes["reconcile.result"] == "success"
        failed = next(s for s in spans if s.attributes["reconcile.key"] == "default/w2")
        assert failed.attributes["reconcile.result"] == "error"
        metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        assert {
            "reconcile_total",
            "reconcile_time_seconds",
            "workqueue_depth",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
            "controller_runtime_active_workers",
        } <= set(metrics)
        results = {p.attributes["result"]: p.value for p in metrics["reconcile_total"].data.data_points}
        assert results["success"] >= 2
        assert results["error"] >= 1
        (waited,) = metrics["workqueue_queue_duration_seconds"].data.data_points
        assert waited.attributes == {"controller": "widget"}
        assert waited.count == sum(results.values()), "one wait per key handed out"
        (workers,) = metrics["controller_runtime_max_concurrent_reconciles"].data.data_points
        assert workers.value == 4
        (adds,) = metrics["workqueue_adds_total"].data.data_points
        assert adds.value == controller.queue.statistics().adds >= 3, (
            "the queue's own count, read at collection"
        )


class TestTheShortWay:
    """A reconcile nobody records (no span, no metric, no deadline) takes the worker's
    short way; what it does must not differ from the long way's."""

    async def test_one_request_per_key_dropped_with_the_object(
        self, client: Client, clock: FakeClock
    ) -> None:
        """Every reconcile of a key gets the same Request; deleting the object drops it,
        so a cache of requests does not outlive the objects."""
        seen: list[Request] = []

        class Recording:
            async def reconcile(self, request: Request) -> Result | None:
                seen.append(request)
                return None

        await client.apply(widget("w1"))
        controller = Controller(client, WIDGET, Recording(), clock=clock, workers=2, resync_period=None)
        async with running(controller):
            await settle(lambda: len(seen) == 1)
            controller.enqueue(widget_key("w1"))
            await settle(lambda: len(seen) == 2)
            assert seen[0] is seen[1]
            assert seen[0].key == widget_key("w1")
            await client.delete("widget", "w1")
            await settle(lambda: len(seen) == 3)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            assert widget_key("w1") not in controller._requests  # the leak guard

    @pytest.mark.parametrize("recorded", [False, True], ids=["bare", "traced"])
    async def test_results_and_failures_the_same_either_way(
        self, client: Client, clock: FakeClock, recorded: bool
    ) -> None:
        """A failure, then a requeue, then a success: the backoff grows, then is
        forgotten; the failure is reported until the success, with or without spans."""
        tracer_provider = TracerProvider() if recorded else None
        telemetry = Telemetry(tracer_provider=tracer_provider)
        assert telemetry.recording is recorded
        applied = await client.apply(widget("w1"))
        await client.update_status(attrs.evolve(applied, status=Status(observed_generation=1)))
        controller, reconciler = make(client, clock, telemetry=telemetry)
        key = widget_key("w1")
        reconciler.fail["w1"] = RuntimeError("boom")
        reconciler.results["w1"] = [Result(requeue=True), Result()]
        async with running(controller):
            await settle(lambda: controller.queue.num_requeues(key) == 1)
            assert controller.failures[key] == "boom"
            del reconciler.fail["w1"]
            clock.advance(0.005)
            await settle(lambda: reconciler.calls["w1"] == 2)
            await settle(lambda: controller.queue.num_requeues(key) == 2)
            assert key not in controller.failures, "a requeue is not a failure"
            clock.advance(0.01)
            await settle(lambda: reconciler.calls["w1"] == 3)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            assert controller.queue.num_requeues(key) == 0, "the success forgot the failures"

    async def test_span_names_why_the_key_was_queued(self, client: Client, clock: FakeClock) -> None:
        """The trigger is the priority of the key's first add since it was last taken
        ("resync" even when a change moved it up), or "requeue" for a requested one."""
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        applied = await client.apply(widget("w1"))
        # Converged already: the reconciler writes nothing, so no watch event of its own
        # write can come late and add a reconcile of its own between the steps below.
        await client.update_status(attrs.evolve(applied, status=Status(observed_generation=1)))
        controller, reconciler = make(client, clock, telemetry=Telemetry(tracer_provider=tracer_provider))
        reconciler.results["w1"] = [Result(), Result(), Result(requeue_after=1.0)]
        key = widget_key("w1")

        def triggers() -> list[str]:
            return [
                s.attributes["reconcile.trigger"]
                for s in exporter.get_finished_spans()
                if s.name == "reconcile"
            ]

        async with running(controller):
            await settle(lambda: len(triggers()) >= 1)
            await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)
            first = len(triggers())
            assert first == 1
            controller.enqueue_many([key])
            controller.enqueue(key)  # a change moves the queued resync up
            await settle(lambda: len(triggers()) == first + 1)
            controller.enqueue(key)
            await settle(lambda: len(triggers()) == first + 2)
            clock.advance(1.0)
            await settle(lambda: len(triggers()) == first + 3)
        assert triggers()[0] == "change"
        assert triggers()[first:] == ["resync", "change", "requeue"]


class TestGrowthHook:
    """The informer says when its cache grew (what the Runtime's collector tuning acts
    on); it touches no process-wide setting itself."""

    async def test_after_each_list_and_every_tenth_new(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The hook hears of the end of the list once, then of every
        ``max(_GROWTH_EVERY, a tenth of the cache)`` objects put in after it; an informer
        without a hook runs as before."""
        monkeypatch.setattr(informing, "_GROWTH_EVERY", 3)
        sizes: list[int] = []
        for i in range(5):
            await client.apply(widget(f"w{i}"))
        plain = Informer(client, WIDGET, clock=clock)
        growing = Informer(
            client,
            WIDGET,
            clock=clock,
            on_growth=lambda informer: sizes.append(informer.statistics().objects),
        )
        tasks = [asyncio.create_task(plain.run()), asyncio.create_task(growing.run())]
        await asyncio.wait_for(growing.synced.wait(), DEADLINE)
        assert sizes == [5], "once, at the end of the list"
        for i in range(5, 12):
            await client.apply(widget(f"w{i}"))
        revision = await client.revision()
        await asyncio.wait_for(growing.wait_for_revision(revision), DEADLINE)
        assert sizes == [5, 8, 11], "after every third object put in since"
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class TestListingHook:
    """Each list's reading and decoding run inside the context the informer was given (the Runtime's
    collector tuning); the growth hook hears of the list after it ends."""

    async def test_around_each_list(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The context is entered before the list is read (every body parsed: the first
        of the burst) and left after the last object is put in, once per list; the
        growth hook is called after it is left."""
        seen: list[tuple[str, int]] = []
        informer: Informer
        read = client.engine.raw_list

        async def reading(*args: Any, **kwargs: Any) -> Any:
            seen.append(("read", informer.statistics().objects))
            return await read(*args, **kwargs)

        monkeypatch.setattr(client.engine, "raw_list", reading)

        @contextlib.contextmanager
        def listing() -> Iterator[None]:
            seen.append(("enter", informer.statistics().objects))
            yield
            seen.append(("exit", informer.statistics().objects))

        for i in range(4):
            await client.apply(widget(f"w{i}"))
        informer = Informer(
            client,
            WIDGET,
            clock=clock,
            on_growth=lambda grown: seen.append(("grew", grown.statistics().objects)),
            listing=listing,
        )
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), DEADLINE)
        listed = [("enter", 0), ("read", 0), ("exit", 4), ("grew", 4)]
        assert seen == listed
        await client.apply(widget("w4"))
        await asyncio.wait_for(informer.wait_for_revision(await client.revision()), DEADLINE)
        assert seen == listed, "a watch event is not a list"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_shutdown_twice_is_harmless(client: Client, clock: FakeClock) -> None:
    """Shutting a controller down twice neither raises nor hangs."""
    controller, _ = make(client, clock)
    assert await controller.shutdown(deadline=DEADLINE)
    assert await controller.shutdown(deadline=DEADLINE)
