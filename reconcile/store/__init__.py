"""The store layer: the append-only event log, its projection and its watch.

Backends implement :class:`~reconcile.store.contract.EventStore`; :func:`open_store`
picks one from a URL, and :func:`locate_store` gives what can be known of that store
without opening it (:class:`~reconcile.store.contract.StoreLocation`). SQLite is the
embedded default; PostgreSQL (``postgresql://`` URLs, :class:`PostgresStore`) is the
store several processes and machines share.

Its names are imported on first use (PEP 562), as :mod:`reconcile`'s are: a program that
needs one fact of the store (``reconcile version`` its schema versions) does not pay
for the backend and asyncio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconcile._exports import lazy_exports

if TYPE_CHECKING:
    from reconcile.store.contract import (
        ADMISSION_HEADROOM,
        MAX_OBJECT_BYTES,
        EventStore,
        Import,
        ListPage,
        Mutation,
        Note,
        ObjectRecord,
        Put,
        RawEvent,
        Remove,
        Snapshot,
        StoredObject,
        StoreHeader,
        StoreLocation,
        VerifyReport,
        WriteResult,
    )
    from reconcile.store.fencing import Fence, Leases, ShardLease, ShardTable, fenced, shard_of
    from reconcile.store.postgres.backend import PostgresStore
    from reconcile.store.sqlite.backend import SQLiteStore
    from reconcile.store.urls import locate_store, open_store

_HOMES: dict[str, str] = {
    "ADMISSION_HEADROOM": "reconcile.store.contract",
    "EventStore": "reconcile.store.contract",
    "Import": "reconcile.store.contract",
    "Fence": "reconcile.store.fencing",
    "Leases": "reconcile.store.fencing",
    "ListPage": "reconcile.store.contract",
    "MAX_OBJECT_BYTES": "reconcile.store.contract",
    "Mutation": "reconcile.store.contract",
    "Note": "reconcile.store.contract",
    "ObjectRecord": "reconcile.store.contract",
    "PostgresStore": "reconcile.store.postgres.backend",
    "Put": "reconcile.store.contract",
    "RawEvent": "reconcile.store.contract",
    "Remove": "reconcile.store.contract",
    "SQLiteStore": "reconcile.store.sqlite.backend",
    "Snapshot": "reconcile.store.contract",
    "StoreHeader": "reconcile.store.contract",
    "ShardLease": "reconcile.store.fencing",
    "ShardTable": "reconcile.store.fencing",
    "StoreLocation": "reconcile.store.contract",
    "StoredObject": "reconcile.store.contract",
    "VerifyReport": "reconcile.store.contract",
    "WriteResult": "reconcile.store.contract",
    "fenced": "reconcile.store.fencing",
    "locate_store": "reconcile.store.urls",
    "open_store": "reconcile.store.urls",
    "shard_of": "reconcile.store.fencing",
}
"""Where each name lives: the module imported on its first use."""

__all__ = [
    "ADMISSION_HEADROOM",
    "MAX_OBJECT_BYTES",
    "EventStore",
    "Fence",
    "Import",
    "Leases",
    "ListPage",
    "Mutation",
    "Note",
    "ObjectRecord",
    "PostgresStore",
    "Put",
    "RawEvent",
    "Remove",
    "SQLiteStore",
    "ShardLease",
    "ShardTable",
    "Snapshot",
    "StoreHeader",
    "StoreLocation",
    "StoredObject",
    "VerifyReport",
    "WriteResult",
    "fenced",
    "locate_store",
    "open_store",
    "shard_of",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
