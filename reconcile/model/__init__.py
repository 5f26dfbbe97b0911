"""The model layer: resources, metadata, conditions, events, kinds, manifests, serde.

Its names are imported on first use (PEP 562), as :mod:`reconcile`'s are: listing the
installed kinds needs neither the manifest reader (yaml) nor the converter (cattrs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconcile._exports import lazy_exports

if TYPE_CHECKING:
    from reconcile.model.columns import PrinterColumn
    from reconcile.model.conditions import Condition, ConditionStatus, Status
    from reconcile.model.events import Bookmark, Event, EventType, FieldChange, diff_objects
    from reconcile.model.hooks import AdmissionHook, AdmissionRequest, FailurePolicy
    from reconcile.model.kinds import ENTRY_POINT_GROUP, AdmissionContext, Behaviour, Kind
    from reconcile.model.manifests import Document, load_manifests, read_manifests
    from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey, ObjectMeta, OwnerReference
    from reconcile.model.registry import KindRegistry
    from reconcile.model.resource import Resource, api_group_of
    from reconcile.model.selectors import LabelSelector
    from reconcile.model.serde import format_timestamp, make_converter, parse_timestamp, structure_errors
    from reconcile.model.versions import KindVersion

_HOMES: dict[str, str] = {
    "AdmissionContext": "reconcile.model.kinds",
    "AdmissionHook": "reconcile.model.hooks",
    "AdmissionRequest": "reconcile.model.hooks",
    "FailurePolicy": "reconcile.model.hooks",
    "PrinterColumn": "reconcile.model.columns",
    "Behaviour": "reconcile.model.kinds",
    "Bookmark": "reconcile.model.events",
    "Condition": "reconcile.model.conditions",
    "ConditionStatus": "reconcile.model.conditions",
    "DEFAULT_NAMESPACE": "reconcile.model.meta",
    "Document": "reconcile.model.manifests",
    "ENTRY_POINT_GROUP": "reconcile.model.kinds",
    "Event": "reconcile.model.events",
    "EventType": "reconcile.model.events",
    "FieldChange": "reconcile.model.events",
    "Kind": "reconcile.model.kinds",
    "KindRegistry": "reconcile.model.registry",
    "KindVersion": "reconcile.model.versions",
    "LabelSelector": "reconcile.model.selectors",
    "ObjectKey": "reconcile.model.meta",
    "ObjectMeta": "reconcile.model.meta",
    "OwnerReference": "reconcile.model.meta",
    "Resource": "reconcile.model.resource",
    "Status": "reconcile.model.conditions",
    "api_group_of": "reconcile.model.resource",
    "diff_objects": "reconcile.model.events",
    "format_timestamp": "reconcile.model.serde",
    "load_manifests": "reconcile.model.manifests",
    "make_converter": "reconcile.model.serde",
    "parse_timestamp": "reconcile.model.serde",
    "read_manifests": "reconcile.model.manifests",
    "structure_errors": "reconcile.model.serde",
}
"""Where each name lives: the module imported on its first use."""

__all__ = [
    "DEFAULT_NAMESPACE",
    "ENTRY_POINT_GROUP",
    "AdmissionContext",
    "AdmissionHook",
    "AdmissionRequest",
    "Behaviour",
    "Bookmark",
    "Condition",
    "ConditionStatus",
    "Document",
    "Event",
    "EventType",
    "FailurePolicy",
    "FieldChange",
    "Kind",
    "KindRegistry",
    "KindVersion",
    "LabelSelector",
    "ObjectKey",
    "ObjectMeta",
    "OwnerReference",
    "PrinterColumn",
    "Resource",
    "Status",
    "api_group_of",
    "diff_objects",
    "format_timestamp",
    "load_manifests",
    "make_converter",
    "parse_timestamp",
    "read_manifests",
    "structure_errors",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
