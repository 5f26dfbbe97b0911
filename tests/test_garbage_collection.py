"""Owner references and the garbage collector: dependents follow their owner's deletion
by propagation policy (background, foreground, orphan), the collector catches up on
owners deleted while it was not running, and ownership cycles and second controllers
are refused."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import DEADLINE, checkout_path, widget

from reconcile import (
    AlreadyOwnedError,
    Client,
    OwnershipCycleError,
    Request,
    Result,
    Runtime,
    connect,
    set_controller_reference,
)
from reconcile.controller import COLLECTOR_MANAGER, Context
from reconcile.controller.caching import CachedClient
from reconcile.controller.owning import REAPPLY_SECONDS
from reconcile.model import ConditionStatus
from reconcile.model.resource import AnyResource
from reconcile.testing import FakeClock, example_kinds, let_run

CHILDREN = 200


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Let the loop run until ``check()`` holds, failing after a real deadline."""
    async with asyncio.timeout(DEADLINE):
        turn = 0
        while not await check():
            await let_run(turn)
            turn += 1


@contextlib.asynccontextmanager
async def runtime_of(db: Path, clock: FakeClock, **options: Any) -> AsyncIterator[Runtime]:
    """A Runtime with the example kinds only (no provider), on the fake clock."""
    runtime = Runtime(
        db, providers=[], kinds=example_kinds(), clock=clock, wall_clock=clock, resync_period=None, **options
    )
    async with runtime:
        yield runtime


async def family(client: Client, children: int = CHILDREN, **child_meta: Any) -> AnyResource:
    """An owner Widget and ``children`` Widgets it controls."""
    owner = await client.apply(widget("owner"))
    manifests = [
        set_controller_reference(owner, widget(f"child-{i:03}", **child_meta)) for i in range(children)
    ]
    results = await client.apply_many(manifests)
    assert all(r.error is None for r in results)
    return owner


async def names(client: Client) -> set[str]:
    """The names of the Widgets stored."""
    return {o.metadata.name for o in (await client.list("widget")).items}


def counted_reads(client: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the objects ``client`` reads from its store from now on."""
    real_read = client.store.read
    read: list[str] = []

    async def counting(key: Any) -> Any:
        read.append(key.name)
        return await real_read(key)

    monkeypatch.setattr(client.store, "read", counting)
    return read


class TestPropagation:
    """Each propagation policy, with 200 children."""

    async def test_background(self, tmp_path: Path, clock: FakeClock) -> None:
        """The owner goes at once; the collector deletes every child after, each
        deletion an event by the garbage collector in the child's history."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            client = runtime.client
            await family(client)
            assert await client.delete("widget", "owner", propagation_policy="background") is None

            async def collected() -> bool:
                return not await names(client)

            await until(collected)
            history = await client.history("widget", "child-000")
            assert [(e.type, e.actor) for e in history][-2:] == [
                ("GarbageCollected", COLLECTOR_MANAGER),
                ("Deleted", COLLECTOR_MANAGER),
            ]
            assert "every owner is gone: Widget 'owner'" in str(history[-2].data)

    async def test_foreground(self, tmp_path: Path, clock: FakeClock) -> None:
        """The owner waits, with the foregroundDeletion finalizer, until the children
        that block it are gone (one held by a finalizer of its own keeps it waiting);
        then it goes."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            client = runtime.client
            await family(client)
            await client.add_finalizer("widget", "child-007", "example.dev/hold")
            deleting = await client.delete("widget", "owner", propagation_policy="Foreground")
            assert deleting is not None
            assert deleting.metadata.finalizers == ("foregroundDeletion",)

            async def only_the_held_child_left() -> bool:
                return await names(client) == {"owner", "child-007"}

            await until(only_the_held_child_left)
            assert runtime.collector is not None
            await runtime.collector.wait_idle()
            owner = await client.get("widget", "owner")
            assert owner.metadata.deletion_timestamp is not None
            await client.remove_finalizer("widget", "child-007", "example.dev/hold")

            async def all_gone() -> bool:
                return not await names(client)

            await until(all_gone)
            owner_history = await client.history("widget", "owner")
            assert (owner_history[-1].type, owner_history[-1].actor) == ("Deleted", COLLECTOR_MANAGER)

    async def test_orphan(self, tmp_path: Path, clock: FakeClock) -> None:
        """The children stay, their owner reference removed; then the owner goes."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            client = runtime.client
            await family(client)
            await client.delete("widget", "owner", propagation_policy="orphan")

            async def owner_gone() -> bool:
                return "owner" not in await names(client)

            await until(owner_gone)
            children = (await client.list("widget")).items
            assert len(children) == CHILDREN
            assert all(not c.metadata.owner_references for c in children)
            history = await client.history("widget", "child-000")
            assert [e.actor for e in history][-2:] == [COLLECTOR_MANAGER, COLLECTOR_MANAGER]
            assert history[-2].type == "Orphaned"
            # Said as what it is: not a foreground deletion (it used to say one).
            assert history[-2].data["message"].endswith("is being deleted orphaning its dependents")

    async def test_unknown_policy_is_refused(self, client: Client) -> None:
        """An unknown propagation policy is InvalidError naming the allowed ones; nothing
        is deleted."""
        await client.apply(widget("w"))
        with pytest.raises(ValueError, match="must be one of background, foreground, orphan, not 'sideways'"):
            await client.delete("widget", "w", propagation_policy="sideways")
        assert await names(client) == {"w"}


class TestCatchingUp:
    """The collector works from the log: a restart catches up."""

    async def test_owners_deleted_while_stopped(self, tmp_path: Path, clock: FakeClock) -> None:
        """Owners deleted (in the background) while no collector ran: their children are
        collected when one starts; a child of a live owner stays, and a child that loses
        one of two owners only loses that reference."""
        db = tmp_path / "state.db"
        async with connect(db, kinds=example_kinds(), clock=clock) as client:
            await family(client, children=20)
            keeper = await client.apply(widget("keeper"))
            other = await client.apply(widget("other"))
            both = set_controller_reference(keeper, widget("shared"))
            both["metadata"]["ownerReferences"].append(
                {
                    "apiVersion": other.api_version,
                    "kind": "Widget",
                    "name": "other",
                    "uid": other.metadata.uid,
                }
            )
            await client.apply(both)
            await client.apply(set_controller_reference(keeper, widget("kept")))
            await client.delete("widget", "owner")
            await client.delete("widget", "other")
            await client.apply(widget("owner"))  # a new owner of the same name: another uid
        async with runtime_of(db, clock) as runtime:
            client = runtime.client

            async def caught_up() -> bool:
                return await names(client) == {"owner", "keeper", "shared", "kept"}

            await until(caught_up)
            assert runtime.collector is not None
            await runtime.collector.wait_idle()
            shared = await client.get("widget", "shared")
            assert [r.name for r in shared.metadata.owner_references] == ["keeper"]


class TestOwnership:
    """Controller references and cycles."""

    async def test_a_second_controller_is_refused(self, client: Client) -> None:
        """A child controlled by one owner cannot be made another's controller child,
        neither by the helper nor by an apply naming the other owner."""
        first = await client.apply(widget("first"))
        second = await client.apply(widget("second"))
        child = await client.apply(set_controller_reference(first, widget("child")))
        with pytest.raises(AlreadyOwnedError, match="already controlled by Widget 'first'"):
            set_controller_reference(second, child)
        with pytest.raises(AlreadyOwnedError, match="already controlled by Widget 'first'"):
            await client.apply(set_controller_reference(second, widget("child")))

    async def test_cycles_are_refused(self, client: Client) -> None:
        """An owner chain that leads back to the object is refused when applied, naming
        the chain; so is an object owning itself."""
        a = await client.apply(widget("a"))
        b = await client.apply(set_controller_reference(a, widget("b")))
        c = await client.apply(set_controller_reference(b, widget("c")))
        with pytest.raises(OwnershipCycleError, match="ownership cycle") as caught:
            await client.apply(set_controller_reference(c, widget("a")))
        assert caught.value.errors[0].path == "metadata.ownerReferences"
        with pytest.raises(OwnershipCycleError, match="cannot be its own owner"):
            await client.apply(set_controller_reference(a, widget("a")))
        assert (await client.get("widget", "a")).metadata.owner_references == ()
        [refused] = await client.apply_many([set_controller_reference(c, widget("a"))], check_all_first=True)
        assert isinstance(refused.error, OwnershipCycleError)
        assert (await client.get("widget", "a")).metadata.owner_references == ()

    async def test_owners_stored_is_a_hint_the_write_checks(
        self, client: Client, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``apply(owners_stored=True)`` skips the cycle check's reads of the owners only
        when the write finds every owner reference stored already (no edge added); a
        hint that does not hold (a new owner, a new object) is checked as without it:
        a cycle is still refused, nothing written."""
        a = await client.apply(widget("a"))
        b = await client.apply(set_controller_reference(a, widget("b")))
        c = await client.apply(set_controller_reference(b, widget("c")))
        read = counted_reads(client, monkeypatch)
        resized = await client.apply(set_controller_reference(a, widget("b", size=2)), owners_stored=True)
        assert (resized.spec.size, read) == (2, [])
        with pytest.raises(OwnershipCycleError, match="ownership cycle"):
            await client.apply(set_controller_reference(c, widget("a", size=3)), owners_stored=True)
        assert "c" in read
        stored = await client.get("widget", "a")
        assert (stored.spec.size, stored.metadata.owner_references) == (1, ())
        made = await client.apply(set_controller_reference(a, widget("d")), owners_stored=True)
        assert [r.name for r in made.metadata.owner_references] == ["a"]

    async def test_an_owner_made_again_owns_nothing_of_the_old_ones(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """An owner deleted and applied again under its name is another object (another
        uid): the old one's children are collected all the same."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            client = runtime.client
            await family(client, children=5)
            await client.delete("widget", "owner")
            await client.apply(widget("owner"))

            async def collected() -> bool:
                return await names(client) == {"owner"}

            await until(collected)


def size_owner(children: Callable[[AnyResource], list[dict[str, Any]]]) -> Any:
    """A reconciler class that declares ``children(owner)`` on each pass."""

    class Owner:
        calls = 0

        def __init__(self, context: Context) -> None:
            self.context = context

        async def reconcile(self, request: Request) -> Result | None:
            Owner.calls += 1
            try:
                owner = await self.context.client.get(request.key)
            except Exception:  # noqa: BLE001 - deleted
                return None
            if owner.metadata.labels.get("role") != "owner" or owner.metadata.deletion_timestamp is not None:
                return None
            async with self.context.children(owner) as declared:
                for manifest in children(owner):
                    await declared.apply(manifest)
            return None

    return Owner


def pages(owner: AnyResource) -> list[dict[str, Any]]:
    """One child per unit of the owner's size, in the owner's colour."""
    return [
        {
            **widget(f"{owner.metadata.name}-{i}", labels={"role": "child"}),
            "spec": {"size": 1, "color": owner.spec.color},
        }
        for i in range(owner.spec.size)
    ]


class TestChildren:
    """A reconciler declaring its children each pass (context.children)."""

    async def test_declared_pruned_and_put_back(self, tmp_path: Path, clock: FakeClock) -> None:
        """Children are created with a controller reference; one no longer declared is
        deleted; one changed or deleted by hand requeues the owner and is put back."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            runtime.add_controller("widget", size_owner(pages), manager="site-controller", owns=["widget"])
            client = runtime.client
            await runtime.apply(widget("site", 3, labels={"role": "owner"}))

            async def three() -> bool:
                return await names(client) == {"site", "site-0", "site-1", "site-2"}

            await until(three)
            child = await client.get("widget", "site-1")
            assert [(r.name, r.controller) for r in child.metadata.owner_references] == [("site", True)]
            assert child.metadata.managed_fields["site-controller"] == (
                "labels/role",
                f"ownerReferences/{child.metadata.owner_references[0].uid}",
                "spec/color",
                "spec/size",
            )
            await runtime.apply(widget("site", 2, labels={"role": "owner"}))

            async def two() -> bool:
                return await names(client) == {"site", "site-0", "site-1"}

            await until(two)
            await client.patch("widget", "site-0", {"spec": {"color": "green"}}, manager="someone")

            async def put_back() -> bool:
                return (await client.get("widget", "site-0")).spec.color == "blue"

            await until(put_back)
            await client.delete("widget", "site-1", manager="someone")

            async def recreated() -> bool:
                return "site-1" in await names(client)

            await until(recreated)

    async def test_a_child_declared_as_before_is_not_applied_again(
        self, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A pass declaring a child exactly as the last one did, the child unchanged
        since, skips its apply (it would change nothing); a child whose spec someone
        else changed (a new generation) is applied again, and put back."""
        applied: list[str] = []
        real_apply = CachedClient.apply

        async def counting(self: CachedClient, manifest: Any, **options: Any) -> AnyResource:
            applied.append(manifest["metadata"]["name"])
            return await real_apply(self, manifest, **options)

        monkeypatch.setattr(CachedClient, "apply", counting)
        owner_class = size_owner(pages)
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            runtime.add_controller("widget", owner_class, manager="site-controller", owns=["widget"])
            client = runtime.client
            await runtime.apply(widget("site", 2, labels={"role": "owner"}))

            async def quiet() -> None:
                for turn in range(50):
                    await let_run(turn)
                for controller in runtime.controllers.values():
                    await asyncio.wait_for(controller.queue.wait_idle(), DEADLINE)

            async def two() -> bool:
                return await names(client) == {"site", "site-0", "site-1"}

            await until(two)
            await quiet()
            calls, before = owner_class.calls, len(applied)
            await client.patch(
                "widget", "site", {"metadata": {"annotations": {"touched": "1"}}}, manager="someone"
            )
            await quiet()
            assert owner_class.calls > calls
            assert applied[before:] == []  # declared as before, unchanged since: no apply
            await client.patch("widget", "site-0", {"spec": {"color": "green"}}, manager="someone")

            async def put_back() -> bool:
                return (await client.get("widget", "site-0")).spec.color == "blue"

            await until(put_back)
            assert applied[before:] == ["site-0"]
            # Declared as before for REAPPLY_SECONDS: applied again all the same (an
            # admission may read beyond the manifest, a File's source).
            await quiet()
            clock.advance(REAPPLY_SECONDS)
            before = len(applied)
            await client.patch(
                "widget", "site", {"metadata": {"annotations": {"touched": "2"}}}, manager="someone"
            )
            await quiet()
            assert sorted(applied[before:]) == ["site-0", "site-1"]

    async def test_a_child_put_back_reads_no_owner_from_the_store(
        self, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A child the controller applies again (changed by someone else) already names
        its owner: the apply's cycle check does not read the owner from the store."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            runtime.add_controller("widget", size_owner(pages), manager="site-controller", owns=["widget"])
            client = runtime.client
            await runtime.apply(widget("site", 2, labels={"role": "owner"}))

            async def two() -> bool:
                return await names(client) == {"site", "site-0", "site-1"}

            await until(two)
            read = counted_reads(client, monkeypatch)
            await client.patch("widget", "site-0", {"spec": {"color": "green"}}, manager="someone")

            async def put_back() -> bool:
                return (await client.get("widget", "site-0")).spec.color == "blue"

            await until(put_back)
            assert "site" not in read

    async def test_a_child_of_another_owner_is_refused_with_a_condition(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """A child another owner controls is not taken: the new owner's status says so
        (Synced=False, AlreadyOwned), and the child keeps its controller."""
        async with runtime_of(tmp_path / "state.db", clock) as runtime:
            client = runtime.client
            other = await client.apply(widget("other"))
            await client.apply(set_controller_reference(other, widget("site-0")))
            runtime.add_controller("widget", size_owner(pages), manager="site-controller", owns=["widget"])
            await runtime.apply(widget("site", 1, labels={"role": "owner"}))

            async def refused() -> bool:
                synced = (await client.get("widget", "site")).status.condition("Synced")
                return synced is not None and synced.reason == "AlreadyOwned"

            await until(refused)
            synced = (await client.get("widget", "site")).status.condition("Synced")
            assert synced is not None
            assert synced.status == ConditionStatus.FALSE
            assert "already controlled by Widget 'other'" in synced.message
            child = await client.get("widget", "site-0")
            assert [r.name for r in child.metadata.owner_references] == ["other"]
            await client.delete("widget", "other", propagation_policy="orphan")

            # The collector orphans the child first: a reconcile of the site that runs
            # before (its cache still names the other owner) is refused again and waits
            # for its backoff, on the fake clock, which this test does not move.
            async def orphaned() -> bool:
                return not (await client.get("widget", "site-0")).metadata.owner_references

            await until(orphaned)
            await runtime.apply(widget("site", 1, labels={"role": "owner", "again": "yes"}))

            async def taken() -> bool:
                synced = (await client.get("widget", "site")).status.condition("Synced")
                return synced is not None and synced.reason == "ReconcileSuccess"

            await until(taken)
            child = await client.get("widget", "site-0")
            assert [r.name for r in child.metadata.owner_references] == ["site"]


COLLECTOR_SCRIPT = """
import asyncio, sys
from reconcile import Runtime
from reconcile.controller import collecting
from reconcile.testing import example_kinds

deleting = collecting.GarbageCollector._delete

async def told(self, obj, owner, policy, gone=None):
    await deleting(self, obj, owner, policy, gone)
    print(obj.metadata.name, flush=True)

collecting.GarbageCollector._delete = told

async def main():
    async with Runtime(sys.argv[1], providers=[], kinds=example_kinds(), resync_period=None):
        await asyncio.Event().wait()

asyncio.run(main())
"""


def start_collector(script: Path, db: Path) -> subprocess.Popen[str]:
    """Run ``script`` (a Runtime with its collector) on ``db`` in a child process."""
    env = {**os.environ, "PYTHONPATH": checkout_path()}
    return subprocess.Popen(
        [sys.executable, str(script), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


class TestKilled:
    """A collector killed in the middle of a foreground deletion."""

    async def test_sigkill_then_restart_completes_the_deletion(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """SIGKILL after 50 of 200 children went: a restarted collector deletes the
        rest, then the owner; nothing is left, nothing deleted twice, the log verifies."""
        db = tmp_path / "state.db"
        async with connect(db, kinds=example_kinds(), clock=clock) as client:
            await family(client)
            await client.delete("widget", "owner", propagation_policy="foreground")
        script = tmp_path / "collector.py"
        script.write_text(COLLECTOR_SCRIPT)
        process = start_collector(script, db)
        try:
            assert process.stdout is not None
            told = [process.stdout.readline() for _ in range(50)]
            assert all(told), process.stderr.read() if process.stderr else ""
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
        async with connect(db, kinds=example_kinds(), clock=clock) as client:
            left = await names(client)
            assert "owner" in left
            assert 0 < len(left) - 1 < CHILDREN
        async with runtime_of(db, clock) as runtime:
            client = runtime.client

            async def all_gone() -> bool:
                return not await names(client)

            await until(all_gone)
            for i in range(CHILDREN):
                history = await client.history("widget", f"child-{i:03}")
                assert [e.type for e in history].count("Deleted") == 1
            report = await client.verify()
            assert report.ok, report.differences
