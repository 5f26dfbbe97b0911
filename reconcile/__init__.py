"""reconcile: keep external resources at their declared desired state, the way
Kubernetes controllers do, without Kubernetes.

Desired state is declared as resources; every change is an event appended to a durable
log (SQLite by default); reads are typed; history is kept::

    async with reconcile.connect("sqlite:///state.db") as client:
        await client.apply(manifest)

What ``import reconcile`` offers, by who needs it:

* **A service author** (stores and reads resources, embeds the engine): :func:`connect`
  and its :class:`Client` (:class:`ResourceList` from ``list``, :class:`Applied` from
  ``apply_many``); :class:`Runtime`, its :class:`RuntimeOptions`, the
  :class:`Convergence` of ``wait_converged`` and the :class:`Health` of ``health()``,
  :func:`discover_providers`; the objects: :class:`Resource`, :class:`ObjectMeta`,
  :class:`ObjectKey`, :class:`OwnerReference`, :class:`LabelSelector`, :class:`Status`,
  :class:`Condition`, :class:`ConditionStatus`; their history: :class:`Event`,
  :class:`EventType`, :class:`Bookmark`, :class:`FieldChange`; the kinds:
  :class:`Kind`, :class:`KindRegistry`, the :class:`KindVersion` of a kind served in
  several versions; manifests: :func:`load_manifests`,
  :func:`read_manifests`, each :class:`Document` they read.
* **An operator author** (a controller of one's own, hosted in the Runtime): the
  :class:`Reconciler` it implements, the :class:`Request` it gets and the :class:`Result`
  it returns, its :class:`Context`, the :class:`Children` it declares each pass and
  :func:`set_controller_reference`; the :class:`Operator` that declares kinds and
  controllers together; and, to declare a kind, :func:`doc_field`, its
  :class:`PrinterColumn` values, its admission hooks' :class:`AdmissionHook`,
  :class:`AdmissionRequest` and :class:`FailurePolicy` (and the :class:`AdmissionWarning`
  of a hook that broke and was ignored), and the :class:`AdmissionContext` of a
  provider kind's ``admit`` hook.
* **A provider author** (a plugin for one external system): the :class:`Provider` and
  the :class:`ExternalClient` it implements (or one per kind, as a :class:`PerKind`), the
  :class:`Behaviour` each kind declares (what the external system guarantees), the
  :class:`Observation` of ``observe``, the :class:`Created` of ``create``, the
  :class:`ManagedStatus` of its kinds, the :class:`Owned` of ``list_owned``, and
  :func:`ours`, the one ownership rule (with :class:`Kind`, :class:`Resource`,
  :func:`doc_field` and :class:`AdmissionContext`).
* **Errors** (from :mod:`reconcile.errors`, split by what the caller does next):
  :class:`ReconcileError` and every subclass, :class:`FieldError`, and the
  :class:`SpellingWarning` for a manifest in the old snake_case spelling, the
  :class:`VersionWarning` for a deprecated version of a kind.

Everything else lives in its subpackage: :mod:`reconcile.typing` is the one place for the
protocols (``Provider``, ``ExternalClient``, the optional ``Adopting``, ``StoreBound``
and ``ListingOwned``, ``Reconciler``, ``EventStore``, ``Clock``, ``Context``);
:mod:`reconcile.annotations` holds the annotations and the finalizer the engine reads and
writes on a managed resource; :mod:`reconcile.controller` the controller machinery
(``Controller``, ``WorkQueue``, ``Priority``, ``CachedClient``, ``Cache``, the
informer); :mod:`reconcile.store` the event log (``open_store``, ``SQLiteStore``,
``EventStore``, ``VerifyReport``, ``ListPage``, ``RawEvent``); :mod:`reconcile.testing`
fakes and the provider conformance kit.

The names above but the errors (a module of plain classes) are imported on first use
(PEP 562's module ``__getattr__``): ``import reconcile`` (and so ``import
reconcile.errors`` or any other submodule) stays cheap, and a program pays only for the
layers it touches -- the command line starts without loading the runtime it does not
need for ``get``. Type checkers and IDEs read the real imports in the ``TYPE_CHECKING``
block; ``_HOMES`` says where each name lives at run time, and a test checks that the two
agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconcile._exports import lazy_exports
from reconcile.errors import (
    AdmissionWarning,
    AlreadyExistsError,
    AlreadyOwnedError,
    ConflictError,
    ConversionError,
    CorruptError,
    DeadlineExceededError,
    ExpiredError,
    FencedError,
    FieldConflictError,
    FieldError,
    IncompleteListingError,
    InvalidError,
    LockedError,
    NotFoundError,
    NotOwnedError,
    OwnershipCycleError,
    PermanentError,
    ProviderLoadError,
    ReconcileError,
    SchemaVersionError,
    SpellingWarning,
    StoreError,
    StoreUnavailableError,
    TerminalError,
    TransientError,
    VersionWarning,
)

if TYPE_CHECKING:
    from reconcile.api import Applied, Client, ResourceList, connect, set_controller_reference
    from reconcile.controller import Children, Context, Reconciler, Request, Result
    from reconcile.model import (
        AdmissionContext,
        AdmissionHook,
        AdmissionRequest,
        Bookmark,
        Condition,
        ConditionStatus,
        Document,
        Event,
        EventType,
        FailurePolicy,
        FieldChange,
        Kind,
        KindRegistry,
        KindVersion,
        LabelSelector,
        ObjectKey,
        ObjectMeta,
        OwnerReference,
        PrinterColumn,
        Resource,
        Status,
        load_manifests,
        read_manifests,
    )
    from reconcile.model.discovery import discover_providers
    from reconcile.model.external import (
        Created,
        ExternalClient,
        ManagedStatus,
        Observation,
        Owned,
        PerKind,
        Provider,
        ours,
    )
    from reconcile.model.kinds import Behaviour, doc_field
    from reconcile.runtime import Convergence, Health, Operator, Runtime, RuntimeOptions

_HOMES: dict[str, str] = {
    "AdmissionContext": "reconcile.model",
    "AdmissionHook": "reconcile.model",
    "AdmissionRequest": "reconcile.model",
    "Applied": "reconcile.api",
    "Behaviour": "reconcile.model.kinds",
    "Bookmark": "reconcile.model",
    "Children": "reconcile.controller",
    "Client": "reconcile.api",
    "Condition": "reconcile.model",
    "ConditionStatus": "reconcile.model",
    "Context": "reconcile.controller",
    "Convergence": "reconcile.runtime",
    "Created": "reconcile.model.external",
    "Document": "reconcile.model",
    "Event": "reconcile.model",
    "EventType": "reconcile.model",
    "FailurePolicy": "reconcile.model",
    "ExternalClient": "reconcile.model.external",
    "FieldChange": "reconcile.model",
    "Health": "reconcile.runtime",
    "Kind": "reconcile.model",
    "KindRegistry": "reconcile.model",
    "KindVersion": "reconcile.model",
    "LabelSelector": "reconcile.model",
    "ManagedStatus": "reconcile.model.external",
    "ObjectKey": "reconcile.model",
    "ObjectMeta": "reconcile.model",
    "Observation": "reconcile.model.external",
    "Operator": "reconcile.runtime",
    "Owned": "reconcile.model.external",
    "OwnerReference": "reconcile.model",
    "PerKind": "reconcile.model.external",
    "PrinterColumn": "reconcile.model",
    "Provider": "reconcile.model.external",
    "Reconciler": "reconcile.controller",
    "Request": "reconcile.controller",
    "Resource": "reconcile.model",
    "ResourceList": "reconcile.api",
    "Result": "reconcile.controller",
    "Runtime": "reconcile.runtime",
    "RuntimeOptions": "reconcile.runtime",
    "Status": "reconcile.model",
    "connect": "reconcile.api",
    "discover_providers": "reconcile.model.discovery",
    "doc_field": "reconcile.model.kinds",
    "load_manifests": "reconcile.model",
    "ours": "reconcile.model.external",
    "read_manifests": "reconcile.model",
    "set_controller_reference": "reconcile.api",
}
"""Where each lazily imported name lives: the module imported on its first use."""

__all__ = [
    "AdmissionContext",
    "AdmissionHook",
    "AdmissionRequest",
    "AdmissionWarning",
    "AlreadyExistsError",
    "AlreadyOwnedError",
    "Applied",
    "Behaviour",
    "Bookmark",
    "Children",
    "Client",
    "Condition",
    "ConditionStatus",
    "ConflictError",
    "Context",
    "Convergence",
    "ConversionError",
    "CorruptError",
    "Created",
    "DeadlineExceededError",
    "Document",
    "Event",
    "EventType",
    "ExpiredError",
    "ExternalClient",
    "FailurePolicy",
    "FencedError",
    "FieldChange",
    "FieldConflictError",
    "FieldError",
    "Health",
    "IncompleteListingError",
    "InvalidError",
    "Kind",
    "KindRegistry",
    "KindVersion",
    "LabelSelector",
    "LockedError",
    "ManagedStatus",
    "NotFoundError",
    "NotOwnedError",
    "ObjectKey",
    "ObjectMeta",
    "Observation",
    "Operator",
    "Owned",
    "OwnerReference",
    "OwnershipCycleError",
    "PerKind",
    "PermanentError",
    "PrinterColumn",
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
    "SchemaVersionError",
    "SpellingWarning",
    "Status",
    "StoreError",
    "StoreUnavailableError",
    "TerminalError",
    "TransientError",
    "VersionWarning",
    "connect",
    "discover_providers",
    "doc_field",
    "load_manifests",
    "ours",
    "read_manifests",
    "set_controller_reference",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
