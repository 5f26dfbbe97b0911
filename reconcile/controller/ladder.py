"""The decision ladder of the managed lifecycle: what to do for one object now, given its
kind's behaviour (:class:`~reconcile.model.kinds.Behaviour`) and what observing found (or
None before any look). Pure: no I/O, no store, no provider call. The managed reconciler
executes the step it returns, :func:`~reconcile.controller.planning.plan` (``reconcile
plan``) prints it, and the reconciler's steady memo asks it whether an object is steady
(:data:`STEADY`, and at each poll :func:`steady_again`): one ladder, so ``plan`` says what
``run`` does by construction.

The rungs, in order:

1. **Paused** (annotation ``reconcile.dev/paused: "true"``).
2. **InvalidPolicy**: a deletion or management policy annotation out of its set.
3. **Deleting**: the engine's finalizer gone already (:class:`Finalized`: nothing left to
   do); a policy other than ``Delete`` + ``Full`` (:class:`Orphan`); an exclusive delete (an
   ``EXCLUSIVE`` behaviour) of a
   resource whose create was recorded (:class:`DeleteBlind`: no look first, the provider's
   delete checks whose it is); otherwise, after a look: somebody else's
   (:class:`SkipDelete`), there (:class:`Delete`), gone already (:class:`AlreadyGone`).
4. **Create without a look** (:class:`CreateBlind`): a ``Full`` object of a kind whose
   create is exclusive (an ``EXCLUSIVE`` behaviour) never reconciled, with no record of a
   create or an adoption (the provider's create refuses a resource that is not ours).
5. Otherwise a look is needed (:class:`NeedsObservation`), and then: ``ObserveOnly``
   (:class:`ObserveOnly`); there and not ours (:class:`Adopt` when asked by
   ``reconcile.dev/adopt``, else :class:`NotOwned`); absent (:class:`Create`, or
   :class:`CreatePendingUnknown` when an interrupted create of a kind whose identity is not
   deterministic may have made it); differing from the spec (:class:`Update`); up to date
   but its create never recorded (:class:`RecordFound`); :class:`Steady`.

The blind rungs apply only before a look: given an observation the ladder decides by it
(what the provider's exclusive call would find), which is what ``plan`` reports for them.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from reconcile.model.external import (
    ANNOTATION_ADOPT,
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_CREATE_SUCCEEDED,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_MANAGEMENT_POLICY,
    ANNOTATION_PAUSED,
    DELETION_POLICIES,
    FINALIZER,
    MANAGEMENT_POLICIES,
    Observation,
    ours,
)
from reconcile.model.kinds import Behaviour
from reconcile.model.resource import AnyResource

__all__ = [
    "CREATE_PENDING_UNKNOWN_MESSAGE",
    "INVALID_POLICY_MESSAGE",
    "NO_FLAGS",
    "STEADY",
    "Adopt",
    "AlreadyGone",
    "Create",
    "CreateBlind",
    "CreatePendingUnknown",
    "Delete",
    "DeleteBlind",
    "Finalized",
    "Flags",
    "InvalidPolicy",
    "NeedsObservation",
    "NotOwned",
    "ObserveOnly",
    "Orphan",
    "Paused",
    "RecordFound",
    "SkipDelete",
    "Steady",
    "Step",
    "Update",
    "decide",
    "owned",
    "steady_again",
]


class Flags(Protocol):
    """What the ladder reads of a kind's behaviour: the promises a
    :class:`~reconcile.model.kinds.Behaviour` makes, derived from the one choice (a
    Behaviour and a :class:`~reconcile.model.Kind` both have them)."""

    @property
    def deterministic_identity(self) -> bool: ...  # noqa: D102
    @property
    def exclusive_create(self) -> bool: ...  # noqa: D102
    @property
    def exclusive_delete(self) -> bool: ...  # noqa: D102


# -- the steps -------------------------------------------------------------------------------


@attrs.frozen
class Paused:
    """Reconciliation is paused by annotation: say so, do nothing else."""


@attrs.frozen
class InvalidPolicy:
    """A policy annotation is not one the engine knows: say so and stop."""

    message: str


@attrs.frozen
class Finalized:
    """Being deleted, and the engine's finalizer is gone already: nothing left to do."""


@attrs.frozen
class Orphan:
    """Being deleted with a policy that keeps the external resource: release the object."""

    deletion: str
    management: str


@attrs.frozen
class DeleteBlind:
    """Being deleted: delete without a look first (the kind's delete is exclusive and the
    create was recorded)."""


@attrs.frozen
class NeedsObservation:
    """The next rung depends on what observing finds (``deleting``: for a delete)."""

    deleting: bool


@attrs.frozen
class SkipDelete:
    """Being deleted, and the external resource is somebody else's: release the object,
    leave the resource."""


@attrs.frozen
class Delete:
    """Being deleted, and the external resource is there and ours: delete it."""


@attrs.frozen
class AlreadyGone:
    """Being deleted, and the external resource is gone already: release the object."""


@attrs.frozen
class CreateBlind:
    """Create without a look first (the kind's create is exclusive, the object never
    reconciled, nothing recorded of a create or an adoption)."""


@attrs.frozen
class ObserveOnly:
    """Management policy ObserveOnly: report what was observed, change nothing."""

    exists: bool


@attrs.frozen
class Adopt:
    """There, not ours, and ``reconcile.dev/adopt`` asks to take it over."""


@attrs.frozen
class NotOwned:
    """There and not ours: leave it alone and say so."""


@attrs.frozen
class CreatePendingUnknown:
    """Absent, after a create interrupted before its outcome was recorded, of a kind whose
    identity is not deterministic: it may exist under another name; stop."""

    message: str


@attrs.frozen
class Create:
    """Absent: create it (``recreate``: its create was recorded, so it was deleted out of
    band)."""

    recreate: bool


@attrs.frozen
class Update:
    """There, ours, differing from the spec: update it (``drift``: the spec had not changed
    since the engine last made it so: the world moved). ``add_finalizer``: the engine's
    finalizer goes on first."""

    diff: str
    drift: bool
    add_finalizer: bool


@attrs.frozen
class RecordFound:
    """There, ours, up to date, and its create never recorded (an interrupted create, or
    found in place as ours): record it, ``how``."""

    how: str
    add_finalizer: bool


@attrs.frozen
class Steady:
    """There, ours, up to date, recorded: nothing to do but report it."""

    add_finalizer: bool


Step = (
    Paused
    | InvalidPolicy
    | Finalized
    | Orphan
    | DeleteBlind
    | NeedsObservation
    | SkipDelete
    | Delete
    | AlreadyGone
    | CreateBlind
    | ObserveOnly
    | Adopt
    | NotOwned
    | CreatePendingUnknown
    | Create
    | Update
    | RecordFound
    | Steady
)

INVALID_POLICY_MESSAGE = (
    f"{ANNOTATION_DELETION_POLICY} must be one of {', '.join(DELETION_POLICIES)} and "
    f"{ANNOTATION_MANAGEMENT_POLICY} one of {', '.join(MANAGEMENT_POLICIES)}"
)
CREATE_PENDING_UNKNOWN_MESSAGE = (
    "a create was interrupted before its outcome was recorded, and this kind's external "
    "identity is not deterministic: the resource may or may not exist. Check the external "
    f"system, then remove the {ANNOTATION_CREATE_PENDING} annotation to create again"
)
#: The behaviour that promises least (``plan`` of a caller that names no kind).
NO_FLAGS: Flags = Behaviour.ASSIGNED_NAME
_PAUSED = Paused()
_INVALID_POLICY = InvalidPolicy(INVALID_POLICY_MESSAGE)
_FINALIZED = Finalized()
_DELETE_BLIND = DeleteBlind()
_OBSERVE_TO_DELETE = NeedsObservation(deleting=True)
_OBSERVE = NeedsObservation(deleting=False)
_SKIP_DELETE = SkipDelete()
_DELETE = Delete()
_ALREADY_GONE = AlreadyGone()
_CREATE_BLIND = CreateBlind()
_ADOPT = Adopt()
_NOT_OWNED = NotOwned()
_CREATE_PENDING_UNKNOWN = CreatePendingUnknown(CREATE_PENDING_UNKNOWN_MESSAGE)
#: The step of an object with nothing to do (the steady memo's question: ``is STEADY``).
STEADY = Steady(add_finalizer=False)
_STEADY_UNFINALIZED = Steady(add_finalizer=True)


def owned(obj: AnyResource, observation: Observation, *, provider_decides: bool = False) -> bool:
    """Whether the external resource observed is ``obj``'s, by the one ownership rule
    (:func:`reconcile.ours`: its owner mark, or for an unmarked one the identity the
    engine recorded at its own last create or update), or it is unmarked while a create
    of it was begun and never recorded (a crash between the provider's create and its
    mark). For a kind whose create is exclusive (``provider_decides``: an ``EXCLUSIVE``
    behaviour) a create begun
    proves nothing about an unmarked resource (it is made without a look first): the
    provider reports an interrupted create of its own as marked."""
    if ours(obj, observation.owner, observation.identity):
        return True
    annotations = obj.metadata.annotations
    return (
        observation.owner is None
        and not provider_decides
        and ANNOTATION_CREATE_PENDING in annotations
        and ANNOTATION_CREATE_SUCCEEDED not in annotations
    )


def decide(obj: AnyResource, kind: Flags, observation: Observation | None) -> Step:
    """The step the managed lifecycle takes for ``obj`` of ``kind`` now, given what
    observing found (None: not observed yet)."""
    meta = obj.metadata
    annotations = meta.annotations
    if annotations.get(ANNOTATION_PAUSED) == "true":
        return _PAUSED
    deletion = annotations.get(ANNOTATION_DELETION_POLICY, "Delete")
    management = annotations.get(ANNOTATION_MANAGEMENT_POLICY, "Full")
    if deletion not in DELETION_POLICIES or management not in MANAGEMENT_POLICIES:
        return _INVALID_POLICY
    if meta.deletion_timestamp is not None:
        if FINALIZER not in meta.finalizers:
            return _FINALIZED
        if deletion != "Delete" or management != "Full":
            return Orphan(deletion, management)
        if observation is None:
            # An exclusive delete checks whose the resource is itself: no look first, when
            # its create was recorded (an interrupted one may have left it unmarked).
            if (
                kind.exclusive_delete
                and ANNOTATION_CREATE_SUCCEEDED in annotations
                and ANNOTATION_CREATE_PENDING not in annotations
            ):
                return _DELETE_BLIND
            return _OBSERVE_TO_DELETE
        if not observation.exists:
            return _ALREADY_GONE
        if not owned(obj, observation, provider_decides=kind.exclusive_create):
            return _SKIP_DELETE
        return _DELETE
    if observation is None:
        if management == "Full" and _unrecorded(obj, kind):
            return _CREATE_BLIND
        return _OBSERVE
    if management == "ObserveOnly":
        return ObserveOnly(observation.exists)
    if not observation.exists:
        succeeded = ANNOTATION_CREATE_SUCCEEDED in annotations
        if not succeeded and ANNOTATION_CREATE_PENDING in annotations and not kind.deterministic_identity:
            return _CREATE_PENDING_UNKNOWN
        return Create(recreate=succeeded)
    if not owned(obj, observation, provider_decides=kind.exclusive_create):
        return _ADOPT if annotations.get(ANNOTATION_ADOPT) == "true" else _NOT_OWNED
    add_finalizer = FINALIZER not in meta.finalizers  # (a create adds it with its marker)
    if not observation.up_to_date:
        drift = obj.status.observed_generation == meta.generation
        return Update(observation.diff, drift, add_finalizer)
    if ANNOTATION_CREATE_SUCCEEDED not in annotations:
        # A create whose success was not recorded (a crash came between), or an external
        # resource the provider reports as ours already: record it now.
        how = (
            "found after an interrupted create"
            if ANNOTATION_CREATE_PENDING in annotations
            else observation.found or "found in place, marked as this resource's"
        )
        return RecordFound(how, add_finalizer)
    return _STEADY_UNFINALIZED if add_finalizer else STEADY


def steady_again(obj: AnyResource, observation: Observation) -> bool:
    """Whether ``obj``, for which :func:`decide` answered :data:`STEADY` with an earlier
    observation, is steady with this one (``decide(obj, kind, observation) is STEADY``).

    Only the rungs that read the observation are climbed again (there, ours, up to date):
    those of the object alone give what they gave while it is the same object. The steady
    memo's question at every poll and resync of a converged object. Ours by
    :func:`reconcile.ours` alone, whatever the kind: :func:`owned`'s interrupted create is
    no case of a steady object, whose create was recorded.
    """
    return (
        observation.exists and observation.up_to_date and ours(obj, observation.owner, observation.identity)
    )


def _unrecorded(obj: AnyResource, kind: Flags) -> bool:
    """Whether to create without observing first: the provider's create refuses a
    resource that is not ours (an ``EXCLUSIVE`` behaviour), the object was never reconciled
    (no Synced condition: after a refusal the next passes observe, as for any
    NotOwned), and nothing says it was ever created or is to be adopted."""
    annotations = obj.metadata.annotations
    return (
        kind.exclusive_create
        and not (
            ANNOTATION_CREATE_SUCCEEDED in annotations
            or ANNOTATION_CREATE_PENDING in annotations
            or ANNOTATION_ADOPT in annotations
        )
        and obj.status.condition("Synced") is None
    )
