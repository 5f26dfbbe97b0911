"""Output: tables for people, YAML and JSON for scripts.

``-o json`` is the stable, documented form: an object is its stored body (``apiVersion``,
``kind``, ``metadata``, ``spec``, ``status``, Kubernetes' camelCase keys, RFC 3339 UTC
times); a list
is ``{"apiVersion": "v1", "kind": "List", "items": [...]}``; ``history`` and ``watch``
give events as ``{"revision", "time", "type", "actor", "user", "kind", "namespace",
"name", "uid", "data", "changes"}`` (``actor`` the field manager, ``user`` who asked,
null when not recorded). Fields are only ever added; they were renamed once, from
snake_case to camelCase (see docs/explanation/spelling.md).
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconcile.model import Event, PrinterColumn, cells
from reconcile.model.cells import age, column_cells, one_line
from reconcile.model.events import event_data
from reconcile.model.omitting import omit_empty_metadata, omit_null_fields
from reconcile.model.printing import printable
from reconcile.model.resource import AnyResource

if TYPE_CHECKING:
    import yaml

    from reconcile.api import Client

__all__ = [
    "age",
    "as_json",
    "as_json_line",
    "as_yaml",
    "column_cells",
    "event_data",
    "event_detail",
    "object_data",
    "one_line",
    "printer_columns",
    "qualified",
    "readiness",
    "table",
    "who",
]


def table(header: Sequence[str], rows: Iterable[Sequence[str]], min_widths: Sequence[int] = ()) -> str:
    """Columns aligned with two spaces, kubectl style; each at least as wide as
    ``min_widths`` says (``get -w``: a row lined up with the table drawn before it)."""
    rows = [list(header), *(list(r) for r in rows)]
    widths = column_widths(rows)
    widths = [max(w, m) for w, m in zip(widths, [*min_widths, *[0] * len(widths)], strict=False)]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    """The width of each column of ``rows`` (the header among them)."""
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []


def readiness(obj: AnyResource) -> tuple[str, str, str]:
    """READY, SYNCED and the reason worth reading (the first condition not True)."""
    conditions = {c.type: (c.status.value, c.reason) for c in getattr(obj.status, "conditions", ())}
    return cells.readiness(
        conditions,
        current=getattr(obj.status, "observed_generation", None) == obj.metadata.generation,
        deleting=obj.metadata.deletion_timestamp is not None,
    )


def qualified(kind: str, api_group: str, name: str) -> str:
    """``file.files.reconcile.dev/index``: how kubectl names an object in its output (a
    name that does not print, escaped: :func:`~reconcile.model.printing.printable`)."""
    return f"{kind.lower()}.{api_group}/{printable(name)}"


def object_data(client: Client, obj: AnyResource) -> dict[str, Any]:
    """The object as plain data (its stored body)."""
    data: dict[str, Any] = client.converter.unstructure(obj)
    return data


def document_data(client: Client, obj: AnyResource) -> dict[str, Any]:
    """The object as a document to show (``get -o yaml|json``, ``edit``), as kubectl
    shows one: :func:`object_data` without null optional fields and empty metadata
    (:mod:`reconcile.model.omitting`; what is left out reads back as it was)."""
    data = object_data(client, obj)
    data["metadata"] = omit_empty_metadata(data.get("metadata") or {})
    if "spec" in data:
        data["spec"] = omit_null_fields(data["spec"], type(obj.spec))
    if data.get("status") is not None:
        data["status"] = omit_null_fields(data["status"], type(obj.status))
    return data


def who(event: Event) -> str:
    """Who an event is by, for a table: the user who asked for it when recorded (the
    CLI's ``--as``), else its field manager (a controller's name)."""
    return printable(event.user) if event.user else printable(event.actor)


def _short(value: object) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."  # noqa: PLR2004


_BOOKKEEPING = (
    "metadata.managedFields",
    "metadata.annotations.reconcile.dev/external-create",
    "status.conditions",
)


def event_detail(event: Event) -> str:
    """What an event says, for a person: its message, or the fields it changed (the
    engine's own bookkeeping left out), and the conditions when they changed."""
    if event.data and event.data.get("message"):
        return str(event.data["message"])
    interesting = [c for c in event.changes if not c.path.startswith(_BOOKKEEPING)]
    parts = [f"{c.path}: {_short(c.old)} -> {_short(c.new)}" for c in interesting[:6]]
    if len(interesting) > 6:  # noqa: PLR2004
        parts.append(f"... {len(interesting) - 6} more")
    conditions_changed = any(c.path.startswith("status.conditions") for c in event.changes)
    if conditions_changed and event.object is not None:
        conditions = getattr(event.object.status, "conditions", ())
        parts.insert(0, ", ".join(f"{c.type}={c.status.value} {c.reason}".rstrip() for c in conditions))
    return "; ".join(parts)


def as_json(data: object) -> str:
    """Indented, key-sorted JSON."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def as_json_line(data: object) -> str:
    """Compact, key-sorted JSON on one line (JSON lines for streams)."""
    return json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))


@functools.cache
def _dumper() -> type[yaml.SafeDumper]:
    """The YAML dumper: block style, multi-line strings as ``|`` blocks, enums as their
    values. Built on first use: yaml is imported only by the commands that print YAML."""
    import yaml  # noqa: PLC0415

    def multiline(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    def enum_value(dumper: yaml.SafeDumper, value: enum.Enum) -> yaml.Node:
        # ConditionStatus and friends are StrEnums: in the stored body (and in -o json)
        # they are their values; SafeDumper knows only exact built-in types.
        return multiline(dumper, str(value.value))

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(str, multiline)
    Dumper.add_multi_representer(enum.Enum, enum_value)
    return Dumper


def as_yaml(data: object, *, many: bool = False) -> str:
    """Block-style YAML (``---``-separated documents with ``many``)."""
    import yaml  # noqa: PLC0415

    if many and isinstance(data, Sequence):
        return yaml.dump_all(data, Dumper=_dumper(), sort_keys=False, explicit_start=True)
    return yaml.dump(data, Dumper=_dumper(), sort_keys=False)


def labels_text(labels: Mapping[str, str]) -> str:
    """``a=1,b=2`` or ``<none>``."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def jsonpath(data: object, expression: str) -> str:
    """kubectl's ``-o jsonpath=``: ``{.items[*].metadata.name}`` (braces optional, ``$``
    implied), through jsonpath-ng; the values found, separated by spaces (a mapping or
    list found is printed as JSON)."""
    from jsonpath_ng.ext.parser import parse  # noqa: PLC0415 - only -o jsonpath pays for the parser

    text = expression.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if not text.startswith("$"):
        text = "$" + (text if text.startswith((".", "[")) else "." + text)
    try:
        found = parse(text).find(data)
    except Exception as exc:  # noqa: BLE001 - jsonpath-ng raises plain Exceptions for syntax errors
        raise ValueError(f"jsonpath {expression!r}: {' '.join(str(exc).split())}") from None
    return " ".join(
        as_json_line(match.value) if isinstance(match.value, dict | list) else str(match.value)
        for match in found
    )


def printer_columns(
    client: Client, objects: Sequence[AnyResource], *, wide: bool
) -> tuple[PrinterColumn, ...]:
    """The printer columns of the one kind ``objects`` are of (none for no objects)."""
    if not objects:
        return ()
    kind = client.kinds.get(objects[0].api_version, objects[0].kind)
    if kind is None:
        return ()
    return tuple(column for column in kind.printer_columns if wide or column.priority == 0)
