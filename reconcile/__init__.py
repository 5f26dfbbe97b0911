"""reconcile: keep external resources at their declared desired state, the way
Kubernetes controllers do, without Kubernetes.

Desired state is declared as resources; every change is an event appended to a durable
log (SQLite by default); reads are typed; history is kept::

    async with reconcile.connect("sqlite:///state.db") as client:
        await client.apply(manifest)
"""

from reconcile.api import Client, ResourceList, connect
from reconcile.errors import (
    AlreadyExistsError,
    ConflictError,
    ExpiredError,
    FieldError,
    InvalidError,
    NotFoundError,
    NotOwnedError,
    PermanentError,
    ReconcileError,
    SchemaVersionError,
    StoreError,
    TerminalError,
    TransientError,
)
from reconcile.model import (
    Bookmark,
    Condition,
    ConditionStatus,
    Event,
    EventType,
    FieldChange,
    Kind,
    KindRegistry,
    LabelSelector,
    ObjectKey,
    ObjectMeta,
    OwnerReference,
    Resource,
    Status,
    load_manifests,
    read_manifests,
)
from reconcile.store import SQLiteStore, VerifyReport, open_store

__all__ = [
    "AlreadyExistsError",
    "Bookmark",
    "Client",
    "Condition",
    "ConditionStatus",
    "ConflictError",
    "Event",
    "EventType",
    "ExpiredError",
    "FieldChange",
    "FieldError",
    "InvalidError",
    "Kind",
    "KindRegistry",
    "LabelSelector",
    "NotFoundError",
    "NotOwnedError",
    "ObjectKey",
    "ObjectMeta",
    "OwnerReference",
    "PermanentError",
    "ReconcileError",
    "Resource",
    "ResourceList",
    "SQLiteStore",
    "SchemaVersionError",
    "Status",
    "StoreError",
    "TerminalError",
    "TransientError",
    "VerifyReport",
    "connect",
    "load_manifests",
    "open_store",
    "read_manifests",
]
