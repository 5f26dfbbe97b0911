"""Table responses: ``kubectl get``'s columns, computed by the server as Kubernetes does.

A client that asks with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` gets a
``meta.k8s.io/v1`` ``Table`` instead of the object or the list: ``columnDefinitions``
(name, type, format, description, priority) and ``rows``, each with its ``cells`` and
its ``object``. The columns are ``reconcile get``'s, from the same functions
(:mod:`reconcile.model.cells`): Name, the kind's printer columns, Ready, Synced, Reason,
Age; then, at priority 1 (``kubectl get -o wide``), Generation, Observed, Message. A
printer column of a priority above 0 is wide-only too, as in ``reconcile get -o wide``.

A row's ``object`` is what ``includeObject`` asks for: ``Metadata`` (the default, as
the apiserver's: a ``PartialObjectMetadata``, from which kubectl takes the namespace
for ``-A`` and the labels for ``--show-labels``), ``Object`` (the whole document) or
``None``.

For a watch that asks for tables (``kubectl get -w``), each event's object is a Table of
its one row, as the apiserver sends it: the column definitions in the first event only,
``table(..., headers=False)`` for the others.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from reconcile.http.errors import ApiError, Cause
from reconcile.http.mapping import ApiResource
from reconcile.http.media import accepts_as
from reconcile.model import PrinterColumn
from reconcile.model.cells import age, column_cells, message_cell, readiness
from reconcile.model.printing import printable

__all__ = ["INCLUDE_OBJECT", "TABLE", "column_definitions", "table", "wants_table"]

#: The Table's group, version and kind, as the ``Accept`` header names them.
TABLE = ("meta.k8s.io", "v1", "Table")
#: The values of the ``includeObject`` query parameter.
INCLUDE_OBJECT = ("None", "Metadata", "Object")


def wants_table(request: Request) -> bool:
    """Whether the request asks for a Table (``Accept: ...;as=Table;v=v1;g=meta.k8s.io``)."""
    return accepts_as(request, *TABLE)


def _column(
    name: str, type_: str, description: str, *, priority: int = 0, format_: str = ""
) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": format_, "description": description, "priority": priority}


def column_definitions(columns: Sequence[PrinterColumn]) -> list[dict[str, Any]]:
    """The Table's columns: Name, the kind's printer columns, the readiness columns and
    Age; the wide ones (priority 1) after."""
    return [
        _column("Name", "string", "The object's name (metadata.name).", format_="name"),
        *(_column(c.name, c.type, c.description or c.json_path, priority=c.priority) for c in columns),
        _column("Ready", "string", "The Ready condition's status (Updating: not yet observed)."),
        _column("Synced", "string", "The Synced condition's status: whether the last reconcile succeeded."),
        _column("Reason", "string", "The reason of the first of Synced and Ready that is not True."),
        _column("Age", "string", "How long ago the object was created."),
        _column("Generation", "integer", "The generation of the spec (metadata.generation).", priority=1),
        _column("Observed", "integer", "The generation the controller last observed.", priority=1),
        _column("Message", "string", "The Synced condition's message.", priority=1),
    ]


def _typed(column: PrinterColumn, document: Mapping[str, Any], text: str) -> Any:
    """A cell as its column's type says when the value is of that type (an integer as a
    number), else the text ``reconcile get`` prints."""
    value = column.value(document)
    if column.type == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if column.type == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if column.type == "boolean" and isinstance(value, bool):
        return value
    return text


def _time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def _cells(
    columns: Sequence[PrinterColumn], document: Mapping[str, Any], now: datetime.datetime
) -> list[Any]:
    meta = document.get("metadata") or {}
    status = document.get("status") or {}
    conditions = {
        str(c.get("type")): (str(c.get("status", "Unknown")), str(c.get("reason") or ""))
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    }
    generation = meta.get("generation")
    observed = status.get("observedGeneration", 0)
    ready, synced, reason = readiness(
        conditions, current=observed == generation, deleting=meta.get("deletionTimestamp") is not None
    )
    synced_message = next(
        (
            str(c.get("message") or "")
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Synced"
        ),
        "",
    )
    texts = column_cells(columns, document, now)
    return [
        printable(str(meta.get("name", ""))),
        *(_typed(c, document, t) for c, t in zip(columns, texts, strict=True)),
        ready,
        synced,
        reason,
        age(_time(meta.get("creationTimestamp")), now),
        generation if isinstance(generation, int) else "",
        observed if isinstance(observed, int) else "",
        message_cell(synced_message),
    ]


def _include_object(request: Request) -> str:
    value = request.query_params.get("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        message = f"includeObject: {value!r} is not one of {', '.join(INCLUDE_OBJECT)}"
        raise ApiError(400, message, causes=[Cause(field="includeObject", message=message)])
    return value


def _object(document: Mapping[str, Any], include: str) -> dict[str, Any] | None:
    if include == "Object":
        return dict(document)
    if include == "Metadata":
        return {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": document.get("metadata") or {},
        }
    return None


def table(
    request: Request,
    resource: ApiResource,
    documents: Sequence[Mapping[str, Any]],
    *,
    now: datetime.datetime,
    resource_version: str,
    continue_token: str | None = None,
    headers: bool = True,
) -> dict[str, Any]:
    """A ``Table`` of ``documents`` (of ``resource``'s kind), as of ``now``; without
    ``headers``, no ``columnDefinitions`` (a watch's events after the first, as the
    apiserver sends them)."""
    include = _include_object(request)
    columns = resource.kind.printer_columns
    rows = []
    for document in documents:
        row: dict[str, Any] = {"cells": _cells(columns, document, now)}
        found = _object(document, include)
        if found is not None:
            row["object"] = found
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    group, version, kind = TABLE
    return {
        "kind": kind,
        "apiVersion": f"{group}/{version}",
        "metadata": meta,
        "columnDefinitions": column_definitions(columns) if headers else [],
        "rows": rows,
    }
