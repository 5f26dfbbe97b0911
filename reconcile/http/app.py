"""The ASGI app: Kubernetes' REST paths over a :class:`~reconcile.api.Client`.

:func:`create_app` builds a Starlette app a host may serve alone (``reconcile serve``) or
mount beside its own routes (``host.mount("/k8s", create_app(client))``). Each group of
routes lives in its own module, listed in :data:`ROUTE_MODULES` order: the specific paths
(``/apis/authorization.k8s.io/...``) before the generic resource paths, which match any
group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from reconcile.api import Client
from reconcile.errors import ReconcileError
from reconcile.http import discovery, openapi
from reconcile.http.context import AllowAll, ApiState, Authorizer
from reconcile.http.deletes import delete_object
from reconcile.http.errors import ApiError, error_response
from reconcile.http.health import health_routes
from reconcile.http.mapping import ResourceMap
from reconcile.http.reads import get_object, list_objects
from reconcile.http.reviews import auth_routes, serve_reviews
from reconcile.http.subresources import get_history, get_status, patch_status, replace_status
from reconcile.http.ui import CsrfGuard, ui_routes
from reconcile.http.watchers import WatchLimits, configure_watches
from reconcile.http.writes import create_object, patch_object, replace_object

__all__ = ["create_app", "discovery_routes", "resource_routes"]

#: ``/apis/{group}/{version}``: the prefix of every resource path.
GROUP_VERSION = "/apis/{group}/{version}"
NAMESPACED = GROUP_VERSION + "/namespaces/{namespace}/{plural}"


def discovery_routes() -> list[BaseRoute]:
    """What the API serves: discovery (``/version``, ``/api``, ``/apis/...``) and the
    OpenAPI documents (``/openapi/v3/...``)."""
    return [*discovery.discovery_routes(), *openapi.openapi_routes()]


def resource_routes() -> list[BaseRoute]:
    """The generic resource paths (every kind of every group)."""
    return [
        Route(GROUP_VERSION + "/{plural}", list_objects, methods=["GET"]),
        Route(NAMESPACED, list_objects, methods=["GET"]),
        Route(NAMESPACED + "/{name}", get_object, methods=["GET"]),
        *write_routes(),
    ]


def write_routes() -> list[BaseRoute]:
    """Create, replace, patch and delete; the status subresource; the history."""
    named = NAMESPACED + "/{name}"
    return [
        Route(NAMESPACED, create_object, methods=["POST"]),
        Route(named, replace_object, methods=["PUT"]),
        Route(named, patch_object, methods=["PATCH"]),
        Route(named, delete_object, methods=["DELETE"]),
        Route(named + "/status", get_status, methods=["GET"]),
        Route(named + "/status", replace_status, methods=["PUT"]),
        Route(named + "/status", patch_status, methods=["PATCH"]),
        Route(named + "/history", get_history, methods=["GET"]),
    ]


async def _api_error(request: Request, exc: Exception) -> Response:  # noqa: ARG001
    return error_response(exc)


async def _http_exception(request: Request, exc: Exception) -> Response:  # noqa: ARG001
    assert isinstance(exc, HTTPException)
    message = {404: "the server could not find the requested resource", 405: "method not allowed"}
    return error_response(ApiError(exc.status_code, message.get(exc.status_code, str(exc.detail))))


def create_app(
    client: Client,
    *,
    authorizer: Authorizer | None = None,
    routes: Sequence[BaseRoute] = (),
    middleware: Sequence[Any] = (),
    watch_limits: WatchLimits | None = None,
) -> Starlette:
    """The HTTP API over ``client``. ``authorizer`` decides who may do what (default:
    everybody everything, for an app behind a host's own checks); ``routes`` are served
    before the API's own; ``middleware`` wraps them all (Starlette ``Middleware`` items), inside
    the guard against cross-site request forgery (:class:`~reconcile.http.ui.CsrfGuard`; the
    web view is at ``/ui/``);
    ``watch_limits`` bound the watches (:class:`~reconcile.http.watchers.WatchLimits`: how
    many, how far behind, bookmark period; end them all with
    :func:`~reconcile.http.watchers.close_watches` when shutting down)."""
    app = Starlette(
        routes=[
            *routes,
            *health_routes(),
            *auth_routes(),
            *discovery_routes(),
            *resource_routes(),
            *ui_routes(),
        ],
        middleware=[Middleware(CsrfGuard), *middleware],
        exception_handlers={
            ApiError: _api_error,
            ReconcileError: _api_error,
            HTTPException: _http_exception,
            Exception: _api_error,
        },
    )
    app.state.reconcile = ApiState(
        client=client, resources=ResourceMap(client.kinds), authorizer=authorizer or AllowAll()
    )
    serve_reviews(app.state.reconcile)
    configure_watches(app.state.reconcile, watch_limits)
    return app
