"""reconcile: keep external resources at their declared desired state, the way
Kubernetes controllers do, without Kubernetes.

Desired state is declared as resources; every change is an event appended to a durable
log (SQLite by default); reads are typed; history is kept::

    async with reconcile.connect("sqlite:///state.db") as client:
        await client.apply(manifest)
"""

from reconcile.api import Client, ResourceList, connect
from reconcile.controller import (
    CachedClient,
    Context,
    Controller,
    Priority,
    Reconciler,
    Request,
    Result,
    WorkQueue,
)
from reconcile.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    DeadlineExceededError,
    ExpiredError,
    FieldError,
    InvalidError,
    LockedError,
    NotFoundError,
    NotOwnedError,
    PermanentError,
    ProviderLoadError,
    ReconcileError,
    SchemaVersionError,
    StoreError,
    TerminalError,
    TransientError,
)
from reconcile.model import (
    AdmissionContext,
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
from reconcile.model.discovery import discover_providers
from reconcile.model.external import Created, ExternalClient, ManagedStatus, Observation, Provider
from reconcile.runtime import Convergence, Runtime, RuntimeOptions
from reconcile.store import SQLiteStore, VerifyReport, open_store

__all__ = [
    "AdmissionContext",
    "AlreadyExistsError",
    "Bookmark",
    "CachedClient",
    "Client",
    "Condition",
    "ConditionStatus",
    "ConflictError",
    "Context",
    "Controller",
    "Convergence",
    "CorruptError",
    "Created",
    "DeadlineExceededError",
    "Event",
    "EventType",
    "ExpiredError",
    "ExternalClient",
    "FieldChange",
    "FieldError",
    "InvalidError",
    "Kind",
    "KindRegistry",
    "LabelSelector",
    "LockedError",
    "ManagedStatus",
    "NotFoundError",
    "NotOwnedError",
    "ObjectKey",
    "ObjectMeta",
    "Observation",
    "OwnerReference",
    "PermanentError",
    "Priority",
    "Provider",
    "ProviderLoadError",
    "ReconcileError",
    "Reconciler",
    "Request",
    "Resource",
    "ResourceList",
    "Result",
    "Runtime",
    "RuntimeOptions",
    "SQLiteStore",
    "SchemaVersionError",
    "Status",
    "StoreError",
    "TerminalError",
    "TransientError",
    "VerifyReport",
    "WorkQueue",
    "connect",
    "discover_providers",
    "load_manifests",
    "open_store",
    "read_manifests",
]
