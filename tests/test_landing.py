"""A reconcile's last write lands while the worker goes on; its key stays in flight (not
reconciled again) until the write is durable, and a write that fails is retried like a
failed reconcile."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import settle, synced, widget
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reconcile import Client, ConflictError, ObjectKey, Runtime, Status, StoreError
from reconcile.controller import Cache, CachedClient, Controller, Request, Result, Telemetry
from reconcile.store import EventStore
from reconcile.testing import WIDGET, FakeClock, MemoryCloud, MemoryProvider, let_run

DEADLINE = 10.0
LANDER = "lander"


class Held:
    """The store's writes of the named objects by one actor wait, before they reach the
    store, until released (their commit held); a release may make them fail instead."""

    def __init__(self, store: EventStore, actor: str, names: set[str], *, skip: int = 0) -> None:
        self._write = store.write
        self.actor = actor
        #: How many writes of each name go through before the holding begins.
        self.skip = collections.Counter(dict.fromkeys(names, skip))
        self.gates = {name: asyncio.Event() for name in names}
        self.failing: dict[str, BaseException] = {}
        #: Writes of each name waiting now.
        self.waiting: collections.Counter[str] = collections.Counter()

    async def write(self, key: ObjectKey, mutation: Any, *, actor: str, user: str | None = None) -> Any:
        """The store's write, held while the key's gate is closed."""
        gate = self.gates.get(key.name)
        if gate is not None and actor == self.actor and self.skip[key.name]:
            self.skip[key.name] -= 1
        elif gate is not None and actor == self.actor:
            self.waiting[key.name] += 1
            try:
                await gate.wait()
            finally:
                self.waiting[key.name] -= 1
            failure = self.failing.pop(key.name, None)
            if failure is not None:
                raise failure
        return await self._write(key, mutation, actor=actor, user=user)

    def release(self, name: str, failure: BaseException | None = None) -> None:
        """Let the name's writes through (the first one raising ``failure``)."""
        if failure is not None:
            self.failing[name] = failure
        self.gates[name].set()


class Lander:
    """Writes status.observedGeneration = generation, the write returned unawaited."""

    def __init__(self, client: CachedClient) -> None:
        self.client = client
        #: Where the write's span goes (none: no span).
        self.tracer: trace.Tracer | None = None
        self.calls: collections.Counter[str] = collections.Counter()
        #: The observed generation each reconcile found, per name.
        self.seen: dict[str, list[int]] = collections.defaultdict(list)

    async def reconcile(self, request: Request) -> Result | None:
        """Record the generation in status; leave the write to land."""
        self.calls[request.name] += 1
        obj = await self.client.get(request.key)
        self.seen[request.name].append(obj.status.observed_generation)
        if obj.status.observed_generation == obj.metadata.generation:
            return None
        status = Status(observed_generation=obj.metadata.generation)
        return Result(pending=self._write(attrs.evolve(obj, status=status)))

    async def _write(self, obj: Any) -> None:
        with contextlib.nullcontext() if self.tracer is None else self.tracer.start_as_current_span("write"):
            await self.client.update_status(obj, force=True)


def key(name: str) -> ObjectKey:
    """A Widget's key."""
    return ObjectKey(WIDGET.api_group, WIDGET.kind, "default", name)


def observed(controller: Controller, name: str) -> int:
    """The observed generation the controller's cache holds for the widget."""
    obj = controller.informer.get(key(name))
    return -1 if obj is None else obj.status.observed_generation


async def turns(count: int = 200) -> None:
    """Let the loop run ``count`` turns (for something that must *not* happen)."""
    for turn in range(count):
        await let_run(turn)


@contextlib.asynccontextmanager
async def landing(
    client: Client,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    held: set[str],
    **options: Any,
) -> AsyncIterator[tuple[Controller, Lander, Held]]:
    """A Widget controller with a Lander, the status writes of ``held`` held."""
    holding = Held(client.store, LANDER, held)
    monkeypatch.setattr(client.store, "write", holding.write)
    options.setdefault("workers", 1)
    cache = Cache(client, clock=clock)
    lander = Lander(CachedClient(client, cache, manager=LANDER))
    controller = Controller(
        client,
        WIDGET,
        lander,
        cache=cache,
        clock=clock,
        ignore_actors=frozenset({LANDER}),
        resync_period=None,
        **options,
    )
    task = asyncio.create_task(controller.run())
    try:
        await synced(controller, task)
        yield controller, lander, holding
    finally:
        for gate in holding.gates.values():
            gate.set()
        await controller.shutdown(deadline=DEADLINE)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class TestLanding:
    """The worker goes on; the key waits for its write."""

    async def test_a_worker_takes_another_key_while_a_write_lands(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One worker: a's status write is held, yet b is reconciled and written; a, changed
        meanwhile, is not reconciled again until its write is durable, and then sees it."""
        async with landing(client, clock, monkeypatch, {"a"}) as (controller, lander, held):
            await client.apply(widget("a"))
            await settle(lambda: held.waiting["a"] == 1)
            await client.apply(widget("b"))
            await settle(lambda: observed(controller, "b") == 1)
            await client.apply(widget("a", 2))  # a change of a, while its write is held
            await settle(
                lambda: (o := controller.informer.get(key("a"))) is not None and o.metadata.generation == 2
            )
            await turns()
            assert lander.calls["a"] == 1
            assert held.waiting["a"] == 1
            assert controller.queue.statistics().processing == 1  # a, still in flight
            held.release("a")
            await settle(lambda: observed(controller, "a") == 2)
            # The second reconcile of a read what the first one wrote.
            assert lander.seen["a"] == [0, 1]
            assert lander.calls["a"] == 2

    @pytest.mark.parametrize(
        "failure", [StoreError("disk full"), ConflictError("changed meanwhile")], ids=["store", "conflict"]
    )
    async def test_a_failed_write_is_retried_with_backoff(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, failure: Exception
    ) -> None:
        """A landing write that fails makes the reconcile a failure: the key is retried
        after its backoff (not before), its failure said; the retry that lands clears it."""
        async with landing(client, clock, monkeypatch, {"a"}) as (controller, lander, held):
            await client.apply(widget("a"))
            await settle(lambda: held.waiting["a"] == 1)
            held.release("a", failure)
            await settle(lambda: key("a") in controller.failures)
            assert str(failure) in controller.failures[key("a")]
            assert controller.queue.num_requeues(key("a")) == 1
            await turns()
            assert lander.calls["a"] == 1  # its backoff (5 ms on the fake clock) not over
            clock.advance(0.005)
            await settle(lambda: observed(controller, "a") == 1)
            assert lander.calls["a"] == 2
            await settle(lambda: not controller.failures)

    async def test_landing_writes_are_bounded(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With at most two writes landing, a third key waits for one of them to land."""
        names = {"a", "b", "c"}
        async with landing(client, clock, monkeypatch, names, max_pending_writes=2) as (
            controller,
            lander,
            held,
        ):
            for name in sorted(names):
                await client.apply(widget(name))
            await settle(lambda: sum(held.waiting.values()) == 2)
            await turns()
            assert sum(lander.calls.values()) == 2
            first = next(name for name in sorted(names) if held.waiting[name])
            held.release(first)
            await settle(lambda: sum(lander.calls.values()) == 3)
            for name in names:
                held.release(name)
            await settle(lambda: all(observed(controller, name) == 1 for name in names))

    async def test_a_landing_write_that_hangs_is_cut_by_the_reconcile_timeout(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A landing write bounded as the reconcile is: one that hangs past
        ``reconcile_timeout`` is a failure retried with backoff, and gives its slot
        back, so another key is reconciled (it waited for room before)."""
        options = {"max_pending_writes": 1, "reconcile_timeout": 0.3}
        async with landing(client, clock, monkeypatch, {"a", "b"}, **options) as (controller, lander, held):
            await client.apply(widget("a"))
            await settle(lambda: held.waiting["a"] == 1)
            await client.apply(widget("b"))
            await turns()
            assert lander.calls["b"] == 0  # no room while a's write lands
            clock.advance(0.3)
            await settle(lambda: key("a") in controller.failures)
            assert "did not land within 0.3 s" in controller.failures[key("a")]
            await settle(lambda: lander.calls["b"] == 1)
            held.release("a")
            held.release("b")
            clock.advance(1.0)  # a's backoff
            await settle(lambda: observed(controller, "a") == 1 and observed(controller, "b") == 1)

    @pytest.mark.parametrize("bound", [0, -1])
    def test_the_bound_is_at_least_one(self, client: Client, bound: int) -> None:
        """A bound below one is refused, naming it, when the controller is made."""
        with pytest.raises(ValueError, match=f"max_pending_writes must be at least 1, not {bound}"):
            Controller(client, WIDGET, Lander(CachedClient(client, Cache(client))), max_pending_writes=bound)

    async def test_shutdown_waits_for_landing_writes(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Shutdown returns once every landing write is durable, not before."""
        async with landing(client, clock, monkeypatch, {"a"}) as (controller, _, held):
            await client.apply(widget("a"))
            await settle(lambda: held.waiting["a"] == 1)
            stopping = asyncio.create_task(controller.shutdown(deadline=DEADLINE))
            await turns()
            assert not stopping.done()
            held.release("a")
            assert await asyncio.wait_for(stopping, DEADLINE)
            assert (await client.get("widget", "a")).status.observed_generation == 1

    async def test_the_reconcile_span_ends_when_its_write_lands(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The reconcile's span stays open while its write lands, ends with the outcome,
        and the write's span is its child."""
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry = Telemetry(tracer_provider=provider)
        async with landing(client, clock, monkeypatch, {"a"}, telemetry=telemetry) as (_, lander, held):
            lander.tracer = provider.get_tracer("test")
            await client.apply(widget("a"))
            await settle(lambda: held.waiting["a"] == 1)
            await turns()
            assert not [s for s in exporter.get_finished_spans() if s.name == "reconcile"]
            held.release("a")
            await settle(
                lambda: (
                    lander.calls["a"] == 1
                    and any(s.name == "reconcile" for s in exporter.get_finished_spans())
                )
            )
        spans = exporter.get_finished_spans()
        (reconcile,) = [s for s in spans if s.name == "reconcile"]
        assert reconcile.attributes is not None
        assert reconcile.attributes["reconcile.result"] == "success"
        assert reconcile.context is not None
        (written,) = [s for s in spans if s.name == "write"]
        assert written.parent is not None
        assert written.parent.span_id == reconcile.context.span_id
        assert written.end_time is not None
        assert reconcile.end_time is not None
        assert written.end_time <= reconcile.end_time


class TestManagedLanding:
    """The managed reconciler leaves its outcome write to land."""

    async def test_one_worker_goes_on_while_an_outcome_lands(
        self, db_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One worker: bucket a's outcome write (after its create) is held; b is created
        and Ready meanwhile; a, changed meanwhile, is neither created again nor updated
        until its outcome is durable, then converges with a single create."""
        cloud = MemoryCloud(clock=clock)
        runtime = Runtime(
            db_path,
            providers=[MemoryProvider(cloud)],
            clock=clock,
            wall_clock=clock,
            poll_interval=3600,
            workers=1,
        )
        async with runtime:
            await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
            # The engine's first write of a (a marker-first create's pending marker,
            # awaited before the provider is called) goes through; its outcome is held.
            held = Held(runtime.client.store, "reconcile-engine", {"a"}, skip=1)
            monkeypatch.setattr(runtime.client.store, "write", held.write)
            await runtime.apply(bucket("a"))
            await settle(lambda: held.waiting["a"] == 1)
            assert cloud.calls["create"] == 1
            await runtime.apply(bucket("b"))
            await asyncio.wait_for(runtime.wait_ready("bucket", "b"), DEADLINE)
            await runtime.apply(bucket("a", "changed"))
            await turns()
            assert cloud.calls["create"] == 2  # a once, b once
            assert cloud.calls["update"] == 0  # a's change waits for its outcome
            held.release("a")
            obj = await asyncio.wait_for(runtime.wait_ready("bucket", "a"), DEADLINE)
            await settle(lambda: cloud.items["a"].value == "changed")
            assert cloud.calls["create"] == 2
            assert cloud.items["a"].owner == obj.metadata.uid
            types = [e.type for e in await runtime.client.history("bucket", "a")]
            assert types.count("CreateSucceeded") == 1
            assert types.count("CreateRequested") == 1


def bucket(name: str, value: str = "v") -> dict[str, Any]:
    """A memory Bucket manifest."""
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"name": name, "value": value},
    }
