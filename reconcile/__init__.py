"""reconcile: keep external resources at their declared desired state, the way
Kubernetes controllers do, without Kubernetes.

Desired state is declared as resources; every change is an event appended to a durable
log (SQLite by default); reads are typed; history is kept::

    async with reconcile.connect("sqlite:///state.db") as client:
        await client.apply(manifest)

The names below are imported on first use (PEP 562's module ``__getattr__``): ``import
reconcile`` (and so ``import reconcile.errors`` or any other submodule) stays cheap, and
a program pays only for the layers it touches -- the command line starts without loading
the runtime it does not need for ``get``. Type checkers and IDEs read the real imports in
the ``TYPE_CHECKING`` block; ``_HOMES`` says where each name lives at run time, and a
test checks that the two agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconcile._exports import lazy_exports
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
    SpellingWarning,
    StoreError,
    TerminalError,
    TransientError,
)

if TYPE_CHECKING:
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
    from reconcile.model.external import (
        ANNOTATION_CREATE_PENDING,
        ANNOTATION_CREATE_SUCCEEDED,
        ANNOTATION_EXTERNAL_IDENTITY,
        ANNOTATION_MANAGEMENT_POLICY,
        Created,
        ExternalClient,
        ListingOwned,
        ManagedStatus,
        Observation,
        Owned,
        PerKind,
        Provider,
        StoreBound,
        ours,
    )
    from reconcile.model.kinds import Behaviour, doc_field
    from reconcile.runtime import Convergence, Runtime, RuntimeOptions
    from reconcile.store import SQLiteStore, VerifyReport, open_store

_HOMES: dict[str, str] = {
    "ANNOTATION_CREATE_PENDING": "reconcile.model.external",
    "ANNOTATION_CREATE_SUCCEEDED": "reconcile.model.external",
    "ANNOTATION_EXTERNAL_IDENTITY": "reconcile.model.external",
    "ANNOTATION_MANAGEMENT_POLICY": "reconcile.model.external",
    "AdmissionContext": "reconcile.model",
    "Behaviour": "reconcile.model.kinds",
    "Bookmark": "reconcile.model",
    "CachedClient": "reconcile.controller",
    "Client": "reconcile.api",
    "Condition": "reconcile.model",
    "ConditionStatus": "reconcile.model",
    "Context": "reconcile.controller",
    "Controller": "reconcile.controller",
    "Convergence": "reconcile.runtime",
    "Created": "reconcile.model.external",
    "Event": "reconcile.model",
    "EventType": "reconcile.model",
    "ExternalClient": "reconcile.model.external",
    "FieldChange": "reconcile.model",
    "Kind": "reconcile.model",
    "KindRegistry": "reconcile.model",
    "LabelSelector": "reconcile.model",
    "ListingOwned": "reconcile.model.external",
    "ManagedStatus": "reconcile.model.external",
    "ObjectKey": "reconcile.model",
    "ObjectMeta": "reconcile.model",
    "Observation": "reconcile.model.external",
    "Owned": "reconcile.model.external",
    "OwnerReference": "reconcile.model",
    "PerKind": "reconcile.model.external",
    "Priority": "reconcile.controller",
    "Provider": "reconcile.model.external",
    "Reconciler": "reconcile.controller",
    "Request": "reconcile.controller",
    "Resource": "reconcile.model",
    "ResourceList": "reconcile.api",
    "Result": "reconcile.controller",
    "Runtime": "reconcile.runtime",
    "RuntimeOptions": "reconcile.runtime",
    "SQLiteStore": "reconcile.store",
    "Status": "reconcile.model",
    "StoreBound": "reconcile.model.external",
    "VerifyReport": "reconcile.store",
    "WorkQueue": "reconcile.controller",
    "connect": "reconcile.api",
    "discover_providers": "reconcile.model.discovery",
    "doc_field": "reconcile.model.kinds",
    "load_manifests": "reconcile.model",
    "open_store": "reconcile.store",
    "ours": "reconcile.model.external",
    "read_manifests": "reconcile.model",
}
"""Where each lazily imported name lives: the module imported on its first use."""

__all__ = [
    "ANNOTATION_CREATE_PENDING",
    "ANNOTATION_CREATE_SUCCEEDED",
    "ANNOTATION_EXTERNAL_IDENTITY",
    "ANNOTATION_MANAGEMENT_POLICY",
    "AdmissionContext",
    "AlreadyExistsError",
    "Behaviour",
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
    "ListingOwned",
    "LockedError",
    "ManagedStatus",
    "NotFoundError",
    "NotOwnedError",
    "ObjectKey",
    "ObjectMeta",
    "Observation",
    "Owned",
    "OwnerReference",
    "PerKind",
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
    "SpellingWarning",
    "Status",
    "StoreBound",
    "StoreError",
    "TerminalError",
    "TransientError",
    "VerifyReport",
    "WorkQueue",
    "connect",
    "discover_providers",
    "doc_field",
    "load_manifests",
    "open_store",
    "ours",
    "read_manifests",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
