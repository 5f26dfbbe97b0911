"""The in-memory provider passes the conformance kit, for both identity models."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from reconcile import ExternalClient, Observation, Resource
from reconcile.model.external import ANNOTATION_EXTERNAL_NAME
from reconcile.testing import MemoryCloud, MemoryProvider
from reconcile.testing.conformance import (
    CHECKS,
    Harness,
    check_converges_and_second_pass_writes_nothing,
    check_create_refuses_a_foreign_resource,
)
from reconcile.testing.memory import Item, MemoryClient


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
