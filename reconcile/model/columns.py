"""Printer columns: what ``reconcile get`` shows of a kind beside its name, as a CRD's
``additionalPrinterColumns`` tell kubectl.

A kind declares its columns with :class:`PrinterColumn`: a header, a JSONPath-like path
into the object as documents spell it (``.spec.title``, ``.spec.pages[0]``,
``.status.conditions[?(@.type=="Ready")].reason``), a type that says how a value prints,
and a priority (0: always shown; more: only with ``-o wide``). The path is parsed when the
kind is declared, so a mistake in it fails at import, not at the first ``get``; reading it
is a walk of dictionaries and lists, with no JSONPath library loaded for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

__all__ = ["ColumnType", "PrinterColumn"]

ColumnType = Literal["string", "integer", "number", "boolean", "date"]
_TYPES = ("string", "integer", "number", "boolean", "date")

# One step of a path: ``.name``, ``[3]``, or ``[?(@.field=="value")]``.
_STEP = re.compile(
    r"""\.(?P<field>[A-Za-z_][A-Za-z0-9_-]*)
      | \[(?P<index>-?\d+)\]
      | \[\?\(@\.(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*==\s*(?P<quote>["'])(?P<value>[^"']*)(?P=quote)\)\]""",
    re.VERBOSE,
)

Step = tuple[Literal["field"], str] | tuple[Literal["index"], int] | tuple[Literal["match"], tuple[str, str]]


def parse_path(path: str) -> tuple[Step, ...]:
    """The steps of a column's path; ValueError naming the part it cannot read."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):  # kubectl's braces are accepted
        text = text[1:-1]
    if not text.startswith((".", "[")):
        raise ValueError(f"column path {path!r}: starts with a dot (.spec.title)")
    steps: list[Step] = []
    position = 0
    while position < len(text):
        found = _STEP.match(text, position)
        if found is None:
            raise ValueError(f"column path {path!r}: cannot read {text[position:]!r}")
        if found["field"] is not None:
            steps.append(("field", found["field"]))
        elif found["index"] is not None:
            steps.append(("index", int(found["index"])))
        else:
            steps.append(("match", (found["key"], found["value"])))
        position = found.end()
    return tuple(steps)


def _walk(data: Any, steps: Sequence[Step]) -> Any:
    current = data
    for step in steps:
        if step[0] == "field":
            current = current.get(step[1]) if isinstance(current, Mapping) else None
        elif step[0] == "index":
            index = step[1]
            in_range = isinstance(current, list) and -len(current) <= index < len(current)
            current = current[index] if in_range else None
        else:
            key, value = step[1]
            items = current if isinstance(current, list) else []
            current = next((i for i in items if isinstance(i, Mapping) and str(i.get(key)) == value), None)
        if current is None:
            return None
    return current


@attrs.frozen
class PrinterColumn:
    """A column of ``reconcile get`` for a kind (kubectl's additionalPrinterColumns)."""

    #: The header (printed upper case, as kubectl does).
    name: str
    #: Where the value is, in the object as documents spell it: ``.spec.title``.
    json_path: str
    #: How the value prints: ``date`` as an age (``5m``), the others as they are.
    type: ColumnType = "string"
    #: What the column shows (``reconcile explain`` prints it).
    description: str = ""
    #: 0: in every table; more: only with ``-o wide``.
    priority: int = 0
    _steps: tuple[Step, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(
                f"column {self.name!r}: type must be one of {', '.join(_TYPES)}, not {self.type!r}"
            )
        if not self.name:
            raise ValueError("a printer column needs a name")
        object.__setattr__(self, "_steps", parse_path(self.json_path))

    def value(self, document: Mapping[str, Any]) -> Any:
        """The value at this column's path in ``document`` (None where there is none)."""
        return _walk(document, self._steps)

    def text(self, document: Mapping[str, Any]) -> str:
        """The cell: empty for no value, a list's items joined by commas, a mapping as
        compact JSON; a ``date`` is shown as an age by the table, which knows now."""
        value = self.value(document)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            return ",".join(str(v) for v in value)
        if isinstance(value, Mapping | list):
            return json.dumps(value, separators=(",", ":"), sort_keys=True)
        return str(value)
