"""A terminal error in status: what the controller records when a reconciler raises
:class:`~reconcile.TerminalError` without saying so in status itself, and clears when a
later reconcile of the object succeeds.

The record is the ``Synced`` condition (``False``, reason ``TerminalError``, the error's
message, the object's generation), the condition a managed kind's reconciler keeps, so
``get``, ``describe`` and ``wait_ready``'s timeout message show it the same way. A
reconciler that wrote ``Synced=False`` for the current generation already (the managed
reconciler always does) is left to its own words; a ``Synced`` condition the reconciler
wrote is never cleared by the controller, only the one it recorded itself.
"""

from __future__ import annotations

import datetime

import attrs

from reconcile.model.conditions import Condition, ConditionStatus, Status, set_condition
from reconcile.model.resource import AnyResource

__all__ = ["CONTROLLER_MANAGER", "TERMINAL_REASON", "cleared", "records_terminal", "with_terminal"]

#: The reason of the ``Synced=False`` condition the controller records.
TERMINAL_REASON = "TerminalError"
#: The field manager of the controller's own status writes. They never trigger a
#: reconcile: the record is bookkeeping, not a change to act on.
CONTROLLER_MANAGER = "reconcile-controller"


def records_terminal(obj: AnyResource) -> bool:
    """Whether ``obj``'s status holds a terminal error the controller recorded."""
    synced = _synced(obj)
    return synced is not None and synced.reason == TERMINAL_REASON and synced.status == ConditionStatus.FALSE


def with_terminal(obj: AnyResource, message: str, now: datetime.datetime) -> AnyResource | None:
    """``obj`` with the terminal error in status, or None when there is nothing to write:
    its kind has no conditions, or ``Synced`` already says False for this generation."""
    if not isinstance(obj.status, Status):
        return None
    generation = obj.metadata.generation
    synced = obj.status.condition("Synced")
    if (
        synced is not None
        and synced.status == ConditionStatus.FALSE
        and synced.observed_generation == generation
    ):
        return None  # the reconciler said so itself (or this very record is there)
    condition = Condition("Synced", ConditionStatus.FALSE, TERMINAL_REASON, message, now, generation)
    return _with_condition(obj, condition)


def cleared(obj: AnyResource, now: datetime.datetime) -> AnyResource | None:
    """``obj`` with the recorded terminal error replaced by ``Synced=True``
    (``ReconcileSuccess``), or None when no such record is there."""
    if not records_terminal(obj):
        return None
    condition = Condition(
        "Synced", ConditionStatus.TRUE, "ReconcileSuccess", "", now, obj.metadata.generation
    )
    return _with_condition(obj, condition)


def _synced(obj: AnyResource) -> Condition | None:
    status = obj.status
    return status.condition("Synced") if isinstance(status, Status) else None


def _with_condition(obj: AnyResource, condition: Condition) -> AnyResource:
    status = obj.status
    return attrs.evolve(
        obj, status=attrs.evolve(status, conditions=set_condition(status.conditions, condition))
    )
