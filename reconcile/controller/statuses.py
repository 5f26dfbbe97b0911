"""The status the managed reconciler writes: ``observed_generation``, the ``Synced`` and
``Ready`` conditions and the observed fields, computed from what it found, and nothing
at all when that is what the status already says (a poll or a resync writes nothing)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import attrs

from reconcile.model.conditions import Condition, ConditionStatus, set_condition
from reconcile.model.external import Observation
from reconcile.model.resource import AnyResource, Resource

__all__ = ["Action", "Verdict", "cannot_tell", "new_status", "repeats"]


@attrs.frozen
class Verdict:
    """What a condition should say: its status, reason and message."""

    status: ConditionStatus
    reason: str
    message: str = ""


@attrs.frozen
class Action:
    """An action event the reconciler records (``ActionType``), with its message."""

    type: str
    message: str = ""


def new_status(
    obj: Resource[Any, Any],
    observation: Observation | None,
    wall: Callable[[], float],
    *,
    synced: Verdict,
    ready: Verdict | None = None,
) -> Any:
    """The status these conditions make (a changed condition stamped with ``wall()``,
    seconds since the epoch), or None when it equals the current one."""
    generation = obj.metadata.generation
    status = obj.status
    if _unchanged(status, generation, observation, synced, ready):
        return None  # the common case of a poll or resync: build nothing, write nothing
    stamp = datetime.datetime.fromtimestamp(wall(), datetime.UTC)
    conditions = status.conditions
    for type_, value in (("Synced", synced), ("Ready", ready)):
        if value is not None:
            condition = Condition(type_, value.status, value.reason, value.message, stamp, generation)
            conditions = set_condition(conditions, condition)
    changes: dict[str, Any] = {"conditions": conditions, "observed_generation": generation}
    if observation is not None and hasattr(status, "at_provider"):
        changes["at_provider"] = dict(observation.observed)
    new = attrs.evolve(status, **changes)
    return None if new == status else new


def _unchanged(
    status: Any, generation: int, observation: Observation | None, synced: Verdict, ready: Verdict | None
) -> bool:
    if status.observed_generation != generation:
        return False
    if observation is not None and getattr(status, "at_provider", None) not in (None, observation.observed):
        return False
    for type_, value in (("Synced", synced), ("Ready", ready)):
        if value is None:
            continue
        current = status.condition(type_)
        if current is None or (current.status, current.reason, current.message) != (
            value.status,
            value.reason,
            value.message,
        ):
            return False
        if current.observed_generation != generation:
            return False
    return True


def repeats(obj: AnyResource, exc: BaseException) -> bool:
    """Whether ``exc`` is the failure the object's Synced condition already reports
    for its generation: a retry that fails the same way is not news, and is not
    recorded again (a bucket that stays "not empty" through every backoff would
    otherwise write two events per try). Its first occurrence, and any change, are."""
    synced = obj.status.condition("Synced")
    return (
        synced is not None
        and synced.status is ConditionStatus.FALSE
        and synced.reason == "ReconcileError"
        and synced.observed_generation == obj.metadata.generation
        and synced.message == (str(exc) or type(exc).__name__)
    )


_LAST_KNOWN = "; last known Ready "


def cannot_tell(obj: AnyResource, exc: BaseException) -> Verdict:
    """Ready=Unknown after a failed observe, saying why and, when it was Ready before,
    since when it had been (kept through later failures)."""
    message = f"cannot tell: observing failed: {str(exc) or type(exc).__name__}"
    ready = obj.status.condition("Ready")
    if ready is not None and ready.status is ConditionStatus.TRUE and ready.last_transition_time is not None:
        since = ready.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ")
        message += f"{_LAST_KNOWN}(since {since})"
    elif ready is not None and ready.status is ConditionStatus.UNKNOWN and _LAST_KNOWN in ready.message:
        message += _LAST_KNOWN + ready.message.split(_LAST_KNOWN, 1)[1]
    return Verdict(ConditionStatus.UNKNOWN, "ObserveFailed", message)
