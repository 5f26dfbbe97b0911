"""What copying and checking a whole store hand around (part of the store contract,
:mod:`reconcile.store.contract`, which exports them too, beside the snapshot a copy
reads and the import it writes): ``verify``'s report, a projection row as stored, and a
store's header."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from reconcile.model.meta import ObjectKey

__all__ = ["ObjectRecord", "StoreHeader", "VerifyReport"]


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
