"""The web view's routes: the page (``/ui/``), its assets (``/ui/static/...``) and the two
helpers it asks besides the API: ``/ui/api/kinds`` and ``/ui/api/access``.

The page learns the app's mount point from the ``<meta name="reconcile-root">`` the
server fills in (``request.scope["root_path"]``), so the view works where a host mounts
the app (``host.mount("/k8s", create_app(client))``: the view is at ``/k8s/ui/``).
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from reconcile.http.context import Attributes, authorize_path, state
from reconcile.http.mapping import ApiResource
from reconcile.http.responses import json_response

__all__ = ["ASSETS", "ui_routes"]

#: Where the page's files are, in the package.
ASSETS = Path(__file__).parents[1] / "static" / "ui"
#: What the page may load and where it may send requests: its own origin only.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
#: The verbs the page offers as actions (pause and resume are patches).
ACTION_VERBS = ("patch", "delete")


@cache
def _index_template() -> str:
    return (ASSETS / "index.html").read_text(encoding="utf-8")


def _root(request: Request) -> str:
    return str(request.scope.get("root_path") or "").rstrip("/")


async def page(request: Request) -> Response:
    """``GET /ui/``: the page, with the app's mount point filled in."""
    body = _index_template().replace("{{ROOT}}", html.escape(_root(request), quote=True))
    return HTMLResponse(
        body,
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


async def to_page(request: Request) -> Response:
    """``GET /ui``: to ``/ui/`` (the assets' relative paths need the slash)."""
    return RedirectResponse(_root(request) + "/ui/", status_code=308)


def _describe(resource: ApiResource) -> dict[str, Any]:
    kind = resource.kind
    return {
        "kind": kind.kind,
        "group": resource.group,
        "version": resource.version,
        "plural": resource.plural,
        "namespaced": True,  # every kind is (discovery says so too)
        "shortNames": list(resource.short_names),
        "columns": [
            {
                "name": column.name,
                "jsonPath": column.json_path,
                "type": column.type,
                "priority": column.priority,
                "description": column.description,
            }
            for column in kind.printer_columns
        ],
    }


async def kinds(request: Request) -> Response:
    """``GET /ui/api/kinds``: each kind in its storage version, with its printer columns
    (where each column's value is in a document: the page fills the cells of the objects
    the watch brings). A non-resource path, as discovery is."""
    authorize_path(request)
    resources = sorted((r for r in state(request).resources if r.storage), key=lambda r: r.kind.kind)
    return json_response({"kinds": [_describe(r) for r in resources]})


async def access(request: Request) -> Response:
    """``GET /ui/api/access?group=&plural=&namespace=&name=``: the user, and which actions
    the authorizer allows them on that object (none asked: the user alone). A
    non-resource path, as ``kubectl auth can-i``'s review is for the user asking."""
    user = authorize_path(request)
    params = request.query_params
    allowed: dict[str, bool] = {}
    if "plural" in params:
        authorizer = state(request).authorizer
        for verb in ACTION_VERBS:
            attributes = Attributes(
                verb, params.get("group", ""), params["plural"], params.get("namespace"), params.get("name")
            )
            allowed[verb] = authorizer.allowed(user, attributes)
    return json_response({"user": {"name": user.name, "groups": list(user.groups)}, "allowed": allowed})


def ui_routes() -> list[BaseRoute]:
    """The view's routes, served by :func:`~reconcile.http.app.create_app` beside the API."""
    return [
        Route("/ui", to_page, methods=["GET"]),
        Route("/ui/", page, methods=["GET"]),
        Route("/ui/api/kinds", kinds, methods=["GET"]),
        Route("/ui/api/access", access, methods=["GET"]),
        Mount("/ui/static", StaticFiles(directory=ASSETS), name="ui-static"),
    ]
