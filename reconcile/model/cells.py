"""The cells of a table of objects: what ``reconcile get`` prints and what the HTTP API's
``Table`` responses carry (``kubectl get``), from one home so the two agree.

A row is the object's name, its kind's printer columns (a ``date`` shown as an age),
then READY, SYNCED and REASON (:func:`readiness`) and AGE; ``-o wide`` adds the
generations and the Synced message (:func:`message_cell`). Every function here works on
plain values (a document, a condition's fields), so the CLI, which holds structured
objects, and the HTTP API, which holds documents, both call them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from reconcile.model.columns import PrinterColumn
from reconcile.model.printing import printable

__all__ = ["age", "column_cells", "message_cell", "one_line", "readiness"]

#: The longest Synced message a wide table shows whole.
MESSAGE_WIDTH = 60


def age(since: datetime.datetime | None, now: datetime.datetime) -> str:
    """``42s``, ``5m``, ``3h``, ``12d``: how long ago."""
    if since is None:
        return "<unknown>"
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 or (unit == "m" and seconds >= size):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def one_line(text: str) -> str:
    """A message whole, on one line: its lines joined by a blank (a provider's error may
    span several, and its first line alone can say nothing, "Parameter validation
    failed:")."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def message_cell(message: str) -> str:
    """A wide table's MESSAGE: on one line, cut to :data:`MESSAGE_WIDTH` characters."""
    text = one_line(message)
    return text if len(text) <= MESSAGE_WIDTH else text[: MESSAGE_WIDTH - 3] + "..."


def column_cells(
    columns: Sequence[PrinterColumn], data: Mapping[str, Any], now: datetime.datetime
) -> list[str]:
    """One object's cells of its kind's printer columns (a ``date`` as an age)."""
    cells = []
    for column in columns:
        value = column.value(data) if column.type == "date" else None
        if isinstance(value, str):
            try:
                when = datetime.datetime.fromisoformat(value)
            except ValueError:
                when = None
            cells.append(printable(value) if when is None else age(when, now))
        else:
            cells.append(printable(one_line(column.text(data))))
    return cells


def readiness(
    conditions: Mapping[str, tuple[str, str]], *, current: bool, deleting: bool
) -> tuple[str, str, str]:
    """READY, SYNCED and the reason worth reading (the first of Synced and Ready not
    True), from each condition's ``(status, reason)`` by type: ``Updating`` for a Ready
    that has not seen the current generation (not ``current``), ``Deleting`` as the
    reason of an object being deleted."""
    ready, synced = conditions.get("Ready"), conditions.get("Synced")
    ready_text = "Unknown" if ready is None else ready[0]
    if ready is not None and ready[0] == "True" and not current:
        ready_text = "Updating"
    reason = ""
    for condition in (synced, ready):
        if condition is not None and condition[0] != "True":
            reason = condition[1]
            break
    if deleting:
        reason = "Deleting"
    return ready_text, "Unknown" if synced is None else synced[0], reason
