"""Server-side apply as a store mutation: create the object from the admitted body, or
merge it into the stored one (:mod:`.fields` holds the field-ownership rules).

A bulk apply makes one of these per document, nearly all of them creates: nothing is
worked out before the mutation runs but what both ways need, and the mutation is one
object, not a closure (whose cells are as many more objects for the collector to scan).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from reconcile.api.changing import (
    changed,
    check_immutable,
    check_new_finalizers,
    check_version,
    clone,
    finish_if_released,
    same,
)
from reconcile.api.fields import (
    UPDATE,
    leaf_paths,
    managed_paths,
    merge_metadata,
    merge_spec,
    metadata_conflicts,
    only_spec_paths_recorded,
    others_own_spec,
)
from reconcile.errors import (
    AlreadyExistsError,
    AlreadyOwnedError,
    FieldConflictError,
    FieldError,
    InvalidError,
    NotFoundError,
    OwnershipCycleError,
)
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import Body, Change, Mutation, Put, StoredObject

__all__ = ["apply"]


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


def _created(  # noqa: PLR0917 - by position: every document of a bulk apply calls it
    key: ObjectKey,
    desired: Body,
    status: Body,
    owner: str,
    paths: list[str],
    uid: str,
    now: str,
    identity: str | None,
    finalizers: Sequence[str],
) -> Put:
    """The change that creates the object from ``desired`` (an admitted body): its uid,
    generation 1 and creation time, ``status``, ``owner`` owning ``paths`` (its managed
    fields, sorted; the list is stored as it is), the ``finalizers`` it lists followed by
    the defaulted ones it does not. What :func:`apply` does when nothing is stored."""
    # A new top level and metadata, the rest shared with ``desired``: a stored body is
    # never changed in place after its write except its metadata's resource_version
    # (stamped by the store on this metadata), so nothing reaches ``desired`` through it,
    # and a mutation run again builds its own.
    wanted = desired["metadata"]
    meta = {
        **wanted,
        "uid": uid,
        "generation": 1,
        "creationTimestamp": now,
        "deletionTimestamp": None,
        "resourceVersion": None,
        "managedFields": {owner: paths} if paths else {},
    }
    if wanted.get("ownerReferences"):
        _check_owners(key, meta, wanted)
    if finalizers:
        listed = meta.get("finalizers") or []
        meta["finalizers"] = [*listed, *(f for f in finalizers if f not in listed)]
    body = {**desired, "metadata": meta, "status": status}
    return Put(EventType.CREATED, body, None, identity)


def _applied_paths(desired: Body, declared: Sequence[str] | None) -> list[str]:
    """The fields an apply of ``desired`` declares, sorted: its metadata's (labels,
    annotations, finalizers, owner references) and ``declared`` (spec paths; None: every
    leaf of its spec)."""
    spec_paths = leaf_paths(desired["spec"]) if declared is None else declared
    paths = managed_paths(desired["metadata"])
    paths.update(spec_paths)
    return sorted(paths)


def apply(
    key: ObjectKey,
    desired: Body,
    status: Callable[[], Body],
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
    """Create the object from ``desired`` (:func:`_created`, with the status ``status()``
    makes), or bring the stored one to it by server-side apply (:mod:`.fields`):
    ``declared`` are the spec paths the manifest declares (None: every leaf of the spec);
    a field another manager owns with another value is a
    :class:`~reconcile.errors.FieldConflictError` unless ``force``. The ``immutable``
    spec fields may not change; ``identity`` is the external resource it declares, which
    no other live object of the kind may declare (the store checks). ``finalizers`` are
    added to an object this creates (defaulting: no manager owns them, so a later apply
    without them keeps them).

    Nothing is worked out before the mutation runs but what both ways need: a bulk apply
    makes thousands of these, nearly all of them creates."""
    if manager.endswith(UPDATE):
        reason = f"a field manager's name may not end with {UPDATE.strip()!r} (its non-apply writes' entry)"
        raise InvalidError([FieldError("fieldManager", reason)], subject=str(key))
    return _Apply(
        key, desired, status, manager, uid, now, create_only, immutable, identity, finalizers, declared, force
    )


@attrs.define(eq=False)
class _Apply:
    """:func:`apply`'s mutation, holding what it was given."""

    key: ObjectKey
    desired: Body
    status: Callable[[], Body]
    manager: str
    uid: str
    now: str
    create_only: bool
    immutable: tuple[str, ...]
    identity: str | None
    finalizers: tuple[str, ...]
    declared: Sequence[str] | None
    force: bool

    def __call__(self, current: StoredObject | None) -> Change | None:
        """The change applying makes to ``current``."""
        key, desired = self.key, self.desired
        expected = desired["metadata"].get("resourceVersion")
        if current is None:
            if expected is not None:
                raise NotFoundError(f"{key} not found (resourceVersion {expected} was given)")
            # A create is not an apply: its fields are the manager's ``(Update)`` entry's,
            # as Kubernetes records a POST (``operation: Update``); an apply that creates
            # records them under the manager itself.
            manager = self.manager
            return _created(
                key,
                desired,
                self.status(),
                manager + UPDATE if self.create_only else manager,
                _applied_paths(desired, self.declared),
                self.uid,
                self.now,
                self.identity,
                self.finalizers,
            )
        if self.create_only:
            raise AlreadyExistsError(f"{key} already exists")
        return _updated(
            key,
            current,
            desired,
            expected=expected,
            manager=self.manager,
            declared=self.declared,
            immutable=self.immutable,
            identity=self.identity,
            force=self.force,
        )


def _updated(
    key: ObjectKey,
    current: StoredObject,
    desired: Body,
    *,
    expected: int | None,
    manager: str,
    declared: Sequence[str] | None,
    immutable: tuple[str, ...],
    identity: str | None,
    force: bool,
) -> Change | None:
    """What :func:`apply` makes of a stored object: server-side apply's merge."""
    check_version(key, current, expected)
    spec_paths = leaf_paths(desired["spec"]) if declared is None else declared
    paths = _applied_paths(desired, spec_paths)
    old = current.body
    old_meta = old["metadata"]
    _check_owners(key, old_meta, desired["metadata"])
    # A shallow copy: the merges below replace a manager's list, never change one.
    managed: dict[str, list[str]] = dict(old_meta.get("managedFields") or {})
    spec = clone(desired["spec"])
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
        old_meta, desired["metadata"], manager, paths, managed, wanted_set=frozenset(paths)
    )
    check_new_finalizers(key, old_meta, new["metadata"])
    if not same(new["spec"], old["spec"]):
        new["metadata"]["generation"] = old_meta["generation"] + 1
    change = changed(current, new, EventType.SPEC_CHANGED)
    if change is not None and isinstance(change, Put):
        if only_spec_paths_recorded(old, new):
            return None
        finished = finish_if_released(change.body, change.event_type)
        return attrs.evolve(finished, identity=identity) if isinstance(finished, Put) else finished
    return change
