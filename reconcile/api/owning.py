"""Owner references: who owns an object, and the one owner that controls it.

As in Kubernetes, an object lists its owners in ``metadata.ownerReferences`` (API
version, kind, name and uid of each, in the object's namespace); at most one of them is
its **controller** (``controller: true``): the owner whose reconciler declares it, and
whose reconcile is requeued when it changes. :func:`set_controller_reference` makes that
reference, as controller-runtime's ``controllerutil.SetControllerReference`` does, and
refuses an object another owner controls already
(:class:`~reconcile.errors.AlreadyOwnedError`; the store checks it again in the apply's
transaction).

An owner chain must end: :func:`check_cycle` follows the owners of the owners an apply
names (by key, each checked by uid) and refuses a reference that would lead back to the
object itself (:class:`~reconcile.errors.OwnershipCycleError`). It reads before the
write, not in its transaction, so two racing applies could still close a cycle; the
garbage collector refuses to act on one it finds (:mod:`reconcile.controller.collecting`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, overload

import attrs

from reconcile.errors import AlreadyOwnedError, FieldError, InvalidError, OwnershipCycleError
from reconcile.model.meta import ObjectKey, OwnerReference
from reconcile.model.resource import AnyResource, api_group_of
from reconcile.store.contract import EventStore

__all__ = [
    "MAX_OWNER_DEPTH",
    "PROPAGATION_POLICIES",
    "check_cycle",
    "controller_of",
    "owner_key",
    "propagation_policy",
    "set_controller_reference",
]

#: How a deletion treats the object's dependents (Kubernetes' ``propagationPolicy``):
#: ``Background`` (the default) removes the object at once and the garbage collector
#: deletes its dependents after; ``Foreground`` keeps it (``foregroundDeletion``
#: finalizer) until the dependents that block it are gone; ``Orphan`` keeps the
#: dependents, their owner reference to it removed.
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")

#: How many owners up a chain :func:`check_cycle` follows before it calls it a cycle.
MAX_OWNER_DEPTH = 64

_Child = TypeVar("_Child", bound=AnyResource)


def propagation_policy(value: str) -> str:
    """``value`` as one of :data:`PROPAGATION_POLICIES` (any case: ``foreground``, as
    ``--cascade`` spells it); :class:`~reconcile.errors.InvalidError` otherwise."""
    found = next((p for p in PROPAGATION_POLICIES if p.lower() == str(value).lower()), None)
    if found is None:
        allowed = ", ".join(p.lower() for p in PROPAGATION_POLICIES)
        reason = f"must be one of {allowed}, not {value!r}"
        raise InvalidError([FieldError("propagationPolicy", reason)])
    return found


def owner_key(reference: Mapping[str, Any] | OwnerReference, namespace: str) -> ObjectKey:
    """The key of the owner a reference names (owners are in the dependent's namespace)."""
    if isinstance(reference, OwnerReference):
        return ObjectKey(api_group_of(reference.api_version), reference.kind, namespace, reference.name)
    return ObjectKey(api_group_of(reference["apiVersion"]), reference["kind"], namespace, reference["name"])


def controller_of(obj: AnyResource) -> OwnerReference | None:
    """The owner reference of ``obj`` with ``controller: true``, if any."""
    return next((r for r in obj.metadata.owner_references if r.controller), None)


@overload
def set_controller_reference(
    owner: AnyResource, child: Mapping[str, Any], *, block_owner_deletion: bool = True
) -> dict[str, Any]: ...


@overload
def set_controller_reference(
    owner: AnyResource, child: _Child, *, block_owner_deletion: bool = True
) -> _Child: ...


def set_controller_reference(
    owner: AnyResource, child: Mapping[str, Any] | AnyResource, *, block_owner_deletion: bool = True
) -> dict[str, Any] | AnyResource:
    """``child`` (a manifest mapping or a Resource) with ``owner`` as its controller: an
    owner reference with ``controller: true`` and ``blockOwnerDeletion`` (a foreground
    deletion of the owner waits for it). Its other owner references are kept; a
    controller reference to another owner is :class:`~reconcile.errors.AlreadyOwnedError`.
    The owner must be stored (it has a uid) and in the child's namespace."""
    uid = owner.metadata.uid
    if uid is None:
        reason = "the owner has no uid: apply it first, and use the object the apply returned"
        raise InvalidError([FieldError("metadata.ownerReferences", reason)], subject=str(owner.key))
    reference = OwnerReference(
        owner.api_version,
        owner.kind,
        owner.metadata.name,
        uid,
        controller=True,
        block_owner_deletion=block_owner_deletion,
    )
    if isinstance(child, Mapping):
        meta = dict(child.get("metadata") or {})
        subject = f"{child.get('kind')} {meta.get('name')!r}"
        _check_namespace(owner, str(meta.get("namespace") or "default"), subject)
        existing = [dict(r) for r in meta.get("ownerReferences") or ()]
        for ref in existing:
            if ref.get("controller") and ref.get("uid") != uid:
                raise AlreadyOwnedError(
                    subject, f"{ref.get('kind')} {ref.get('name')!r} (uid {ref.get('uid')})"
                )
        kept = [r for r in existing if r.get("uid") != uid]
        meta["ownerReferences"] = [
            *kept,
            {
                "apiVersion": reference.api_version,
                "kind": reference.kind,
                "name": reference.name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": block_owner_deletion,
            },
        ]
        return {**child, "metadata": meta}
    _check_namespace(owner, child.metadata.namespace, str(child.key))
    current = controller_of(child)
    if current is not None and current.uid != uid:
        raise AlreadyOwnedError(str(child.key), f"{current.kind} {current.name!r} (uid {current.uid})")
    references = (*(r for r in child.metadata.owner_references if r.uid != uid), reference)
    return attrs.evolve(child, metadata=attrs.evolve(child.metadata, owner_references=references))


def _check_namespace(owner: AnyResource, namespace: str, subject: str) -> None:
    if owner.metadata.namespace != namespace:
        reason = (
            f"the owner {owner.key} is in namespace {owner.metadata.namespace!r}, the object in "
            f"{namespace!r}: an owner is in its dependents' namespace"
        )
        raise InvalidError([FieldError("metadata.ownerReferences", reason)], subject=subject)


async def check_cycle(store: EventStore, key: ObjectKey, references: Sequence[Mapping[str, Any]]) -> None:
    """:class:`~reconcile.errors.OwnershipCycleError` when following the owners named by
    ``references`` (an applied object's, by key, each checked by uid) leads back to
    ``key``; an owner that is gone, or is another object by now (another uid), ends its
    chain."""
    seen: set[ObjectKey] = set()
    frontier: list[tuple[ObjectKey, str, tuple[ObjectKey, ...]]] = [
        (owner_key(r, key.namespace), r["uid"], (key,)) for r in references
    ]
    while frontier:
        owner, uid, chain = frontier.pop()
        if owner == key or len(chain) > MAX_OWNER_DEPTH:
            path = " -> ".join(str(k) for k in (*chain, owner))
            reason = f"an ownership cycle: {path}; an object cannot be its own owner, directly or not"
            raise OwnershipCycleError([FieldError("metadata.ownerReferences", reason)], subject=str(key))
        if owner in seen:
            continue
        seen.add(owner)
        stored = await store.read(owner)
        if stored is None or stored.body["metadata"].get("uid") != uid:
            continue
        frontier.extend(
            (owner_key(reference, key.namespace), reference["uid"], (*chain, owner))
            for reference in stored.body["metadata"].get("ownerReferences") or ()
        )
