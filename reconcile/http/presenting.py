"""How a read answers: one object, or a list of them, in the form the request accepts:
plain JSON documents, or a ``meta.k8s.io/v1`` ``Table`` for a client whose ``Accept``
asks for one (kubectl get; :mod:`reconcile.http.tables`).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from reconcile.http.context import Target, state
from reconcile.http.responses import json_response
from reconcile.http.tables import table, wants_table

__all__ = ["present_list", "present_object"]


def _now(request: Request) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(state(request).client.clock(), datetime.UTC)


def present_object(
    request: Request,
    found: Target,
    document: Mapping[str, Any],
    status: int = 200,
) -> Response:
    """One object's document (a Table of one row, when asked for)."""
    if wants_table(request):
        revision = str((document.get("metadata") or {}).get("resourceVersion") or "")
        shown = table(request, found.resource, [document], now=_now(request), resource_version=revision)
        return json_response(shown, status)
    return json_response(document, status)


def present_list(
    request: Request,
    found: Target,
    documents: Sequence[Mapping[str, Any]],
    *,
    resource_version: str,
    continue_token: str | None,
) -> Response:
    """A ``{Kind}List`` of documents (a Table of them, when asked for)."""
    if wants_table(request):
        shown = table(
            request,
            found.resource,
            documents,
            now=_now(request),
            resource_version=resource_version,
            continue_token=continue_token,
        )
        return json_response(shown)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return json_response(
        {
            "apiVersion": found.resource.group_version,
            "kind": f"{found.resource.kind.kind}List",
            "metadata": meta,
            "items": list(documents),
        }
    )
