"""Authentication: who a request is from, before anything else looks at it.

:class:`Authenticating` is an ASGI middleware that leaves the request's :class:`User` in
the scope (:data:`~reconcile.http.context.USER_SCOPE_KEY`), where authorization and the
writes (the actor recorded in ``history``) find it, or answers 401 ``Unauthorized``.

The credentials, in Kubernetes' terms:

- a bearer token (``Authorization: Bearer ...``) found in the tokens file
  (:mod:`reconcile.http.tokens`). A token that is not found is refused, whatever else
  the request carries: a wrong credential is never quietly ignored;
- a TLS client certificate, verified against ``--client-ca-file`` by the TLS layer, whose
  subject's common name is the user and whose organizations are its groups (the server
  puts the verified certificate in the scope, :data:`PEER_CERTIFICATE_SCOPE_KEY`);
- nothing: the anonymous user (``system:anonymous`` in ``system:unauthenticated``) when
  anonymous access is enabled, or for the probes (:data:`PROBES`); 401 otherwise.

With no way to authenticate configured at all (no tokens, no client CA), every request
is :data:`UNSECURED`: Kubernetes' old insecure port's user, a member of ``system:masters``.
``reconcile serve`` allows that only on a loopback address, and answers such a request
only when its ``Host`` names a loopback address too: a web page whose own name an
attacker pointed at 127.0.0.1 (DNS rebinding) would otherwise be that user.

A browser's cross-origin request (an ``Origin`` header naming another host than the
request's ``Host``) is refused with 403 whatever its credentials: a page on another
site must not write through credentials the browser adds on its own (a client
certificate, or none at all on an unsecured loopback server) -- a ``POST`` of a JSON
body without a ``Content-Type`` is a request a page may send anywhere. kubectl and the
client libraries send no ``Origin``.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Any

import attrs
from starlette.types import ASGIApp, Receive, Scope, Send

from reconcile.http.context import ANONYMOUS, USER_SCOPE_KEY, User
from reconcile.http.errors import ApiError, error_response
from reconcile.http.tokens import AUTHENTICATED, TokenTable
from reconcile.http.ui.public import is_public_asset

__all__ = [
    "MASTERS",
    "PEER_CERTIFICATE_SCOPE_KEY",
    "PROBES",
    "UNSECURED",
    "Authenticating",
    "Authenticator",
    "certificate_user",
]

logger = logging.getLogger("reconcile.http")

#: Where the server leaves a verified client certificate (``ssl.SSLSocket.getpeercert()``'s dict).
PEER_CERTIFICATE_SCOPE_KEY = "reconcile.peer_certificate"
#: The probes, answered without credentials (Kubernetes' ``system:public-info-viewer``
#: grants them to everybody, too); ``/health``, which says more, is not among them.
PROBES = ("/livez", "/readyz", "/healthz")
#: The group whose members may do everything, whatever the rules say (Kubernetes' name).
MASTERS = "system:masters"
#: Whom a request is from when the server authenticates nobody (loopback only).
UNSECURED = User("system:unsecured", (MASTERS, AUTHENTICATED))


class Unauthenticated(Exception):  # noqa: N818 - a refusal, not a bug
    """A request whose credentials are wrong or missing; the reason is for the log only."""


class Refused(Exception):  # noqa: N818 - a refusal, not a bug
    """A request refused whoever it is from (403); the message is the client's."""


def loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without a port) is a loopback one."""
    if host.lower() in {"localhost", "localhost."}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _header(scope: Scope, name: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for key, value in headers:
        if key == name:
            return value.decode("latin-1").strip()
    return None


def _host_name(authority: str) -> str:
    """The host of a ``Host`` header's value (``[::1]:6443`` -> ``::1``)."""
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


def _cross_origin(scope: Scope) -> str | None:
    """The ``Origin`` of a browser's request from another origin, None for any other request."""
    origin = _header(scope, b"origin")
    if origin is None:
        return None
    host = _header(scope, b"host") or ""
    scheme, _, authority = origin.partition("://")
    if scheme.lower() not in {"http", "https"} or authority.lower() != host.lower():
        return origin
    return None


def certificate_user(certificate: Mapping[str, Any]) -> User | None:
    """The user a verified client certificate names: CN the user, each O a group."""
    names: list[str] = []
    groups: list[str] = []
    for rdn in certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names.append(value)
            elif key == "organizationName":
                groups.append(value)
    if not names or not names[0]:
        return None
    return User(names[0], (*dict.fromkeys(groups), AUTHENTICATED))


def _bearer(scope: Scope) -> str | None:
    """The bearer token of the request, None when it has no Authorization header."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("an Authorization header that is not a bearer token")
            return token.strip()
    return None


@attrs.frozen
class Authenticator:
    """How a server authenticates: tokens, client certificates, anonymous access."""

    tokens: TokenTable | None = None
    client_certificates: bool = False
    anonymous: bool = False
    #: Paths a request without credentials may ask as the anonymous user even when
    #: anonymous access is off: the probes a supervisor or load balancer polls.
    public_paths: tuple[str, ...] = PROBES

    @property
    def secured(self) -> bool:
        """Whether any credential is checked (otherwise every request is :data:`UNSECURED`)."""
        return self.tokens is not None or self.client_certificates

    def _public(self, scope: Scope) -> bool:
        path: str = scope.get("path", "")
        path = path.removeprefix(scope.get("root_path", "")) or "/"
        return any(path == public or path.startswith(public + "/") for public in self.public_paths)

    def authenticate(self, scope: Scope) -> User:
        """The request's user (:class:`Unauthenticated` when it has none, :class:`Refused`
        for a cross-origin request or an unsecured one not addressed to a loopback host)."""
        origin = _cross_origin(scope)
        if origin is not None:
            raise Refused(f"a cross-origin request (from a page of {origin!r}) is refused")
        token = _bearer(scope)
        if token is not None:
            found = self.tokens.lookup(token) if self.tokens is not None else None
            if found is None:
                raise Unauthenticated("a bearer token that is not in the tokens file")
            return found
        certificate = scope.get(PEER_CERTIFICATE_SCOPE_KEY)
        if self.client_certificates and certificate:
            found = certificate_user(certificate)
            if found is None:
                raise Unauthenticated("a client certificate without a common name")
            return found
        if self.anonymous or self._public(scope):
            return ANONYMOUS
        if not self.secured:
            host = _header(scope, b"host")
            if host is not None and not loopback(_host_name(host)):
                raise Refused(
                    "this server authenticates nobody: it answers only requests addressed to a "
                    "loopback host (127.0.0.1, [::1], localhost)"
                )
            return UNSECURED
        raise Unauthenticated("no credentials")


class Authenticating:
    """ASGI middleware: the request's user into the scope, or 401."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate an HTTP request, then pass it on."""
        if scope["type"] not in {"http", "websocket"}:
            await self.app(scope, receive, send)
            return
        try:
            scope[USER_SCOPE_KEY] = self.authenticator.authenticate(scope)
        except Refused as exc:
            await self._refuse(scope, receive, send, ApiError(403, str(exc)))
            return
        except Unauthenticated as exc:
            if is_public_asset(scope):  # the web view's page and assets: no data in them
                scope[USER_SCOPE_KEY] = ANONYMOUS
                await self.app(scope, receive, send)
                return
            client = scope.get("client")
            logger.info(
                "401 for %s %s from %s: %s", scope.get("method"), scope.get("path"), client and client[0], exc
            )
            await self._refuse(scope, receive, send, ApiError(401, "Unauthorized"))
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, error: ApiError) -> None:
        if scope["type"] == "websocket":  # refused before it is accepted (policy violation)
            await send({"type": "websocket.close", "code": 1008})
            return
        await error_response(error)(scope, receive, send)
