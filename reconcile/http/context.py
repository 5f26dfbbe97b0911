"""What every handler works with: the app's state (the client, the resources, the
security), who asks (set by authentication), and the resource a request names, checked
against what that user may do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
from starlette.requests import Request

from reconcile.api import Client
from reconcile.http.errors import ApiError
from reconcile.http.mapping import ApiResource, ResourceMap
from reconcile.model import DEFAULT_NAMESPACE
from reconcile.runtime.health import Health

__all__ = [
    "ANONYMOUS",
    "USER_SCOPE_KEY",
    "AllowAll",
    "ApiState",
    "Attributes",
    "Authorizer",
    "Target",
    "User",
    "authorize",
    "authorize_path",
    "namespace_or_default",
    "state",
    "target",
    "user_of",
]

#: Where authentication leaves the request's user in the ASGI scope.
USER_SCOPE_KEY = "reconcile.user"


@attrs.frozen
class User:
    """Who a request is from: a name and the groups it is in (Kubernetes' UserInfo)."""

    name: str
    groups: tuple[str, ...] = ()


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


@attrs.frozen
class Attributes:
    """What a request asks to do, as Kubernetes' authorizer sees it."""

    verb: str
    group: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    #: A non-resource request's path (discovery, OpenAPI, ``/health``): then ``group``
    #: and ``resource`` are empty, and the verb is ``get``.
    path: str | None = None


class Authorizer(Protocol):
    """Decides whether a user may do what a request asks."""

    def allowed(self, user: User, attributes: Attributes) -> bool:
        """Whether ``user`` may do what ``attributes`` say."""


class AllowAll:
    """Everybody may do everything: for an app mounted behind a host's own checks."""

    def allowed(self, user: User, attributes: Attributes) -> bool:  # noqa: ARG002
        """Always."""
        return True


@attrs.define
class ApiState:
    """The app's shared state (``app.state.reconcile``)."""

    client: Client
    resources: ResourceMap
    authorizer: Authorizer = attrs.field(factory=AllowAll)
    #: The health of a Runtime serving beside the API (``serve --run``): its
    #: ``health`` method; None when the API serves the store alone.
    runtime_health: Callable[[], Health] | None = None
    #: Anything the parts of the app keep beside (limits, watch registry...).
    extras: dict[str, Any] = attrs.field(factory=dict)


def state(request: Request) -> ApiState:
    """The state of the app serving ``request``."""
    found: ApiState = request.app.state.reconcile
    return found


def user_of(request: Request) -> User:
    """The request's authenticated user (anonymous when nobody authenticated it)."""
    found = request.scope.get(USER_SCOPE_KEY)
    return found if isinstance(found, User) else ANONYMOUS


@attrs.frozen
class Target:
    """The resource (and object) a request names, allowed for its user."""

    resource: ApiResource
    namespace: str | None
    name: str | None
    user: User


def authorize(request: Request, attributes: Attributes) -> User:
    """The request's user, if it may do what ``attributes`` says; 403 otherwise."""
    user = user_of(request)
    if not state(request).authorizer.allowed(user, attributes):
        what = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
        where = (
            f' in the namespace "{attributes.namespace}"' if attributes.namespace else " at the cluster scope"
        )
        named = f' "{attributes.name}"' if attributes.name else ""
        message = (
            f'{what}.{attributes.group}{named} is forbidden: User "{user.name}" cannot '
            f'{attributes.verb} resource "{attributes.resource}" in API group "{attributes.group}"{where}'
        )
        raise ApiError(
            403,
            message,
            details={"group": attributes.group, "kind": attributes.resource, "name": attributes.name},
        )
    return user


def authorize_path(request: Request) -> User:
    """The request's user, if it may ``get`` the request's path (a non-resource request:
    discovery, OpenAPI, ``/health``); 403 otherwise, as Kubernetes says it."""
    user = user_of(request)
    path = request.scope.get("path", "")
    path = path.removeprefix(request.scope.get("root_path", "")) or "/"
    if not state(request).authorizer.allowed(user, Attributes("get", "", "", path=path)):
        raise ApiError(403, f'forbidden: User "{user.name}" cannot get path "{path}"')
    return user


def target(request: Request, verb: str, *, subresource: str | None = None) -> Target:
    """The resource the request's path names (404 when unknown), checked for ``verb``."""
    params = request.path_params
    resource = state(request).resources.resolve(params["group"], params["version"], params["plural"])
    namespace = params.get("namespace")
    name = params.get("name")
    user = authorize(
        request,
        Attributes(verb, resource.group, resource.plural, namespace, name, subresource),
    )
    return Target(resource, namespace, name, user)


def namespace_or_default(found: Target) -> str:
    """The target's namespace (the default one for a request that names none)."""
    return found.namespace or DEFAULT_NAMESPACE
