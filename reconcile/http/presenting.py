"""How a read answers: one object, or a list of them, in the form the request accepts
(plain JSON documents; kubectl's ``as=Table`` is answered by :mod:`reconcile.http.tables`
when it lands).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from reconcile.http.context import Target
from reconcile.http.responses import json_response

__all__ = ["present_list", "present_object"]


def present_object(
    request: Request,  # noqa: ARG001
    found: Target,  # noqa: ARG001
    document: Mapping[str, Any],
    status: int = 200,
) -> Response:
    """One object's document."""
    return json_response(document, status)


def present_list(
    request: Request,  # noqa: ARG001
    found: Target,
    documents: Sequence[Mapping[str, Any]],
    *,
    resource_version: str,
    continue_token: str | None,
) -> Response:
    """A ``{Kind}List`` of documents."""
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
