"""Providers that know what holds after their writes, and kinds whose create is exclusive:
the engine records the returned observation instead of observing again, creates a
never-reconciled resource without looking first, and the conformance kit holds both to
the truth (a returned observation must agree with a real observe)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import settle
from test_conformance import MemoryOutside, bucket, note
from test_managed import DEADLINE, POLL, idle, resync_passes

from reconcile import Behaviour, Created, ExternalClient, Kind, ManagedStatus, Observation, Resource, Runtime
from reconcile.model.events import ActionType
from reconcile.testing import FakeClock, MemoryCloud, MemoryProvider
from reconcile.testing.conformance import (
    CHECKS,
    Harness,
    check_converges_and_second_pass_writes_nothing,
    check_create_marks_in_the_same_step,
)
from reconcile.testing.memory import BucketSpec, Item, MemoryClient

_FOREIGN = {
    "check_not_ours_is_never_touched",
    "check_create_refuses_a_foreign_resource",
    "check_delete_refuses_a_foreign_resource",
}


def knowing_harness(
    kind: str, tmp_path: Path, provider_type: type[MemoryProvider] = MemoryProvider
) -> Harness:
    """A harness over a fresh cloud, the provider in its knowing mode."""
    cloud = MemoryCloud()
    made = Harness(
        provider_type(cloud, knowing=True),
        MemoryOutside(cloud),
        bucket if kind == "bucket" else note,
        tmp_path / "state.db",
    )
    cloud.clock = made.clock
    return made


@pytest.mark.parametrize(
    ("check", "kind"),
    [(check, "bucket") for check in CHECKS]
    + [(check, "note") for check in CHECKS if check.__name__ not in _FOREIGN],
    ids=lambda value: getattr(value, "__name__", value),
)
async def test_a_knowing_provider_passes_the_kit(
    check: Callable[[Harness], Awaitable[None]], kind: str, tmp_path: Path
) -> None:
    """Every check passes with returned observations and an exclusive create."""
    await check(knowing_harness(kind, tmp_path))


class LyingClient(MemoryClient):
    """A faulty client: create writes a value other than the spec's and says it is up to date."""

    async def create(self, resource: Resource[Any, Any]) -> str | Created | None:
        """Write the wrong value; claim the right one."""
        await self.cloud.enter("create")
        _, region = self._desired(resource)
        self.cloud.put(resource.spec.name, Item("wrong", region, resource.metadata.uid))
        return Created(observation=Observation(exists=True, owner=resource.metadata.uid))


class LyingProvider(MemoryProvider):
    """A provider built on the lying client."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The lying client."""
        return LyingClient(self.cloud, knowing=True)


async def test_the_kit_catches_a_returned_observation_that_lies(tmp_path: Path) -> None:
    """A create that says "up to date" when observe says otherwise fails the kit, naming it."""
    with pytest.raises(AssertionError, match=r"create of .* returned \(exists, up_to_date, owner\)"):
        await check_converges_and_second_pass_writes_nothing(
            knowing_harness("bucket", tmp_path, LyingProvider)
        )


class MarkLaterClient(MemoryClient):
    """A client whose create makes the item unmarked (its mark would follow in a second
    step), under a kind declared marked on create: a broken promise."""

    async def create(self, resource: Resource[Any, Any]) -> str | Created | None:
        """Make it, unmarked."""
        await self.cloud.enter("create")
        value, region = self._desired(resource)
        self.cloud.put(resource.spec.name, Item(value, region, None))
        return None


class MarkLaterProvider(MemoryProvider):
    """The knowing provider (its Bucket EXCLUSIVE_MARKED_ON_CREATE) on that client."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The promise-breaking client."""
        return MarkLaterClient(self.cloud, knowing=self.knowing)


async def test_the_kit_catches_a_kind_marked_on_create_whose_create_does_not_mark(tmp_path: Path) -> None:
    """A kind declared marked on create whose create leaves the mark for later fails the
    kit, naming the behaviours it could declare instead."""
    with pytest.raises(AssertionError, match="the mark must come with the create"):
        await check_create_marks_in_the_same_step(knowing_harness("bucket", tmp_path, MarkLaterProvider))


#: Each behaviour, and the four flags of earlier releases it stands for.
BEHAVIOUR_FLAGS = {
    Behaviour.ASSIGNED_NAME: {},
    Behaviour.IDEMPOTENT_BY_NAME: {"deterministic_identity": True},
    Behaviour.MARKED_ON_CREATE: {"deterministic_identity": True, "atomic_create": True},
    Behaviour.EXCLUSIVE: {"deterministic_identity": True, "exclusive_create": True, "exclusive_delete": True},
    Behaviour.EXCLUSIVE_MARKED_ON_CREATE: {
        "deterministic_identity": True,
        "exclusive_create": True,
        "exclusive_delete": True,
        "atomic_create": True,
    },
}
FLAGS = ("deterministic_identity", "exclusive_create", "exclusive_delete", "atomic_create")


@pytest.mark.parametrize("behaviour", list(Behaviour), ids=lambda b: b.name)
def test_a_behaviour_is_the_flags_it_promises(behaviour: Behaviour) -> None:
    """A kind declares one behaviour; the engine's flags are read from it."""
    kind = Kind("x.example.dev/v1", "Thing", BucketSpec, ManagedStatus, behaviour=behaviour)
    wanted = BEHAVIOUR_FLAGS[behaviour]
    assert {flag: getattr(kind, flag) for flag in FLAGS} == {flag: wanted.get(flag, False) for flag in FLAGS}
    assert {flag: getattr(behaviour, flag) for flag in FLAGS} == {flag: getattr(kind, flag) for flag in FLAGS}
    assert behaviour.promise


@pytest.mark.parametrize("behaviour", list(Behaviour), ids=lambda b: b.name)
def test_the_old_flags_still_declare_their_behaviour_with_one_warning(behaviour: Behaviour) -> None:
    """A third-party provider's ``Kind(deterministic_identity=True, ...)`` still works for
    this release: mapped onto its behaviour, one DeprecationWarning naming it."""
    flags = BEHAVIOUR_FLAGS[behaviour] or {"deterministic_identity": False}
    with pytest.warns(DeprecationWarning, match="is deprecated") as warned:
        kind = Kind("x.example.dev/v1", "Thing", BucketSpec, ManagedStatus, **flags)
    assert len(warned) == 1
    assert f"behaviour=Behaviour.{behaviour.name}" in str(warned[0].message)
    assert warned[0].filename == __file__  # (the provider's line, not reconcile's)
    assert kind.behaviour is behaviour
    assert kind == Kind("x.example.dev/v1", "Thing", BucketSpec, ManagedStatus, behaviour=behaviour)
    assert attrs.evolve(kind, short_names=("th",)).behaviour is behaviour  # (no warning again)


def test_an_old_flag_changes_the_behaviour_it_is_evolved_from() -> None:
    """``attrs.evolve(kind, exclusive_create=True, exclusive_delete=True)``, as earlier
    releases allowed, keeps the flags the kind had (its deterministic identity)."""
    kind = Kind("x.example.dev/v1", "Thing", BucketSpec, ManagedStatus, behaviour=Behaviour.MARKED_ON_CREATE)
    with pytest.warns(DeprecationWarning, match="EXCLUSIVE_MARKED_ON_CREATE"):
        evolved = attrs.evolve(kind, exclusive_create=True, exclusive_delete=True)
    assert evolved.behaviour is Behaviour.EXCLUSIVE_MARKED_ON_CREATE


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        ({"exclusive_create": True}, "exclusive_create needs deterministic_identity"),
        ({"atomic_create": True}, "atomic_create needs deterministic_identity"),
        (
            {"deterministic_identity": True, "exclusive_create": True},
            "exclusive_create without exclusive_delete is no behaviour",
        ),
        (
            {"deterministic_identity": True, "exclusive_delete": True, "atomic_create": True},
            "exclusive_delete without exclusive_create is no behaviour",
        ),
    ],
)
def test_old_flags_that_make_no_behaviour_are_refused(flags: dict[str, bool], reason: str) -> None:
    """A combination no behaviour is (and none it could safely be taken for) is refused,
    saying which behaviours there are; nothing is warned of a kind that is not made."""
    with pytest.raises(ValueError, match=reason) as refused:
        Kind("x.example.dev/v1", "Thing", BucketSpec, ManagedStatus, **flags)
    assert "behaviour=Behaviour.EXCLUSIVE" in str(refused.value) or "needs" in str(refused.value)


@contextlib.asynccontextmanager
async def knowing(db: Path, cloud: MemoryCloud, clock: FakeClock, **options: Any) -> AsyncIterator[Runtime]:
    """A Runtime over the knowing memory provider, on the fake clock."""
    runtime = Runtime(
        db,
        providers=[MemoryProvider(cloud, knowing=True)],
        clock=clock,
        wall_clock=clock,
        poll_interval=POLL,
        **options,
    )
    async with runtime:
        await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
        yield runtime


@pytest.fixture
def cloud(clock: FakeClock) -> MemoryCloud:
    """The fake external system."""
    return MemoryCloud(clock=clock)


def manifest(name: str, value: str = "v") -> dict[str, Any]:
    """A Bucket with ``value``."""
    return {**bucket(name), "spec": {"name": name, "value": value}}


async def test_a_create_is_one_call_and_two_writes(
    db_path: Path, cloud: MemoryCloud, clock: FakeClock
) -> None:
    """A never-reconciled bucket is created without observing first, and its status comes
    from what create returned: one provider call, and (the create being atomic) one write
    after the apply's, with the request, the outcome and the status."""
    async with knowing(db_path, cloud, clock, resync_period=None) as runtime:
        await runtime.apply(manifest("b", "one"))
        obj = await asyncio.wait_for(runtime.wait_ready("bucket", "b"), DEADLINE)
        events = await runtime.client.history("bucket", "b")
        types = [e.type for e in events]
    assert dict(cloud.calls) == {"create": 1}
    assert obj.status.at_provider == {"id": "b", "value": "one", "region": "local"}
    assert types == ["Created", "CreateRequested", "CreateSucceeded", "StatusChanged"]


async def test_update_and_delete_record_what_they_returned(
    db_path: Path, cloud: MemoryCloud, clock: FakeClock
) -> None:
    """Drift repaired and a delete finished without a second look: the poll's observe is
    the only one (the update's outcome is what it returned; the delete, exclusive, is
    made without a look and says it is gone)."""
    async with knowing(db_path, cloud, clock, resync_period=None) as runtime:
        await runtime.apply(manifest("b"))
        await asyncio.wait_for(runtime.wait_ready("bucket", "b"), DEADLINE)
        cloud.tamper("b", "by hand")
        clock.advance(POLL * 1.2)
        await settle(lambda: cloud.calls["update"] == 1)
        await idle(runtime)
        assert (cloud.calls["observe"], cloud.items["b"].value) == (1, "v")
        ready = (await runtime.client.get("bucket", "b")).status.condition("Ready")
        assert ready is not None
        assert ready.status.value == "True"
        store = runtime.client.store
        write, writes = store.write, []

        async def counted(*args: Any, **kwargs: Any) -> Any:
            writes.append(args[0])
            return await write(*args, **kwargs)

        store.write = counted  # type: ignore[method-assign]
        await runtime.client.delete("bucket", "b")
        await settle(lambda: not runtime.controllers["bucket.memory.reconcile.dev"].informer.cached_keys())
        history = [e.type for e in await runtime.client.history("bucket", "b")]
    assert (cloud.calls["observe"], cloud.calls["delete"]) == (1, 1)
    assert "b" not in cloud.items
    # The user's delete, then one write: the request, the outcome and the object's removal.
    assert len(writes) == 2
    assert history[-4:] == ["DeletionRequested", "DeleteRequested", "DeleteSucceeded", "Deleted"]


async def test_a_refused_create_is_a_finding_recorded_once(
    db_path: Path, cloud: MemoryCloud, clock: FakeClock
) -> None:
    """Somebody else's item at the name: the create (made without looking) refuses it, the
    item is untouched, NotOwned is in status and history once, and later passes only
    observe (the object was reconciled: no second blind create) and append nothing."""
    cloud.plant("b", "theirs", owner="someone-else")
    async with knowing(db_path, cloud, clock, resync_period=600) as runtime:
        await runtime.apply(manifest("b", "mine"))

        def refused() -> bool:
            return cloud.calls["create"] == 1

        await settle(refused)
        await idle(runtime)
        obj = await runtime.client.get("bucket", "b")
        synced = obj.status.condition("Synced")
        assert synced is not None
        assert synced.reason == "NotOwned"
        assert "marked someone-else" in synced.message
        revision = await runtime.client.revision()
        await resync_passes(runtime, cloud, clock)
        history = [e.type for e in await runtime.client.history("bucket", "b")]
        # The first observe (after the blind create) puts what it saw in status: one write.
        assert await runtime.client.revision() <= revision + 1
    assert history.count(ActionType.NOT_OWNED) == 1
    assert cloud.calls["create"] == 1
    assert (cloud.items["b"].value, cloud.items["b"].owner) == ("theirs", "someone-else")


def test_an_observation_of_a_present_resource_from_its_differences() -> None:
    """``Observation.present``: exists, up to date unless a difference is named, the
    differences joined into the diff."""
    assert Observation.present() == Observation(exists=True, up_to_date=True)
    seen = Observation.present(["a -> b", "tags: +x"], observed={"k": 1}, owner="uid-1", identity="i")
    assert seen == Observation(
        exists=True, up_to_date=False, observed={"k": 1}, diff="a -> b; tags: +x", owner="uid-1", identity="i"
    )
    assert Observation.present(iter(["one", "two"]), separator="\n").diff == "one\ntwo"
