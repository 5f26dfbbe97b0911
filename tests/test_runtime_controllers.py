"""The Runtime hosts any controller: a custom reconciler added with ``add_controller``
(or the ``controller`` decorator) runs beside the managed ones on the same cache, reads
its own writes, and counts in ``wait_converged``; the waits run on the runtime's clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import settle, widget

from reconcile import (
    ConflictError,
    NotFoundError,
    ObjectKey,
    PermanentError,
    Request,
    Result,
    Runtime,
    TransientError,
)
from reconcile.controller import Context
from reconcile.model import Condition, ConditionStatus
from reconcile.testing import FakeClock, MemoryCloud, MemoryProvider, example_kinds

DEADLINE = 20.0  # real seconds: a guard against a hang, never a wait


def bucket(name: str) -> dict[str, Any]:
    """A Bucket of the memory provider."""
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"name": name, "value": "v"},
    }


@contextlib.asynccontextmanager
async def runtime_of(
    db: Path, clock: FakeClock, cloud: MemoryCloud | None = None, **options: Any
) -> AsyncIterator[Runtime]:
    """A Runtime with the example kinds and the memory provider, on the fake clock."""
    runtime = Runtime(
        db,
        providers=[MemoryProvider(cloud or MemoryCloud(clock=clock))],
        kinds=example_kinds(),
        clock=clock,
        wall_clock=clock,
        resync_period=None,
        **options,
    )
    async with runtime:
        yield runtime


class Counter:
    """Writes a status that counts its passes, guarded by the version it read: a read
    older than its own last write would conflict."""

    def __init__(self, context: Context, passes: int) -> None:
        self.context = context
        self.passes = passes
        self.read_versions: list[int] = []
        self.written_versions: list[int] = []
        self.conflicts = 0

    async def reconcile(self, request: Request) -> Result | None:
        """One pass: read, check it is our last write, write the next count."""
        try:
            obj = await self.context.client.get(request.key)
        except NotFoundError:
            return None
        self.read_versions.append(obj.metadata.resource_version or 0)
        count = len(self.written_versions) + 1
        ready = Condition("Ready", ConditionStatus.TRUE, "Counted", f"pass {count}")
        status = attrs.evolve(obj.status, observed_generation=obj.metadata.generation, conditions=(ready,))
        try:
            written = await self.context.client.update_status(attrs.evolve(obj, status=status))
        except ConflictError:
            self.conflicts += 1
            raise
        self.written_versions.append(written.metadata.resource_version or 0)
        return Result(requeue_after=0) if count < self.passes else None


async def test_a_custom_reconciler_reads_its_own_writes(tmp_path: Path, clock: FakeClock) -> None:
    """A factory added with add_controller gets a Context; each pass reads exactly the
    version its previous pass wrote (no stale read, no conflict), its writes are
    recorded under the controller's name, and they do not trigger it again."""
    made: list[Counter] = []

    def factory(context: Context) -> Counter:
        made.append(Counter(context, passes=5))
        return made[-1]

    async with runtime_of(tmp_path / "c.db", clock) as runtime:
        runtime.add_controller("widget", factory, name="counter")
        await runtime.apply(widget("w1"))
        [counter] = made
        await asyncio.wait_for(settle(lambda: len(counter.written_versions) == 5), DEADLINE)
        state = await asyncio.wait_for(runtime.wait_converged(kinds=["widget"]), DEADLINE)
        assert state.converged
        assert counter.conflicts == 0
        assert counter.read_versions[1:] == counter.written_versions[:-1]
        history = await runtime.client.history("widget", "w1")
        assert [e.actor for e in history if e.type == "StatusChanged"] == ["counter"] * 5
        assert len(counter.read_versions) == 5  # its own writes did not start more passes


async def test_delete_through_the_runtime_is_cached_at_once(tmp_path: Path, clock: FakeClock) -> None:
    """``Runtime.delete`` of a managed object: the marked object is what the cache holds
    when it returns (before any watch event), its controller deletes the external
    resource and the object goes; an object without finalizers is gone at once."""
    cloud = MemoryCloud(clock=clock)
    async with runtime_of(tmp_path / "d.db", clock, cloud) as runtime:
        await runtime.apply(bucket("b1"))
        state = await asyncio.wait_for(runtime.wait_converged(), DEADLINE)
        assert state.converged
        assert "b1" in cloud.items
        marked = await runtime.delete("bucket", "b1")
        assert marked is not None
        assert marked.metadata.deletion_timestamp is not None
        answered, cached = runtime.cache.get_now(marked.key)
        assert answered
        assert cached is not None
        assert cached.metadata.resource_version == marked.metadata.resource_version
        await asyncio.wait_for(settle(lambda: runtime.cache.get_now(marked.key) == (True, None)), DEADLINE)
        assert "b1" not in cloud.items
        await runtime.apply(widget("w1"))
        assert await runtime.delete("widget", "w1") is None
        with pytest.raises(NotFoundError):
            await runtime.client.get("widget", "w1")


async def test_the_decorator_form_runs_beside_the_managed_controllers(
    tmp_path: Path, clock: FakeClock
) -> None:
    """@runtime.controller registers a function before start; it runs with the managed
    Bucket controller on one cache, and wait_converged covers both."""
    runtime = Runtime(
        tmp_path / "d.db",
        providers=[MemoryProvider(MemoryCloud(clock=clock))],
        kinds=example_kinds(),
        clock=clock,
        wall_clock=clock,
        resync_period=None,
    )
    seen: list[str] = []

    @runtime.controller("widget", workers=2)
    async def widgets(request: Request, context: Context) -> Result | None:
        obj = await context.client.get(request.key)
        seen.append(obj.metadata.name)
        ready = Condition("Ready", ConditionStatus.TRUE, "Seen", "")
        status = attrs.evolve(obj.status, observed_generation=obj.metadata.generation, conditions=(ready,))
        await context.client.update_status(attrs.evolve(obj, status=status))
        return None

    async with runtime:
        assert sorted(runtime.controllers) == [
            "bucket.memory.reconcile.dev",
            "note.memory.reconcile.dev",
            "widget.example.reconcile.dev",
        ]
        assert runtime.controllers["widget.example.reconcile.dev"].informer is runtime.cache.informer(
            "widget"
        )
        for i in range(3):
            await runtime.apply(widget(f"w{i}"))
            await runtime.apply(bucket(f"b{i}"))
        state = await asyncio.wait_for(runtime.wait_converged(), DEADLINE)
        assert state.converged
        assert (state.ready, state.total) == (6, 6)
        # Its own status write may come back through the watch before the cache holds it, and a
        # level-triggered controller then reconciles the widget once more: idempotent, so counted once.
        assert sorted(set(seen)) == ["w0", "w1", "w2"]


async def test_two_controllers_of_one_kind_share_its_informer(tmp_path: Path, clock: FakeClock) -> None:
    """A second controller of a kind uses the same informer (one list, one watch)."""
    calls: list[str] = []

    async def noted(request: Request, _context: Context) -> None:
        calls.append(request.name)

    async with runtime_of(tmp_path / "s.db", clock) as runtime:
        runtime.controller("widget", name="first")(noted)
        runtime.controller("widget", name="second")(noted)
        await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
        await runtime.apply(widget("w1"))
        await asyncio.wait_for(settle(lambda: len(calls) == 2), DEADLINE)
        assert runtime.controllers["first"].informer is runtime.controllers["second"].informer
        assert runtime.controllers["first"].informer.statistics().lists == 1
        with pytest.raises(ValueError, match="already runs"):
            runtime.controller("widget", name="first")(noted)


class TestWaitConverged:
    """wait_converged answers "is everything Ready for its generation", on the clock."""

    async def test_settled_short_of_ready(self, tmp_path: Path, clock: FakeClock) -> None:
        """A permanent failure settles: the wait returns at once, not converged, naming
        what the engine gave up on."""
        cloud = MemoryCloud(clock=clock)
        cloud.break_item("bad", PermanentError("quota exceeded"))
        async with runtime_of(tmp_path / "p.db", clock, cloud) as runtime:
            await runtime.apply(bucket("good"))
            await runtime.apply(bucket("bad"))
            state = await asyncio.wait_for(runtime.wait_converged(kinds=["bucket"]), DEADLINE)
            assert state.settled
            assert not state.converged
            assert [o.metadata.name for o in state.stuck] == ["bad"]
            assert (state.ready, state.total) == (1, 2)

    async def test_the_deadline_runs_on_the_clock(self, tmp_path: Path, clock: FakeClock) -> None:
        """A transient failure keeps it waiting; the timeout fires when the runtime's clock
        passes it (no real time waited), saying how many are not Ready."""
        cloud = MemoryCloud(clock=clock)
        cloud.break_item("flaky", TransientError("try later"))
        # One attempt per reconcile: no retry sleeps on the fake clock inside one, so
        # closing finds nothing in flight.
        async with runtime_of(tmp_path / "t.db", clock, cloud, provider_attempts=1) as runtime:
            await runtime.apply(bucket("flaky"))
            before = clock.sleepers
            waiter = asyncio.create_task(runtime.wait_converged(timeout=30))
            await asyncio.wait_for(settle(lambda: clock.sleepers > before), DEADLINE)
            assert not waiter.done()
            clock.advance(30)
            with pytest.raises(TimeoutError, match="1 of 1 not Synced and Ready"):
                await asyncio.wait_for(waiter, DEADLINE)


def ready_status(obj: Any, reason: str) -> Any:
    """``obj`` with a Ready=True status for its generation."""
    ready = Condition("Ready", ConditionStatus.TRUE, reason, "")
    status = attrs.evolve(obj.status, observed_generation=obj.metadata.generation, conditions=(ready,))
    return attrs.evolve(obj, status=status)


async def never(_request: Request, _context: Context) -> None:
    """A reconcile function (the decorator's form, not add_controller's)."""


class NoReconcile:
    """A class without a reconcile method."""

    def __init__(self, context: Context) -> None:
        self.context = context


class TakesNothing:
    """A Reconciler class that cannot take the Context."""

    async def reconcile(self, _request: Request) -> None:
        """Nothing to do."""


class TestAddController:
    """add_controller takes a Reconciler, a Reconciler class or a factory, and refuses
    anything else when it is given."""

    async def test_a_class_is_instantiated_with_the_context(self, tmp_path: Path, clock: FakeClock) -> None:
        """A Reconciler class is made with the Context, and its reconciles succeed."""
        made: list[Any] = []

        class Widgets:
            def __init__(self, context: Context) -> None:
                self.context = context
                made.append(self)

            async def reconcile(self, request: Request) -> Result | None:
                try:
                    obj = await self.context.client.get(request.key)
                except NotFoundError:
                    return None
                await self.context.client.update_status(ready_status(obj, "Seen"))
                return None

        async with runtime_of(tmp_path / "k.db", clock) as runtime:
            runtime.add_controller("widget", Widgets, name="widgets")
            controller = runtime.controllers["widgets"]
            await runtime.apply(widget("w1"))
            key = ObjectKey("example.reconcile.dev", "Widget", "default", "w1")

            def ready_or_failed() -> bool:
                obj = runtime.cache.get_now(key)[1]
                ready = None if obj is None else obj.status.condition("Ready")
                return bool(controller.failures) or (
                    ready is not None and ready.status is ConditionStatus.TRUE
                )

            await asyncio.wait_for(settle(ready_or_failed), DEADLINE)
            assert controller.failures == {}
            [instance] = made
            assert isinstance(instance.context, Context)

    async def test_an_instance_is_used_as_it_is(self, tmp_path: Path, clock: FakeClock) -> None:
        """A Reconciler object is called as it is, never as a factory."""
        calls: list[str] = []

        class Noting:
            async def reconcile(self, request: Request) -> None:
                calls.append(request.name)

        async with runtime_of(tmp_path / "i.db", clock) as runtime:
            runtime.add_controller("widget", Noting(), name="noting")
            await runtime.apply(widget("w1"))
            await asyncio.wait_for(settle(lambda: calls == ["w1"]), DEADLINE)
            assert runtime.controllers["noting"].failures == {}

    @pytest.mark.parametrize(
        ("given", "named"),
        [
            (never, r"the function test_runtime_controllers\.never is a reconcile function.*decorator"),
            (NoReconcile, r"the class test_runtime_controllers\.NoReconcile has no reconcile method"),
            (TakesNothing, r"the class test_runtime_controllers\.TakesNothing cannot be called with one"),
            (lambda _context, _other: None, r"the function .*<lambda> cannot be called with one argument"),
            ("widgets", r"str 'widgets' is not a Reconciler"),
        ],
        ids=["reconcile-function", "no-reconcile", "takes-nothing", "two-arguments", "a-string"],
    )
    async def test_anything_else_is_refused_naming_it(
        self, tmp_path: Path, clock: FakeClock, given: Any, named: str
    ) -> None:
        """What is neither a Reconciler, a Reconciler class nor a factory taking the
        Context raises TypeError at add_controller, naming what was given."""
        runtime = Runtime(tmp_path / "r.db", kinds=example_kinds(), clock=clock, wall_clock=clock)
        with pytest.raises(TypeError, match=named):
            runtime.add_controller("widget", given)
        assert runtime.controllers == {}

    async def test_a_factory_must_make_a_reconciler(self, tmp_path: Path, clock: FakeClock) -> None:
        """A factory that returns something without a reconcile method is refused when
        it is called (at once on a started runtime), naming the factory and its result."""

        def confused(_context: Context) -> Any:
            return 42

        async with runtime_of(tmp_path / "f.db", clock) as runtime:
            with pytest.raises(
                TypeError, match=r"the factory .*confused returned int 42, which has no reconcile"
            ):
                runtime.add_controller("widget", confused)
            assert "widget.example.reconcile.dev" not in runtime.controllers

    async def test_wait_ready_times_out_naming_the_last_failure(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """A reconciler of the host's own that keeps failing writes no status: the timeout
        of wait_ready names its last failure."""

        async def failing(_request: Request, _context: Context) -> None:
            raise ValueError("the widget service said no")

        async with runtime_of(tmp_path / "w.db", clock) as runtime:
            runtime.controller("widget", name="failing")(failing)
            await runtime.apply(widget("w1"))
            waiter = asyncio.create_task(runtime.wait_ready("widget", "w1", timeout=30))
            failures = runtime.controllers["failing"].failures
            await asyncio.wait_for(settle(lambda: bool(failures)), DEADLINE)
            clock.advance(30)
            with pytest.raises(TimeoutError, match="last reconcile failed: the widget service said no"):
                await asyncio.wait_for(waiter, DEADLINE)
