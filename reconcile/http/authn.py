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
``reconcile serve`` allows that only on a loopback address.
"""

from __future__ import annotations

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
        """The request's user (:class:`Unauthenticated` when it has none)."""
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
        except Unauthenticated as exc:
            if is_public_asset(scope):  # the web view's page and assets: no data in them
                scope[USER_SCOPE_KEY] = ANONYMOUS
                await self.app(scope, receive, send)
                return
            client = scope.get("client")
            logger.info(
                "401 for %s %s from %s: %s", scope.get("method"), scope.get("path"), client and client[0], exc
            )
            if scope["type"] == "websocket":  # refused before it is accepted (policy violation)
                await send({"type": "websocket.close", "code": 1008})
                return
            await error_response(ApiError(401, "Unauthorized"))(scope, receive, send)
            return
        await self.app(scope, receive, send)
