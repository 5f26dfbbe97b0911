"""Planning: what the managed reconciler would do for an object, found by observing the
external system and acting on nothing (Terraform's ``plan``).

:func:`plan` asks the managed reconciler's own decision ladder
(:mod:`reconcile.controller.ladder`) for the step a run takes now, observing (the
provider's ``observe`` only, which never changes anything) where the step depends on what
is outside, and writes nothing to the store. A step a run takes without a look (an
exclusive create or delete: the provider's call checks whose the resource is) is
described by what the look finds, which is what that call meets. What it returns is the
step and its action: ``create``, ``update`` (with the provider's diff), ``delete``,
``adopt`` (take over, or record an external resource found as ours), ``orphan`` (let the
object go and keep the resource), ``refuse`` (it exists and is not ours: it is left
alone), ``nothing``, or ``error`` (observing failed, or a run would stop: an invalid
policy, an interrupted create it cannot retry).
"""

from __future__ import annotations

import attrs

from reconcile.controller.ladder import (
    NO_FLAGS,
    Adopt,
    AlreadyGone,
    Create,
    CreateBlind,
    CreatePendingUnknown,
    Delete,
    DeleteBlind,
    Finalized,
    Flags,
    InvalidPolicy,
    NeedsObservation,
    NotOwned,
    ObserveOnly,
    Orphan,
    Paused,
    RecordFound,
    SkipDelete,
    Steady,
    Step,
    Update,
    decide,
)
from reconcile.model.external import ExternalClient
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource

__all__ = ["ACTIONS", "CHANGES", "Planned", "describe", "plan"]

#: Every action, in the order a summary lists them.
ACTIONS = ("create", "update", "delete", "adopt", "orphan", "refuse", "nothing", "error")
#: The actions that change something outside or in the store.
CHANGES = frozenset({"create", "update", "delete", "adopt", "orphan"})


@attrs.frozen
class Planned:
    """What a run would do for one object, and why (a diff for an update); ``step``: the
    ladder's step a run takes (None: no answer in time)."""

    key: ObjectKey
    action: str
    detail: str = ""
    step: Step | None = attrs.field(default=None, eq=False)


def describe(step: Step) -> tuple[str, str]:
    """The action and detail ``plan`` prints for a step decided after a look, or before
    one when it needs none."""
    if isinstance(step, Paused):
        return "nothing", "paused by annotation"
    if isinstance(step, InvalidPolicy | CreatePendingUnknown):
        return "error", step.message
    if isinstance(step, Finalized):
        return "nothing", "being deleted; the engine has nothing left to do"
    if isinstance(step, Orphan):
        return "orphan", f"deletion policy {step.deletion}, management policy {step.management}"
    if isinstance(step, SkipDelete):
        return "refuse", "not ours: the object goes, the external resource is left alone"
    if isinstance(step, Delete | DeleteBlind):
        return "delete", ""
    if isinstance(step, AlreadyGone):
        return "nothing", "being deleted; already gone outside"
    if isinstance(step, ObserveOnly):
        return "nothing", "observe only: " + ("exists" if step.exists else "does not exist")
    if isinstance(step, Adopt):
        return "adopt", "takes over the existing external resource (reconcile.dev/adopt)"
    if isinstance(step, NotOwned):
        return "refuse", "exists and was not created by this object (NotOwned): left alone"
    if isinstance(step, Create | CreateBlind):
        return "create", ""
    if isinstance(step, Update):
        return "update", step.diff
    if isinstance(step, RecordFound):
        return "adopt", step.how
    if isinstance(step, Steady):
        return "nothing", ""
    return "error", "observing is needed"  # NeedsObservation: plan always observes then


async def plan(obj: AnyResource, external: ExternalClient, kind: Flags = NO_FLAGS) -> Planned:
    """The step a run would take for ``obj`` of ``kind`` now, and its action; observing
    only (bound it with ``asyncio.timeout``: a hung observe is the caller's to cut
    short)."""
    step = decide(obj, kind, None)
    if not isinstance(step, NeedsObservation | CreateBlind | DeleteBlind):
        return Planned(obj.key, *describe(step), step=step)
    try:
        observation = await external.observe(obj)
    except Exception as exc:  # noqa: BLE001 - reported as the object's plan, not raised
        return Planned(obj.key, "error", " ".join((str(exc) or type(exc).__name__).split()), step=step)
    seen = decide(obj, kind, observation)
    # A blind step is what a run takes; the look tells what its call will meet.
    return Planned(
        obj.key, *describe(seen), step=step if isinstance(step, CreateBlind | DeleteBlind) else seen
    )
