"""The in-memory provider passes the conformance kit, for both identity models."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from reconcile import (
    Created,
    ExternalClient,
    Kind,
    Observation,
    Owned,
    PerKind,
    Resource,
    Runtime,
)
from reconcile.errors import PermanentError
from reconcile.model.external import ANNOTATION_ADOPT, ANNOTATION_EXTERNAL_NAME, bind_store, client_of
from reconcile.testing import BUCKET, MemoryCloud, MemoryProvider
from reconcile.testing.conformance import (
    CHECKS,
    Harness,
    check_converges_and_second_pass_writes_nothing,
    check_create_refuses_a_foreign_resource,
)
from reconcile.testing.memory import NOTE, BucketSpec, Item, MemoryClient
from reconcile.typing import ListingOwned


class MemoryOutside:
    """Reaches into the MemoryCloud directly."""

    def __init__(self, cloud: MemoryCloud) -> None:
        self.cloud = cloud

    @staticmethod
    def _id(resource: Resource[Any, Any]) -> str | None:
        name = getattr(resource.spec, "name", None)
        return name or resource.metadata.annotations.get(ANNOTATION_EXTERNAL_NAME)

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the item is there."""
        item_id = self._id(resource)
        if item_id is None:
            return any(item.owner == resource.metadata.uid for item in self.cloud.items.values())
        return item_id in self.cloud.items

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """Remove the item."""
        item_id = self._id(resource)
        assert item_id is not None
        self.cloud.remove(item_id)

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """Change the item's value."""
        item_id = self._id(resource)
        assert item_id is not None
        self.cloud.tamper(item_id, "changed by hand")

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """An item at the bucket's name, created by someone else."""
        self.cloud.plant(manifest["spec"]["name"], "theirs", owner="someone-else")

    async def count(self) -> int:
        """How many items exist."""
        return len(self.cloud.items)


def bucket(name: str) -> dict[str, Any]:
    """A Bucket manifest (deterministic identity)."""
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"name": name, "value": "v"},
    }


def note(name: str) -> dict[str, Any]:
    """A Note manifest (the system chooses the id)."""
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Note",
        "metadata": {"name": name},
        "spec": {"text": name},
    }


# A Note's identity is chosen at create time, so nothing can pre-exist at it: the
# not-ours checks do not apply to that identity model.
_FOREIGN = {
    "check_not_ours_is_never_touched",
    "check_create_refuses_a_foreign_resource",
    "check_delete_refuses_a_foreign_resource",
}
CASES = [(check, "bucket") for check in CHECKS] + [
    (check, "note") for check in CHECKS if check.__name__ not in _FOREIGN
]


def harness(kind: str, tmp_path: Path, provider_type: type[MemoryProvider] = MemoryProvider) -> Harness:
    """A harness over a fresh cloud on the harness's fake clock."""
    cloud = MemoryCloud()
    made = Harness(
        provider_type(cloud),
        MemoryOutside(cloud),
        bucket if kind == "bucket" else note,
        tmp_path / "state.db",
    )
    cloud.clock = made.clock
    return made


@pytest.mark.parametrize(("check", "kind"), CASES, ids=lambda value: getattr(value, "__name__", value))
async def test_memory_provider_conformance(
    check: Callable[[Harness], Awaitable[None]], kind: str, tmp_path: Path
) -> None:
    """Each conformance check passes for the memory provider."""
    await check(harness(kind, tmp_path))


class AlwaysStaleClient(MemoryClient):
    """A faulty client: observe never says up to date, so every poll updates."""

    async def observe(self, resource: Resource[Any, Any]) -> Observation:
        """Report drift that is not there."""
        return attrs.evolve(await super().observe(resource), up_to_date=False, diff="imagined")


class AlwaysStaleProvider(MemoryProvider):
    """A provider built on the faulty client."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The faulty client."""
        return AlwaysStaleClient(self.cloud)


async def test_the_kit_catches_a_faulty_provider(tmp_path: Path) -> None:
    """A provider whose observe is wrong fails the no-write-on-second-pass check."""
    with pytest.raises(AssertionError, match="did not hold within"):
        await check_converges_and_second_pass_writes_nothing(harness("bucket", tmp_path, AlwaysStaleProvider))


class OverwritingClient(MemoryClient):
    """A faulty client: create takes over whatever is at the name, foreign or not."""

    async def create(self, resource: Resource[Any, Any]) -> str | None:
        """Overwrite and mark as ours."""
        value, region = self._desired(resource)
        self.cloud.put(resource.spec.name, Item(value, region, resource.metadata.uid, self.cloud.clock.now()))
        return None


class OverwritingProvider(MemoryProvider):
    """A provider built on the overwriting client."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The faulty client."""
        return OverwritingClient(self.cloud)


async def test_the_kit_catches_a_create_that_takes_over_a_foreign_resource(tmp_path: Path) -> None:
    """The engine's observe would protect such a provider; the kit's direct call does not
    let it pass."""
    with pytest.raises(AssertionError, match="did not raise NotOwnedError"):
        await check_create_refuses_a_foreign_resource(harness("bucket", tmp_path, OverwritingProvider))


# -- one client per kind ---------------------------------------------------------------------


class OneKindClient(MemoryClient):
    """A memory client that serves one kind only (and says so when asked for another)."""

    def __init__(self, cloud: MemoryCloud, kind: str, *, knowing: bool = False) -> None:
        super().__init__(cloud, knowing=knowing)
        self.kind = kind
        self.closed = 0
        self.bound: list[str] = []

    def _mine(self, resource: Resource[Any, Any]) -> None:
        assert resource.kind == self.kind, f"the {self.kind} client was asked about a {resource.kind}"

    async def observe(self, resource: Resource[Any, Any]) -> Observation:
        """Only its kind's."""
        self._mine(resource)
        return await super().observe(resource)

    async def create(self, resource: Resource[Any, Any]) -> str | Created | None:
        """Only its kind's."""
        self._mine(resource)
        return await super().create(resource)

    async def update(self, resource: Resource[Any, Any], observation: Observation) -> Observation | None:
        """Only its kind's."""
        self._mine(resource)
        return await super().update(resource, observation)

    async def delete(self, resource: Resource[Any, Any]) -> Observation | None:
        """Only its kind's."""
        self._mine(resource)
        return await super().delete(resource)

    def bind_store(self, identity: str) -> None:
        """Keeps the identity (a client written before the store's key)."""
        self.bound.append(identity)

    async def close(self) -> None:
        """Counted."""
        self.closed += 1


class AdoptingBucketClient(OneKindClient):
    """The Bucket kind's client, which can also take over a bucket and list what it made."""

    async def adopt(self, resource: Resource[Any, Any]) -> None:
        """Mark the item ours."""
        item = self.cloud.items[resource.spec.name]
        self.cloud.put(resource.spec.name, attrs.evolve(item, owner=resource.metadata.uid))

    async def list_owned(self, kind: Kind) -> list[Owned]:  # noqa: ARG002
        """Every item (the memory cloud has no store marks)."""
        return [Owned(item.owner, item_id) for item_id, item in self.cloud.items.items()]

    async def delete_owned(self, kind: Kind, owned: Owned) -> None:  # noqa: ARG002
        """Drop it."""
        self.cloud.drop(owned.external)


class PerKindProvider(MemoryProvider):
    """The memory provider with one client per kind."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """A Bucket client and a Note client, as one PerKind."""
        bucket_kind, note_kind = self.kinds
        return PerKind(
            {
                bucket_kind: OneKindClient(self.cloud, "Bucket", knowing=self.knowing),
                note_kind: OneKindClient(self.cloud, "Note", knowing=self.knowing),
            }
        )


@pytest.mark.parametrize(("check", "kind"), CASES, ids=lambda value: getattr(value, "__name__", value))
async def test_a_provider_with_one_client_per_kind_conforms(
    check: Callable[[Harness], Awaitable[None]], kind: str, tmp_path: Path
) -> None:
    """Every call reaches the client of the resource's kind (its client asserts it), and
    the kit passes as for one client."""
    await check(harness(kind, tmp_path, PerKindProvider))


async def test_per_kind_clients_are_bound_and_closed_once_and_keep_their_abilities() -> None:
    """``bind_store`` and ``close`` reach each client once (one serving two kinds too);
    the optional abilities are each kind's client's own (:func:`client_of`); a kind with
    no client is a PermanentError naming it."""
    cloud = MemoryCloud()
    buckets, notes = AdoptingBucketClient(cloud, "Bucket"), OneKindClient(cloud, "Note")
    clients = PerKind({BUCKET: buckets, NOTE: notes})
    assert not hasattr(clients, "adopt")
    assert client_of(clients, BUCKET) is buckets
    assert isinstance(client_of(clients, BUCKET), ListingOwned)
    assert not isinstance(client_of(clients, NOTE), ListingOwned)
    assert client_of(notes, NOTE) is notes  # (one client for every kind: itself)
    bind_store(clients, "store-1", b"key")
    await clients.close()
    assert (buckets.bound, notes.bound, buckets.closed, notes.closed) == (["store-1"], ["store-1"], 1, 1)

    shared = PerKind({BUCKET: notes, NOTE: notes})
    await shared.close()
    assert notes.closed == 2
    widget = Kind("x.example.dev/v1", "Widget", BucketSpec)
    with pytest.raises(PermanentError, match=r"no client for kind Widget of x\.example\.dev/v1"):
        client_of(clients, widget)


class FailingClose(OneKindClient):
    """A client whose close fails."""

    async def close(self) -> None:
        """Fails (after counting)."""
        await super().close()
        raise RuntimeError("cannot close")


async def test_per_kind_close_closes_every_client_when_one_fails() -> None:
    """One client's failed close does not leave the others open; it is raised after."""
    cloud = MemoryCloud()
    failing, notes = FailingClose(cloud, "Bucket"), OneKindClient(cloud, "Note")
    with pytest.raises(RuntimeError, match="cannot close"):
        await PerKind({BUCKET: failing, NOTE: notes}).close()
    assert (failing.closed, notes.closed) == (1, 1)


class AdoptingPerKindProvider(MemoryProvider):
    """One client per kind, the Bucket's able to adopt."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The adopting Bucket client and a Note client."""
        return PerKind(
            {BUCKET: AdoptingBucketClient(self.cloud, "Bucket"), NOTE: OneKindClient(self.cloud, "Note")}
        )


async def test_the_engine_adopts_through_the_kinds_own_client(tmp_path: Path) -> None:
    """``reconcile.dev/adopt`` on a Bucket: the engine finds ``adopt`` on the Bucket's
    client (the PerKind itself has none) and takes the foreign bucket over."""
    h = harness("bucket", tmp_path, AdoptingPerKindProvider)
    manifest = bucket("taken")
    manifest["metadata"]["annotations"] = {ANNOTATION_ADOPT: "true"}
    await h.outside.plant_foreign(manifest)
    # (Not h.running(): its counting client wraps the provider's, and has no adopt.)
    runtime = Runtime(h.store, providers=[h.provider], clock=h.clock, wall_clock=h.clock, resync_period=None)
    async with runtime:
        await runtime.wait_synced()
        h.runtime = runtime
        await runtime.apply(manifest)
        obj = await h.ready("taken", manifest)
        assert ANNOTATION_ADOPT not in obj.metadata.annotations
        history = [event.type for event in await runtime.client.history("Bucket", "taken")]
        assert "Adopted" in history
        assert h.provider.cloud.items["taken"].owner == obj.metadata.uid  # type: ignore[attr-defined]
