"""What copying and checking a whole store hand around (part of the store contract,
:mod:`reconcile.store.contract`, which exports them too): ``verify``'s report, a
projection row as stored, a store's header, and the snapshot a copy reads and the import
it writes (:meth:`~reconcile.store.contract.EventStore.snapshot`,
:meth:`~reconcile.store.contract.EventStore.importing`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from reconcile.model.meta import ObjectKey

if TYPE_CHECKING:
    from reconcile.store.contract import RawEvent

__all__ = ["Import", "ObjectRecord", "Snapshot", "StoreHeader", "VerifyReport"]


@attrs.frozen
class VerifyReport:
    """The result of rebuilding the projection from the log and comparing."""

    events: int
    objects: int
    differences: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when the projection equals the log's replay."""
        return not self.differences


@attrs.frozen
class ObjectRecord:
    """A row of the projection as stored, for copying a store: the key, its uid, the
    revision of the event holding its current snapshot, whether it is live (False: a
    tombstone, which keeps a deleted key's history reachable) and the external resource
    it declares (``Put.identity``)."""

    key: ObjectKey
    uid: str
    resource_version: int
    live: bool
    identity: str | None = None


@attrs.frozen
class StoreHeader:
    """What a whole store holds beside its events and its projection, and how many of
    each, read in one snapshot (:meth:`EventStore.snapshot`): the head revision, the
    compaction horizon, the identity, the secret mark key (never shown: not in the repr),
    the remembered settings, the number of events and of projection rows (tombstones
    included) and of those live."""

    revision: int
    horizon: int
    identity: str
    mark_key: bytes = attrs.field(repr=False)
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    events: int = 0
    objects: int = 0
    live: int = 0

    @property
    def empty(self) -> bool:
        """Nothing written yet: no event, no object, no setting, revision 0."""
        return not (self.revision or self.events or self.objects or self.settings)

    def holds(self) -> str:
        """What the store holds, in words (for a refusal that names it)."""
        parts = [
            f"{self.events:,} events up to revision {self.revision:,}",
            f"{self.live:,} live objects ({self.objects - self.live:,} deleted)",
        ]
        if self.settings:
            parts.append(f"remembered settings ({', '.join(sorted(self.settings))})")
        return ", ".join(parts)


class Snapshot(Protocol):
    """A whole store as of one instant, read for copying it (:meth:`EventStore.snapshot`):
    what commits after that instant is not in it. Rows stream in batches, so a store
    larger than memory can be copied."""

    @property
    def header(self) -> StoreHeader:
        """The head, horizon, identity, secret, settings and counts of the snapshot."""

    def objects(self, batch: int = 1000) -> AsyncIterator[Sequence[ObjectRecord]]:
        """Every projection row, tombstones included, in key order (api_group, kind,
        namespace, name, compared by code point), ``batch`` at a time."""

    def events(self, batch: int = 1000) -> AsyncIterator[Sequence[RawEvent]]:
        """Every retained event in revision order, ``batch`` at a time (bodies unparsed:
        :attr:`RawEvent.body_text`)."""


class Import(Protocol):
    """A copy being written into an empty store, in one transaction
    (:meth:`EventStore.importing`)."""

    async def objects(self, batch: Sequence[ObjectRecord]) -> None:
        """Add projection rows (every one before the events that name its key)."""

    async def events(self, batch: Sequence[RawEvent]) -> None:
        """Append events as they are, revision, time, actor, user and texts kept; each
        names a key whose projection row was added (StoreError otherwise)."""
