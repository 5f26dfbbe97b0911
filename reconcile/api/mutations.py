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

import attrs

from reconcile.api.fields import (
    UPDATE,
    leaf_paths,
    managed_paths,
    merge_metadata,
    merge_spec,
    metadata_conflicts,
    only_spec_paths_recorded,
    others_own_spec,
    recorded_update,
)
from reconcile.api.merging import merge_patch
from reconcile.errors import (
    AlreadyExistsError,
    AlreadyOwnedError,
    ConflictError,
    FieldConflictError,
    FieldError,
    InvalidError,
    NotFoundError,
    OwnershipCycleError,
)
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.model.spelling import camel
from reconcile.store.contract import Body, Change, Mutation, Note, Put, Remove, StoredObject
from reconcile.store.encoding import dumps, loads

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


def _clone(value: Any) -> Any:
    # Mutations may run again (a retried transaction), so they never share or alter their
    # inputs. A JSON round trip through orjson copies a body ~15x faster than deepcopy.
    return loads(dumps(value))


def _require(key: ObjectKey, current: StoredObject | None) -> StoredObject:
    if current is None:
        raise NotFoundError(f"{key} not found")
    return current


def _check_version(key: ObjectKey, current: StoredObject, expected: int | None) -> None:
    if expected is not None and expected != current.resource_version:
        raise ConflictError(
            f"{key} was modified: expected resourceVersion {expected}, "
            f"found {current.resource_version}; re-read and try again"
        )


def _changed(current: StoredObject, new: Body, event_type: str) -> Change | None:
    old = current.body
    new["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
    if new == old:
        return None
    if event_type == EventType.SPEC_CHANGED and new["spec"] == old["spec"]:
        event_type = EventType.METADATA_CHANGED
    return Put(event_type, new)


def _new_object(desired: Body, status: Body, uid: str, now: str) -> Body:
    # A new top level and metadata, the rest shared with ``desired``: a stored body is
    # never changed in place after its write except its metadata's resource_version
    # (stamped by the store on this metadata), so nothing reaches ``desired`` through it,
    # and a mutation run again builds its own.
    meta = dict(desired["metadata"])
    meta.update({"uid": uid, "generation": 1, "creationTimestamp": now, "deletionTimestamp": None})
    meta["resourceVersion"] = None
    return {**desired, "metadata": meta, "status": status}


def _controller_uid(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    for reference in meta.get("ownerReferences") or ():
        if reference.get("controller"):
            return reference["uid"], f"{reference['kind']} {reference['name']!r} (uid {reference['uid']})"
    return None


def _check_owners(key: ObjectKey, old: Mapping[str, Any], desired: Mapping[str, Any]) -> None:
    """An object has one controller, and is never its own owner."""
    references = desired.get("ownerReferences") or ()
    if not references:
        return
    if any(reference["uid"] == old.get("uid") for reference in references):
        reason = "an object cannot own itself"
        raise OwnershipCycleError([FieldError("metadata.ownerReferences", reason)], subject=str(key))
    wanted = _controller_uid(desired)
    current = _controller_uid(old)
    if wanted is not None and current is not None and wanted[0] != current[0]:
        raise AlreadyOwnedError(str(key), current[1])


def _check_new_finalizers(key: ObjectKey, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    if old.get("deletionTimestamp") is None:
        return
    added = set(new.get("finalizers") or ()) - set(old.get("finalizers") or ())
    if added:
        reason = (
            f"cannot add finalizer {min(added)!r}: the object is being deleted (since "
            f"{old['deletionTimestamp']}); its spec, labels and annotations may still change"
        )
        raise InvalidError([FieldError("metadata.finalizers", reason)], subject=str(key))


def _finish_if_released(body: Body, event_type: str) -> Change:
    meta = body["metadata"]
    if meta.get("deletionTimestamp") is not None and not meta.get("finalizers"):
        return Remove(body)
    return Put(event_type, body)


def apply(
    key: ObjectKey,
    desired: Body,
    status: Body,
    *,
    manager: str,
    uid: str,
    now: str,
    create_only: bool = False,
    immutable: tuple[str, ...] = (),
    identity: str | None = None,
    finalizers: tuple[str, ...] = (),
    declared: Sequence[str] | None = None,
    force: bool = False,
) -> Mutation:
    """Create the object from ``desired``, or bring the stored one to it by server-side
    apply (:mod:`.fields`): ``declared`` are the spec paths the manifest declares (None:
    every leaf of the spec); a field another manager owns with another value is a
    :class:`~reconcile.errors.FieldConflictError` unless ``force``. The ``immutable``
    spec fields may not change; ``identity`` is the external resource it declares, which
    no other live object of the kind may declare (the store checks). ``finalizers`` are
    added to an object this creates (defaulting: no manager owns them, so a later apply
    without them keeps them)."""
    if manager.endswith(UPDATE):
        reason = f"a field manager's name may not end with {UPDATE.strip()!r} (its non-apply writes' entry)"
        raise InvalidError([FieldError("fieldManager", reason)], subject=str(key))
    expected = desired["metadata"].get("resourceVersion")
    spec_paths = leaf_paths(desired["spec"]) if declared is None else declared
    paths = sorted({*managed_paths(desired["metadata"]), *spec_paths})
    paths_set = frozenset(paths)
    listed = desired["metadata"].get("finalizers") or []
    created_finalizers = [*listed, *(f for f in finalizers if f not in listed)]

    def mutate(current: StoredObject | None) -> Change | None:
        if current is None:
            if expected is not None:
                raise NotFoundError(f"{key} not found (resourceVersion {expected} was given)")
            body = _new_object(desired, status, uid, now)
            meta = body["metadata"]
            _check_owners(key, meta, desired["metadata"])
            # A create is not an apply: its fields are the manager's ``(Update)`` entry's,
            # as Kubernetes records a POST (``operation: Update``); an apply that creates
            # records them under the manager itself.
            owner = manager + UPDATE if create_only else manager
            meta["managedFields"] = {owner: list(paths)} if paths else {}
            if finalizers:
                meta["finalizers"] = list(created_finalizers)
            return Put(EventType.CREATED, body, identity=identity)
        if create_only:
            raise AlreadyExistsError(f"{key} already exists")
        _check_version(key, current, expected)
        old = current.body
        old_meta = old["metadata"]
        _check_owners(key, old_meta, desired["metadata"])
        # A shallow copy: the merges below replace a manager's list, never change one.
        managed: dict[str, list[str]] = dict(old_meta.get("managedFields") or {})
        spec = _clone(desired["spec"])
        conflicts = []
        if len(managed) > 1 or (managed and manager not in managed):
            conflicts = metadata_conflicts(old_meta, desired["metadata"], managed, manager, force=force)
            if others_own_spec(managed, manager):
                spec, found = merge_spec(old["spec"], spec, managed, manager, spec_paths, force=force)
                conflicts += found
        if conflicts:
            raise FieldConflictError(str(key), [(c.field, c.manager) for c in conflicts])
        check_immutable(key, old["spec"], spec, immutable)
        new = dict(old)
        new["apiVersion"] = desired["apiVersion"]
        new["spec"] = spec
        new["metadata"] = merge_metadata(
            old_meta, desired["metadata"], manager, paths, managed, wanted_set=paths_set
        )
        _check_new_finalizers(key, old_meta, new["metadata"])
        if new["spec"] != old["spec"]:
            new["metadata"]["generation"] = old_meta["generation"] + 1
        change = _changed(current, new, EventType.SPEC_CHANGED)
        if change is not None and isinstance(change, Put):
            if only_spec_paths_recorded(old, new):
                return None
            finished = _finish_if_released(change.body, change.event_type)
            return attrs.evolve(finished, identity=identity) if isinstance(finished, Put) else finished
        return change

    return mutate


def immutable_errors(
    old: Mapping[str, Any], new: Mapping[str, Any], fields: Sequence[str]
) -> list[FieldError]:
    """A field error for each immutable spec field (an attribute name: its key is
    camelCase) whose value would change."""
    keys = [camel(field) for field in fields]
    return [
        FieldError(
            f"spec.{key}",
            f"is immutable once created ({old.get(key)!r} -> {new.get(key)!r}): "
            "delete the object and apply it again",
        )
        for key in keys
        if old.get(key) != new.get(key)
    ]


def check_immutable(key: ObjectKey, old: Body, new: Body, fields: tuple[str, ...]) -> None:
    """InvalidError naming each immutable spec field whose value would change."""
    errors = immutable_errors(old, new, fields)
    if errors:
        raise InvalidError(errors, subject=str(key))


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
        current = _require(key, current)
        _check_version(key, current, expected)
        old = current.body
        check_immutable(key, old["spec"], desired["spec"], immutable)
        new = dict(old)
        new["spec"] = _clone(desired["spec"])
        meta = dict(old["metadata"])
        for field in ("labels", "annotations", "finalizers", "ownerReferences"):
            meta[field] = _clone(desired["metadata"].get(field))
        new["metadata"] = meta
        _check_new_finalizers(key, old["metadata"], meta)
        if manager is not None:
            meta["managedFields"] = recorded_update(old, new, manager)
        if new["spec"] != old["spec"]:
            meta["generation"] = old["metadata"]["generation"] + 1
        change = _changed(current, new, EventType.SPEC_CHANGED)
        if change is not None and isinstance(change, Put):
            return _finish_if_released(change.body, change.event_type)
        return change

    return mutate


def update_status(key: ObjectKey, status: Body, expected: int | None) -> Mutation:
    """Replace the status only; spec and generation stay as they are."""

    def mutate(current: StoredObject | None) -> Change | None:
        current = _require(key, current)
        _check_version(key, current, expected)
        if current.body.get("status") == status:
            return None
        new = dict(current.body)
        new["status"] = _clone(status)
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
        current = _require(key, current)
        _check_version(key, current, expected)
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
        current = _require(key, current)
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
        current = _require(key, current)
        meta = current.body["metadata"]
        if finalizer in (meta.get("finalizers") or ()):
            return None
        new_meta = {**meta, "finalizers": [*(meta.get("finalizers") or ()), finalizer]}
        _check_new_finalizers(key, meta, new_meta)
        return Put(EventType.FINALIZER_ADDED, {**current.body, "metadata": new_meta})

    return mutate


def remove_finalizer(key: ObjectKey, finalizer: str) -> Mutation:
    """Remove a finalizer; removing the last one of a deleting object deletes it."""

    def mutate(current: StoredObject | None) -> Change | None:
        current = _require(key, current)
        meta = current.body["metadata"]
        if finalizer not in (meta.get("finalizers") or ()):
            return None
        remaining = [f for f in meta["finalizers"] if f != finalizer]
        body = {**current.body, "metadata": {**meta, "finalizers": remaining}}
        return _finish_if_released(body, EventType.FINALIZER_REMOVED)

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
        current = _require(key, current)
        _check_version(key, current, expected)
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
        current = _require(key, current)
        body = current.body
        meta = body["metadata"]
        new_meta = dict(meta)
        if finalizer is not None and finalizer not in (meta.get("finalizers") or ()):
            new_meta["finalizers"] = [*(meta.get("finalizers") or ()), finalizer]
            _check_new_finalizers(key, meta, new_meta)
        if release is not None and release in (new_meta.get("finalizers") or ()):
            new_meta["finalizers"] = [f for f in new_meta["finalizers"] if f != release]
        if annotations:
            merged = merge_patch(meta.get("annotations") or {}, annotations)
            new_meta["annotations"] = dict(sorted(merged.items()))
        changes: list[Change] = [Note(event_type, data) for event_type, data in events]
        meta_changed = new_meta != meta
        status_changed = status is not None and status != body.get("status")
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
            changes.append(_finish_if_released(new, event_type))
        return changes or None

    return mutate
