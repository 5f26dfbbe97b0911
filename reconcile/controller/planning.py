"""Planning: what the managed reconciler would do for an object, found by observing the
external system and acting on nothing (Terraform's ``plan``).

:func:`plan` follows the managed reconciler's decisions in its order (pause, policies,
deletion, ownership, existence, drift, the record of a create) but calls only the
provider's ``observe``, which never changes anything, and writes nothing to the store.
What it returns is the action a ``run`` would take now: ``create``, ``update`` (with the
provider's diff), ``delete``, ``adopt`` (record an external resource found as ours),
``orphan`` (let the object go and keep the resource), ``refuse`` (it exists and is not
ours: it is left alone), ``nothing``, or ``error`` (observing failed).
"""

from __future__ import annotations

import attrs

from reconcile.model.external import (
    ANNOTATION_ADOPT,
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_CREATE_SUCCEEDED,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_EXTERNAL_IDENTITY,
    ANNOTATION_MANAGEMENT_POLICY,
    ANNOTATION_PAUSED,
    FINALIZER,
    ExternalClient,
    Observation,
    ours,
)
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource

__all__ = ["ACTIONS", "CHANGES", "Planned", "owned", "plan", "with_identity"]

#: Every action, in the order a summary lists them.
ACTIONS = ("create", "update", "delete", "adopt", "orphan", "refuse", "nothing", "error")
#: The actions that change something outside or in the store.
CHANGES = frozenset({"create", "update", "delete", "adopt", "orphan"})


@attrs.frozen
class Planned:
    """What a run would do for one object, and why (a diff for an update)."""

    key: ObjectKey
    action: str
    detail: str = ""


def owned(obj: AnyResource, observation: Observation, *, provider_decides: bool = False) -> bool:
    """Whether the external resource observed is ``obj``'s, by the one ownership rule
    (:func:`reconcile.ours`: its owner mark, or for an unmarked one the identity the
    engine recorded at its own last create or update), or it is unmarked while a create
    of it was begun and never recorded (a crash between the provider's create and its
    mark). For a kind whose create is exclusive (``provider_decides``) a create begun
    proves nothing about an unmarked resource (it is made without a look first): the
    provider reports an interrupted create of its own as marked. The managed reconciler
    and :func:`plan` decide by this rule."""
    if ours(obj, observation.owner, observation.identity):
        return True
    annotations = obj.metadata.annotations
    return (
        observation.owner is None
        and not provider_decides
        and ANNOTATION_CREATE_PENDING in annotations
        and ANNOTATION_CREATE_SUCCEEDED not in annotations
    )


def with_identity(
    obj: AnyResource,
    observation: Observation,
    annotations: dict[str, str | None] | None,
    *,
    ours_for_sure: bool,
) -> dict[str, str | None] | None:
    """``annotations`` with the identity ``observation`` reports recorded, when it is what
    our own call left (``ours_for_sure``: the call's answer; otherwise a look that finds
    our mark) and differs from the record: what an unmarked resource is later compared
    with (:func:`reconcile.ours`). Never from a look that does not prove it ours."""
    identity = observation.identity
    if (
        identity is None
        or not (ours_for_sure or observation.owner == obj.metadata.uid)
        or identity == obj.metadata.annotations.get(ANNOTATION_EXTERNAL_IDENTITY)
    ):
        return annotations
    return {**(annotations or {}), ANNOTATION_EXTERNAL_IDENTITY: identity}


async def plan(obj: AnyResource, external: ExternalClient, *, provider_decides: bool = False) -> Planned:
    """The action a run would take for ``obj`` now; observing only (bound it with
    ``asyncio.timeout``: a hung observe is the caller's to cut short)."""
    key, annotations = obj.key, obj.metadata.annotations
    if annotations.get(ANNOTATION_PAUSED) == "true":
        return Planned(key, "nothing", "paused by annotation")
    deletion = annotations.get(ANNOTATION_DELETION_POLICY, "Delete")
    management = annotations.get(ANNOTATION_MANAGEMENT_POLICY, "Full")
    deleting = obj.metadata.deletion_timestamp is not None
    if deleting and FINALIZER not in obj.metadata.finalizers:
        return Planned(key, "nothing", "being deleted; the engine has nothing left to do")
    if deleting and not (deletion == "Delete" and management == "Full"):
        return Planned(key, "orphan", f"deletion policy {deletion}, management policy {management}")
    try:
        observation = await external.observe(obj)
    except Exception as exc:  # noqa: BLE001 - reported as the object's plan, not raised
        return Planned(key, "error", " ".join((str(exc) or type(exc).__name__).split()))
    if deleting:
        if observation.exists and not owned(obj, observation, provider_decides=provider_decides):
            return Planned(key, "refuse", "not ours: the object goes, the external resource is left alone")
        if observation.exists:
            return Planned(key, "delete")
        return Planned(key, "nothing", "being deleted; already gone outside")
    if management == "ObserveOnly":
        return Planned(
            key, "nothing", "observe only: " + ("exists" if observation.exists else "does not exist")
        )
    if observation.exists and not owned(obj, observation, provider_decides=provider_decides):
        if annotations.get(ANNOTATION_ADOPT) == "true":
            return Planned(key, "adopt", "takes over the existing external resource (reconcile.dev/adopt)")
        return Planned(key, "refuse", "exists and was not created by this object (NotOwned): left alone")
    if not observation.exists:
        return Planned(key, "create")
    if not observation.up_to_date:
        return Planned(key, "update", observation.diff)
    if ANNOTATION_CREATE_SUCCEEDED not in annotations:
        how = "found after an interrupted create" if ANNOTATION_CREATE_PENDING in annotations else ""
        return Planned(key, "adopt", how or observation.found or "found in place, marked as this resource's")
    return Planned(key, "nothing")
