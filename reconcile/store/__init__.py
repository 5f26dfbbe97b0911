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
        ListPage,
        Mutation,
        Note,
        Put,
        RawEvent,
        Remove,
        StoredObject,
        StoreLocation,
        VerifyReport,
        WriteResult,
    )
    from reconcile.store.postgres.backend import PostgresStore
    from reconcile.store.sqlite.backend import SQLiteStore
    from reconcile.store.urls import locate_store, open_store

_HOMES: dict[str, str] = {
    "ADMISSION_HEADROOM": "reconcile.store.contract",
    "EventStore": "reconcile.store.contract",
    "ListPage": "reconcile.store.contract",
    "MAX_OBJECT_BYTES": "reconcile.store.contract",
    "Mutation": "reconcile.store.contract",
    "Note": "reconcile.store.contract",
    "PostgresStore": "reconcile.store.postgres.backend",
    "Put": "reconcile.store.contract",
    "RawEvent": "reconcile.store.contract",
    "Remove": "reconcile.store.contract",
    "SQLiteStore": "reconcile.store.sqlite.backend",
    "StoreLocation": "reconcile.store.contract",
    "StoredObject": "reconcile.store.contract",
    "VerifyReport": "reconcile.store.contract",
    "WriteResult": "reconcile.store.contract",
    "locate_store": "reconcile.store.urls",
    "open_store": "reconcile.store.urls",
}
"""Where each name lives: the module imported on its first use."""

__all__ = [
    "ADMISSION_HEADROOM",
    "MAX_OBJECT_BYTES",
    "EventStore",
    "ListPage",
    "Mutation",
    "Note",
    "PostgresStore",
    "Put",
    "RawEvent",
    "Remove",
    "SQLiteStore",
    "StoreLocation",
    "StoredObject",
    "VerifyReport",
    "WriteResult",
    "locate_store",
    "open_store",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
