"""An in-memory provider whose fake external system misbehaves on request.

:class:`MemoryCloud` is the "external system": items keyed by id, each with a value, a
region and the owner marker it was created with. Tests make it slow (``latency``, spent
on the injected clock), flaky (``fail_next``), eventually consistent
(``visibility_delay``), and change it behind the engine's back (``tamper``, ``remove``,
``plant``). It counts every call, so a test can assert that a second reconcile wrote
nothing. With ``path`` it keeps its items in a JSON file, so it survives a process being
killed (for crash tests).

Two kinds exercise both identity models:

* ``Bucket`` (deterministic): the id is ``spec.name``, so an interrupted create can be
  retried safely.
* ``Note`` (not deterministic): the system picks the id at create time; the engine keeps
  it in the ``reconcile.dev/external-name`` annotation.
"""

from __future__ import annotations

import collections
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reconcile.controller.clocks import Clock, LoopClock
from reconcile.errors import NotOwnedError, PermanentError, TransientError
from reconcile.model.external import (
    ANNOTATION_EXTERNAL_NAME,
    Created,
    ExternalClient,
    ManagedStatus,
    Observation,
)
from reconcile.model.kinds import Behaviour, Kind
from reconcile.model.resource import AnyResource

__all__ = ["BUCKET", "NOTE", "BucketSpec", "MemoryCloud", "MemoryProvider", "NoteSpec"]


@attrs.frozen
class BucketSpec:
    """A named item with a value and a region."""

    name: str = attrs.field(validator=attrs.validators.min_len(1))
    value: str = ""
    region: str = "local"


@attrs.frozen
class NoteSpec:
    """An item whose id the external system chooses."""

    text: str = ""


BUCKET = Kind(
    "memory.reconcile.dev/v1", "Bucket", BucketSpec, ManagedStatus, behaviour=Behaviour.IDEMPOTENT_BY_NAME
)
NOTE = Kind("memory.reconcile.dev/v1", "Note", NoteSpec, ManagedStatus, behaviour=Behaviour.ASSIGNED_NAME)


@attrs.define
class Item:
    """One external item."""

    value: str
    region: str
    owner: str | None
    visible_at: float = 0.0


class MemoryCloud:
    """The fake external system."""

    def __init__(self, *, clock: Clock | None = None, path: str | Path | None = None) -> None:
        self.clock = clock or LoopClock()
        self.path = None if path is None else Path(path)
        self.items: dict[str, Item] = {}
        self.calls: collections.Counter[str] = collections.Counter()
        self.latency = 0.0
        self.visibility_delay = 0.0
        self.broken: dict[str, BaseException] = {}
        self._faults: dict[str, collections.deque[BaseException]] = collections.defaultdict(collections.deque)
        if self.path is not None and self.path.exists():
            raw = json.loads(self.path.read_text())
            self.items = {k: Item(**v) for k, v in raw.items()}

    # -- what tests do to it -----------------------------------------------------------------

    def fail_next(self, operation: str, *errors: BaseException) -> None:
        """Make the next calls of ``operation`` (observe/create/update/delete) raise these."""
        self._faults[operation].extend(errors)

    def break_item(self, item_id: str, error: BaseException) -> None:
        """Every create or update of ``item_id`` raises ``error`` (until repaired)."""
        self.broken[item_id] = error

    def tamper(self, item_id: str, value: str) -> None:
        """Change an item out of band (drift)."""
        self.items[item_id].value = value
        self._save()

    def remove(self, item_id: str) -> None:
        """Delete an item out of band."""
        del self.items[item_id]
        self._save()

    def plant(
        self, item_id: str, value: str = "", *, owner: str | None = None, region: str = "local"
    ) -> None:
        """Put an item there that the engine did not create."""
        self.items[item_id] = Item(value, region, owner)
        self._save()

    @property
    def writes(self) -> int:
        """Calls that change the system (create, update, delete)."""
        return self.calls["create"] + self.calls["update"] + self.calls["delete"]

    # -- what the client does ----------------------------------------------------------------

    async def enter(self, operation: str) -> None:
        """Count the call, spend the latency, raise an injected fault."""
        self.calls[operation] += 1
        if self.latency:
            await self.clock.sleep(self.latency)
        faults = self._faults.get(operation)
        if faults:
            raise faults.popleft()

    def visible(self, item_id: str) -> Item | None:
        """The item as observe may see it (eventual consistency hides new ones a while)."""
        item = self.items.get(item_id)
        if item is None or item.visible_at > self.clock.now():
            return None
        return item

    def put(self, item_id: str, item: Item) -> None:
        """Store an item."""
        self.items[item_id] = item
        self._save()

    def drop(self, item_id: str) -> None:
        """Delete an item if present."""
        self.items.pop(item_id, None)
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        temporary = self.path.with_suffix(".tmp")
        with temporary.open("w") as handle:
            json.dump({k: attrs.asdict(v) for k, v in self.items.items()}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(self.path)


class MemoryClient:
    """The provider's client for both kinds."""

    def __init__(self, cloud: MemoryCloud, *, knowing: bool = False) -> None:
        self.cloud = cloud
        #: Return the observation that holds after create, update and delete.
        self.knowing = knowing

    @staticmethod
    def _id(resource: AnyResource) -> str | None:
        if isinstance(resource.spec, BucketSpec):
            return resource.spec.name
        return resource.metadata.annotations.get(ANNOTATION_EXTERNAL_NAME)

    @staticmethod
    def _desired(resource: AnyResource) -> tuple[str, str]:
        spec = resource.spec
        if isinstance(spec, BucketSpec):
            return spec.value, spec.region
        return spec.text, "local"

    async def observe(self, resource: AnyResource) -> Observation:
        """Look the item up; compare value and region."""
        await self.cloud.enter("observe")
        item_id = self._id(resource)
        item = None if item_id is None else self.cloud.visible(item_id)
        if item is None:
            return Observation(exists=False)
        value, region = self._desired(resource)
        diffs = []
        if item.value != value:
            diffs.append(f"value: {item.value!r} -> {value!r}")
        if item.region != region:
            diffs.append(f"region: {item.region!r} -> {region!r}")
        observed = {"id": item_id, "value": item.value, "region": item.region}
        return Observation.present(diffs, observed=observed, owner=item.owner)

    def _known(self, resource: AnyResource, item_id: str) -> Observation | None:
        if not self.knowing:
            return None
        item = self.cloud.visible(item_id)
        if item is None:
            return None  # not visible yet: the engine observes until it is
        return Observation(
            exists=True,
            observed={"id": item_id, "value": item.value, "region": item.region},
            owner=resource.metadata.uid,
        )

    async def create(self, resource: AnyResource) -> str | Created | None:
        """Create the item, marked with the resource's uid; idempotent for our own."""
        await self.cloud.enter("create")
        item_id = self._id(resource) or f"note-{uuid.uuid4().hex[:12]}"
        if item_id in self.cloud.broken:
            raise self.cloud.broken[item_id]
        existing = self.cloud.items.get(item_id)
        if existing is not None:
            if existing.owner != resource.metadata.uid:
                raise NotOwnedError(f"{item_id} exists and belongs to someone else")
            return None
        value, region = self._desired(resource)
        visible_at = self.cloud.clock.now() + self.cloud.visibility_delay
        self.cloud.put(item_id, Item(value, region, resource.metadata.uid, visible_at))
        name = None if isinstance(resource.spec, BucketSpec) else item_id
        known = self._known(resource, item_id)
        return name if known is None else Created(name, known)

    async def update(self, resource: AnyResource, observation: Observation) -> Observation | None:  # noqa: ARG002
        """Set value and region."""
        await self.cloud.enter("update")
        item_id = self._id(resource)
        if item_id is None or item_id not in self.cloud.items:
            raise TransientError(f"{item_id} vanished during update")
        if item_id in self.cloud.broken:
            raise self.cloud.broken[item_id]
        item = self.cloud.items[item_id]
        if item.region != self._desired(resource)[1] and isinstance(resource.spec, BucketSpec):
            raise PermanentError("the region of a bucket cannot change; recreate it")
        item.value, item.region = self._desired(resource)
        self.cloud.put(item_id, item)
        return self._known(resource, item_id)

    async def delete(self, resource: AnyResource) -> Observation | None:
        """Delete the item; a missing one is fine."""
        await self.cloud.enter("delete")
        item_id = self._id(resource)
        if item_id is None:
            return None
        existing = self.cloud.items.get(item_id)
        if self.knowing and existing is not None and existing.owner != resource.metadata.uid:
            raise NotOwnedError(f"{item_id} belongs to someone else")
        self.cloud.drop(item_id)
        return Observation(exists=False) if self.knowing else None

    async def close(self) -> None:
        """Nothing to release."""


class MemoryProvider:
    """The provider: kinds Bucket and Note over one MemoryCloud."""

    name = "memory"

    def __init__(self, cloud: MemoryCloud | None = None, *, knowing: bool = False) -> None:
        self.cloud = cloud or MemoryCloud()
        self.connections = 0
        #: The client returns the observation after each write, and Bucket's create and
        #: delete are exclusive (the engine calls them without observing first) and its
        #: create atomic (no marker written before it).
        self.knowing = knowing

    @property
    def kinds(self) -> Sequence[Kind]:
        """Bucket and Note."""
        knowing = attrs.evolve(BUCKET, behaviour=Behaviour.EXCLUSIVE_MARKED_ON_CREATE)
        return (knowing if self.knowing else BUCKET, NOTE)

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """A client of the cloud."""
        self.connections += 1
        return MemoryClient(self.cloud, knowing=self.knowing)
