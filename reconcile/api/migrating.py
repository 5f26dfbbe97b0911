"""Storage migration: rewrite a kind's current objects in its storage version.

Bodies the store wrote under another version of their kind (an older storage version,
or an older release's spelling) are read converted (:mod:`reconcile.api.decoding`), so
nothing needs migrating to work. Migrating makes the current objects plain again, as
Kubernetes' storage version migrator does for a CRD whose storage version moved: once
none is left in a version, that version's conversion is needed only to read history.

Each object not already in the storage version gets one event
(``StorageMigrated``), written by a mutation that looks at the object as it is at the
write (one changed meanwhile is migrated as it is then; one already migrated is left
alone): running it again writes nothing. The event log itself is never rewritten.
"""

from __future__ import annotations

import attrs

from reconcile.api.decoding import Decoder
from reconcile.api.reading import KindRef
from reconcile.errors import ConversionError
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.model.spelling import is_old_body
from reconcile.store.contract import EventStore, Put, StoredObject

__all__ = ["Migration", "migrate_storage"]

#: The field manager (the events' actor) of the rewrites.
MIGRATION_MANAGER = "migrate-storage"


@attrs.frozen
class Migration:
    """What a storage migration did."""

    #: The objects rewritten in the storage version, one event each.
    migrated: tuple[ObjectKey, ...] = ()
    #: The objects whose conversion failed (left as they are), with the error.
    failed: tuple[tuple[ObjectKey, ConversionError], ...] = ()
    #: How many objects were already in the storage version.
    current: int = 0


def _needs_migration(stored: StoredObject, api_version: str) -> bool:
    body = stored.body
    return is_old_body(body) or body.get("apiVersion") != api_version


async def migrate_storage(
    store: EventStore, decoder: Decoder, kind: KindRef, *, namespace: str | None = None
) -> Migration:
    """Rewrite every current object of ``kind`` (in ``namespace``, or every one) that
    is not in the kind's storage version, one ``StorageMigrated`` event each."""
    found = decoder.kinds.resolve(kind)
    page = await store.list(found.api_group, found.kind, namespace=namespace)
    migrated: list[ObjectKey] = []
    failed: list[tuple[ObjectKey, ConversionError]] = []
    current = 0
    for item in page.items:
        if not _needs_migration(item, found.api_version):
            current += 1
            continue
        try:
            # Checked before the write: the mutation must not raise inside the store's
            # transaction for a conversion the caller should hear about by name.
            decoder.resource(item.body)
        except ConversionError as exc:
            failed.append((item.key, exc))
            continue

        def rewrite(stored: StoredObject | None) -> Put | None:
            if stored is None or not _needs_migration(stored, found.api_version):
                return None  # deleted, or migrated meanwhile
            converted = decoder.current(stored)
            assert converted is not None
            if converted.body.get("apiVersion") != found.api_version:
                return None  # (its conversion failed since the check: left as it is)
            return Put(EventType.STORAGE_MIGRATED, dict(converted.body))

        result = await store.write(item.key, rewrite, actor=MIGRATION_MANAGER)
        if result.written:
            migrated.append(item.key)
    return Migration(tuple(migrated), tuple(failed), current)
