"""The model layer: resources, metadata, conditions, events, kinds, manifests, serde."""

from reconcile.model.conditions import Condition, ConditionStatus, Status
from reconcile.model.events import Bookmark, Event, EventType, FieldChange, diff_objects
from reconcile.model.kinds import ENTRY_POINT_GROUP, AdmissionContext, Kind, KindRegistry
from reconcile.model.manifests import Document, load_manifests, read_manifests
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey, ObjectMeta, OwnerReference
from reconcile.model.resource import Resource, api_group_of
from reconcile.model.selectors import LabelSelector
from reconcile.model.serde import format_timestamp, make_converter, parse_timestamp, structure_errors

__all__ = [
    "DEFAULT_NAMESPACE",
    "ENTRY_POINT_GROUP",
    "AdmissionContext",
    "Bookmark",
    "Condition",
    "ConditionStatus",
    "Document",
    "Event",
    "EventType",
    "FieldChange",
    "Kind",
    "KindRegistry",
    "LabelSelector",
    "ObjectKey",
    "ObjectMeta",
    "OwnerReference",
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
