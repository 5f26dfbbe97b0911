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
from reconcile.model.resource import Resource

__all__ = ["Action", "Verdict", "new_status"]


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
