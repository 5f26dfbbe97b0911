"""What each API verb does to a stored object, as pure mutations the store runs.

Each function returns a :data:`~reconcile.store.Mutation`: given the current object (or
None) it returns the change to record, None when nothing would change (so an identical
apply, a no-op status update or a repeated finalizer call appends nothing), or raises.
They run inside the store's write transaction, which makes the precondition checks
atomic with the write, and on the store's writer thread: they must be cheap.

Rules, after the Kubernetes API conventions:

* ``generation`` starts at 1 and bumps only when ``spec`` changes.
* ``apply`` replaces the spec; for labels, annotations and finalizers it is a three-way
  merge: it removes what the same manager applied before and no longer declares, and
  keeps what others (controllers, ``patch``) added.
* ``delete`` of an object with finalizers only sets ``deletion_timestamp``; the object goes
  when the last finalizer is removed. No finalizer may be added once deletion began; its
  spec, labels and annotations may still change (Kubernetes allows it too), which is how
  an object stuck deleting is rescued: a bucket refused as "not empty" gets
  ``forceDestroy: true`` and its controller's next try empties it.
* status writes never touch spec or metadata; spec writes never touch status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconcile.api.applying import apply
from reconcile.api.changing import (
    changed,
    check_immutable,
    check_new_finalizers,
    check_version,
    clone,
    finish_if_released,
    require,
    same,
)
from reconcile.api.fields import recorded_update
from reconcile.api.merging import merge_patch
from reconcile.errors import FieldError, InvalidError
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import Body, Change, Mutation, Note, Put, Remove, StoredObject

__all__ = [
    "FOREGROUND_FINALIZER",
    "ORPHAN_FINALIZER",
    "add_finalizer",
    "apply",
    "delete",
    "patch_metadata",
    "record_actions",
    "remove_finalizer",
    "remove_owner_references",
    "replace",
    "update_status",
]


def replace(
    key: ObjectKey, desired: Body, immutable: tuple[str, ...] = (), *, manager: str | None = None
) -> Mutation:
    """``update``: replace spec and user metadata, guarded by the given resource_version;
    the ``immutable`` spec fields may not change. The fields it changes become
    ``manager``'s (:func:`~reconcile.api.fields.recorded_update`; None: no ownership
    recorded)."""
    expected = desired["metadata"].get("resourceVersion")
    if expected is None:
        reason = "required for update (the version this change was based on)"
        raise InvalidError([FieldError("metadata.resourceVersion", reason)], subject=str(key))

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        check_version(key, current, expected)
        old = current.body
        check_immutable(key, old["spec"], desired["spec"], immutable)
        new = dict(old)
        new["spec"] = clone(desired["spec"])
        meta = dict(old["metadata"])
        for field in ("labels", "annotations", "finalizers", "ownerReferences"):
            meta[field] = clone(desired["metadata"].get(field))
        new["metadata"] = meta
        check_new_finalizers(key, old["metadata"], meta)
        if manager is not None:
            meta["managedFields"] = recorded_update(old, new, manager)
        if not same(new["spec"], old["spec"]):
            meta["generation"] = old["metadata"]["generation"] + 1
        change = changed(current, new, EventType.SPEC_CHANGED)
        if change is not None and isinstance(change, Put):
            return finish_if_released(change.body, change.event_type)
        return change

    return mutate


def update_status(key: ObjectKey, status: Body, expected: int | None) -> Mutation:
    """Replace the status only; spec and generation stay as they are."""

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        check_version(key, current, expected)
        if same(current.body.get("status"), status):
            return None
        new = dict(current.body)
        new["status"] = clone(status)
        return Put(EventType.STATUS_CHANGED, new)

    return mutate


#: The finalizer a foreground deletion holds its owner with until the dependents that
#: block it are gone (Kubernetes' name).
FOREGROUND_FINALIZER = "foregroundDeletion"
#: The finalizer an orphaning deletion holds its owner with until its dependents' owner
#: references to it are removed (Kubernetes' name).
ORPHAN_FINALIZER = "orphan"
_POLICY_FINALIZERS = {"Foreground": FOREGROUND_FINALIZER, "Orphan": ORPHAN_FINALIZER}


def delete(key: ObjectKey, *, now: str, expected: int | None = None, policy: str = "Background") -> Mutation:
    """Mark for deletion while finalizers remain; otherwise remove. ``policy``
    (Background, Foreground, Orphan) is how the garbage collector treats the dependents:
    Foreground and Orphan hold the object with their finalizer until it has done so."""
    held_by = _POLICY_FINALIZERS.get(policy)

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        check_version(key, current, expected)
        meta = current.body["metadata"]
        if meta.get("deletionTimestamp") is not None:
            return None
        new = dict(current.body)
        new["metadata"] = {**meta, "deletionTimestamp": now}
        if held_by is not None and held_by not in (meta.get("finalizers") or ()):
            new["metadata"]["finalizers"] = [*(meta.get("finalizers") or ()), held_by]
        if new["metadata"].get("finalizers"):
            return Put(EventType.DELETION_REQUESTED, new)
        return Remove(new)

    return mutate


def remove_owner_references(key: ObjectKey, uids: Sequence[str]) -> Mutation:
    """Remove the owner references to ``uids`` (an orphaned dependent, or references to
    owners that are gone), and any manager's claim on them."""
    gone = set(uids)

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        meta = current.body["metadata"]
        references = meta.get("ownerReferences") or ()
        kept = [r for r in references if r["uid"] not in gone]
        if len(kept) == len(references):
            return None
        paths = {f"ownerReferences/{uid}" for uid in gone}
        managed = {
            name: owned
            for name, all_owned in (meta.get("managedFields") or {}).items()
            if (owned := [p for p in all_owned if p not in paths])
        }
        new_meta = {**meta, "ownerReferences": kept, "managedFields": managed}
        return Put(EventType.METADATA_CHANGED, {**current.body, "metadata": new_meta})

    return mutate


def add_finalizer(key: ObjectKey, finalizer: str) -> Mutation:
    """Add a finalizer (no-op when present; refused once deletion began)."""

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        meta = current.body["metadata"]
        if finalizer in (meta.get("finalizers") or ()):
            return None
        new_meta = {**meta, "finalizers": [*(meta.get("finalizers") or ()), finalizer]}
        check_new_finalizers(key, meta, new_meta)
        return Put(EventType.FINALIZER_ADDED, {**current.body, "metadata": new_meta})

    return mutate


def remove_finalizer(key: ObjectKey, finalizer: str) -> Mutation:
    """Remove a finalizer; removing the last one of a deleting object deletes it."""

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        meta = current.body["metadata"]
        if finalizer not in (meta.get("finalizers") or ()):
            return None
        remaining = [f for f in meta["finalizers"] if f != finalizer]
        body = {**current.body, "metadata": {**meta, "finalizers": remaining}}
        return finish_if_released(body, EventType.FINALIZER_REMOVED)

    return mutate


def patch_metadata(
    key: ObjectKey,
    patches: Mapping[str, Mapping[str, Any]],
    expected: int | None,
    max_annotation_bytes: int,
    *,
    manager: str | None = None,
) -> Mutation:
    """Merge-patch labels and annotations (``{"labels": {...}, "annotations": {...}}``; a
    None value removes a key). Keys and values were validated by the caller. The keys it
    changes become ``manager``'s (None: no ownership recorded)."""

    def mutate(current: StoredObject | None) -> Change | None:
        current = require(key, current)
        check_version(key, current, expected)
        meta = dict(current.body["metadata"])
        for field, patch in patches.items():
            meta[field] = dict(sorted(merge_patch(meta.get(field) or {}, patch).items()))
        if meta == current.body["metadata"]:
            return None
        size = sum(len(k) + len(v) for k, v in (meta.get("annotations") or {}).items())
        if size > max_annotation_bytes:
            reason = f"must have at most {max_annotation_bytes} bytes"
            raise InvalidError([FieldError("metadata.annotations", reason)], subject=str(key))
        new = {**current.body, "metadata": meta}
        if manager is not None:
            meta["managedFields"] = recorded_update(current.body, new, manager)
        return Put(EventType.METADATA_CHANGED, new)

    return mutate


def record_actions(
    key: ObjectKey,
    events: Sequence[tuple[str, Mapping[str, Any] | None]],
    *,
    annotations: Mapping[str, str | None] | None,
    finalizer: str | None,
    status: Body | None,
    release: str | None = None,
) -> Mutation:
    """Append action events and, in the same transaction, merge annotations (None
    removes), add a finalizer and replace the status: how a controller records what it
    did together with the bookkeeping that goes with it, as one atomic write. ``release``
    removes a finalizer in the same write: the last one of an object being deleted
    removes the object, after the events."""

    def mutate(current: StoredObject | None) -> Sequence[Change] | None:
        current = require(key, current)
        body = current.body
        meta = body["metadata"]
        new_meta = dict(meta)
        if finalizer is not None and finalizer not in (meta.get("finalizers") or ()):
            new_meta["finalizers"] = [*(meta.get("finalizers") or ()), finalizer]
            check_new_finalizers(key, meta, new_meta)
        if release is not None and release in (new_meta.get("finalizers") or ()):
            new_meta["finalizers"] = [f for f in new_meta["finalizers"] if f != release]
        if annotations:
            merged = merge_patch(meta.get("annotations") or {}, annotations)
            new_meta["annotations"] = dict(sorted(merged.items()))
        changes: list[Change] = [Note(event_type, data) for event_type, data in events]
        meta_changed = new_meta != meta
        status_changed = status is not None and not same(status, body.get("status"))
        if meta_changed or status_changed:
            new = {**body, "metadata": new_meta}
            if status_changed:
                # Shared, not copied: the caller made it for this write (Client._recording
                # unstructures the status afresh), and a stored body's status is never
                # changed in place.
                new["status"] = status
                event_type = EventType.STATUS_CHANGED
            elif len(new_meta.get("finalizers") or ()) < len(meta.get("finalizers") or ()):
                event_type = EventType.FINALIZER_REMOVED
            elif new_meta.get("finalizers") != meta.get("finalizers"):
                event_type = EventType.FINALIZER_ADDED
            else:
                event_type = EventType.METADATA_CHANGED
            changes.append(finish_if_released(new, event_type))
        return changes or None

    return mutate
