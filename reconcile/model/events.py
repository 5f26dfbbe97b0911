"""Events: the entries of the append-only log, as readers see them.

Every change to an object is one event carrying the object as it stood after the change
(a snapshot), so the projection can be rebuilt from the log and ``history`` can say what
changed by comparing consecutive snapshots. Controller actions (``CreateRequested``,
``DriftDetected``, ...) are events without a snapshot: they tell what was done about the
object without changing it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import attrs

from reconcile.model.meta import ObjectKey
from reconcile.model.resource import Resource

__all__ = [
    "OBJECT_CHANGES",
    "ActionType",
    "Bookmark",
    "Event",
    "EventType",
    "FieldChange",
    "diff_objects",
    "event_data",
]


class EventType:
    """The event types the API and the engine record (a provider may record its own)."""

    CREATED = "Created"
    SPEC_CHANGED = "SpecChanged"
    METADATA_CHANGED = "MetadataChanged"
    STATUS_CHANGED = "StatusChanged"
    FINALIZER_ADDED = "FinalizerAdded"
    FINALIZER_REMOVED = "FinalizerRemoved"
    DELETION_REQUESTED = "DeletionRequested"
    DELETED = "Deleted"
    #: Rewritten in its kind's storage version by ``reconcile migrate-storage``.
    STORAGE_MIGRATED = "StorageMigrated"


class ActionType:
    """The events the managed reconciler records about what it did (notes: the object
    does not change), as Crossplane's managed resources name them."""

    CREATE_REQUESTED = "CreateRequested"
    CREATE_SUCCEEDED = "CreateSucceeded"
    CREATE_FAILED = "CreateFailed"
    UPDATE_REQUESTED = "UpdateRequested"
    UPDATE_SUCCEEDED = "UpdateSucceeded"
    UPDATE_FAILED = "UpdateFailed"
    DELETE_REQUESTED = "DeleteRequested"
    DELETE_SUCCEEDED = "DeleteSucceeded"
    DELETE_FAILED = "DeleteFailed"
    DELETE_SKIPPED = "DeleteSkipped"
    DRIFT_DETECTED = "DriftDetected"
    OBSERVE_FAILED = "ObserveFailed"
    NOT_OWNED = "NotOwned"
    ADOPTED = "Adopted"
    ORPHANED = "Orphaned"


#: The types whose event leaves a new version of the object (every other type but
#: ``Deleted`` is a note: an action recorded about the object).
OBJECT_CHANGES = frozenset(
    value for name, value in vars(EventType).items() if name.isupper() and value != EventType.DELETED
)


@attrs.frozen
class FieldChange:
    """One field that an event changed: its path, and the values before and after."""

    path: str
    old: Any
    new: Any


@attrs.frozen
class Event:
    """One entry of the log."""

    revision: int
    time: datetime.datetime
    type: str
    key: ObjectKey
    uid: str
    actor: str
    #: The object as it stood after this event; None for an action that changed nothing.
    object: Resource[Any, Any] | None = None
    #: Details of an action (a message, a diff), as recorded.
    data: Mapping[str, Any] | None = None
    #: What this event changed, relative to the previous snapshot (filled by ``history``).
    changes: tuple[FieldChange, ...] = ()
    #: Who asked for the write (``alice@laptop``), when its writer said: the CLI's
    #: ``--as``, by default the OS user and host. ``actor`` is the field manager.
    user: str | None = None


@attrs.frozen
class Bookmark:
    """A watch is caught up: every matching event up to ``revision`` has been delivered."""

    revision: int


_IGNORED = frozenset({"metadata.resourceVersion"})


def diff_objects(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, prefix: str = ""
) -> list[FieldChange]:
    """The leaf paths whose values differ between two object bodies, in sorted order."""
    old = old or {}
    new = new or {}
    changes = []
    for name in sorted(old.keys() | new.keys()):
        path = f"{prefix}.{name}" if prefix else name
        if path in _IGNORED:
            continue
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            changes.extend(diff_objects(before, after, path))
        else:
            changes.append(FieldChange(path, before, after))
    return changes


def event_data(event: Event) -> dict[str, Any]:
    """An event as plain data, the documented form of ``reconcile history -o json`` and
    of the HTTP API's ``.../{name}/history``: ``revision``, ``time`` (RFC 3339 UTC),
    ``type``, ``actor`` (the field manager), ``user`` (who asked; null when not
    recorded), ``kind``, ``namespace``, ``name``, ``uid``, ``data`` and ``changes``
    (``path``, ``old``, ``new``)."""
    return {
        "revision": event.revision,
        "time": event.time.isoformat().replace("+00:00", "Z"),
        "type": event.type,
        "actor": event.actor,
        "user": event.user,
        "kind": event.key.kind,
        "namespace": event.key.namespace,
        "name": event.key.name,
        "uid": event.uid,
        "data": dict(event.data) if event.data else None,
        "changes": [{"path": c.path, "old": c.old, "new": c.new} for c in event.changes],
    }
