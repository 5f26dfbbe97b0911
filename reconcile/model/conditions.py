"""Conditions and the status every kind shares.

A condition is one observation of the object: ``Ready`` (the external resource is usable)
and ``Synced`` (the last reconcile succeeded) at least. ``reason`` is CamelCase and
machine-readable; ``message`` is for humans. There is no ``phase``: conditions compose,
phases do not.
"""

from __future__ import annotations

import datetime
import enum

import attrs

__all__ = ["Condition", "ConditionStatus", "Status", "set_condition"]


class ConditionStatus(enum.StrEnum):
    """The three values of a condition's ``status``."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@attrs.frozen
class Condition:
    """One observed condition of an object."""

    type: str
    status: ConditionStatus
    reason: str = ""
    message: str = ""
    last_transition_time: datetime.datetime | None = None
    observed_generation: int = 0


@attrs.frozen
class Status:
    """The status fields shared by every kind; a kind's status class may extend it."""

    observed_generation: int = 0
    conditions: tuple[Condition, ...] = ()

    def condition(self, type_: str) -> Condition | None:
        """Return the condition of the given type, or None."""
        for condition in self.conditions:
            if condition.type == type_:
                return condition
        return None


def set_condition(conditions: tuple[Condition, ...], new: Condition) -> tuple[Condition, ...]:
    """Return ``conditions`` with ``new`` in place of the condition of its type.

    ``last_transition_time`` changes only when the condition's status does: a condition
    re-asserted with the same status keeps its time, so a status that says the same thing
    twice is equal and appends nothing.
    """
    result = []
    replaced = False
    for condition in conditions:
        if condition.type != new.type:
            result.append(condition)
            continue
        replaced = True
        if condition.status == new.status:
            new = attrs.evolve(new, last_transition_time=condition.last_transition_time)
        result.append(new)
    if not replaced:
        result.append(new)
    return tuple(sorted(result, key=lambda c: c.type))
