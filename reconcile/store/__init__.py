"""The store layer: the append-only event log, its projection and its watch.

Backends implement :class:`~reconcile.store.contract.EventStore`; :func:`open_store`
picks one from a URL. SQLite is the embedded default.
"""

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
    VerifyReport,
    WriteResult,
)
from reconcile.store.sqlite.backend import SQLiteStore
from reconcile.store.urls import open_store

__all__ = [
    "ADMISSION_HEADROOM",
    "MAX_OBJECT_BYTES",
    "EventStore",
    "ListPage",
    "Mutation",
    "Note",
    "Put",
    "RawEvent",
    "Remove",
    "SQLiteStore",
    "StoredObject",
    "VerifyReport",
    "WriteResult",
    "open_store",
]
