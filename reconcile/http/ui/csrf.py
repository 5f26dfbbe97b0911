"""Cross-site request forgery: a browser sends the user's ambient credentials (cookies,
a TLS client certificate, the loopback server's trust) with a form or a script of any
site. State-changing requests (``POST``, ``PUT``, ``PATCH``, ``DELETE``) that come from
a browser -- they carry ``Origin`` or ``Sec-Fetch-Site``, which page scripts cannot
forge -- must come from the server's own origin and carry the ``X-Requested-With`` header
(or a bearer ``Authorization``) that a cross-site form cannot send, and a cross-site
script cannot send without a CORS preflight that this server never approves.

Other clients (kubectl, the client libraries, curl) send neither header and pass.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from reconcile.http.errors import ApiError, error_response

__all__ = ["UI_HEADER", "CsrfGuard", "refusal"]

#: The header the web view's scripts send with every request (its value: ``reconcile-ui``).
UI_HEADER = "x-requested-with"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", [])}


def _same_origin(origin: str, host: str, scheme: str) -> bool:
    parts = urlsplit(origin)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        return False
    default = {"http": "80", "https": "443"}
    netloc = parts.netloc if parts.port else f"{parts.netloc}:{default[parts.scheme]}"
    served = host if ":" in host.rsplit("]", 1)[-1] else f"{host}:{default.get(scheme, '80')}"
    return parts.scheme == scheme and netloc.lower() == served.lower()


def refusal(scope: Scope) -> str | None:
    """Why a request is refused as a possible forgery; None when it may go on."""
    if scope.get("method", "GET") in SAFE_METHODS:
        return None
    headers = _headers(scope)
    origin = headers.get("origin")
    fetch_site = headers.get("sec-fetch-site")
    if origin is None and fetch_site is None:
        return None  # not a browser: kubectl, the client libraries, curl
    if fetch_site in {"cross-site", "same-site"}:
        return f"a {fetch_site} request may not change anything"
    if origin is not None and not _same_origin(origin, headers.get("host", ""), scope.get("scheme", "http")):
        return "a request from another origin may not change anything"
    if UI_HEADER not in headers and "authorization" not in headers:
        return f"a browser's request that changes something needs the {UI_HEADER} header"
    return None


class CsrfGuard:
    """ASGI middleware: a 403 ``Status`` for a browser's state-changing request from
    another site, or without the header a form cannot send."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a forged request, pass on the others."""
        if scope["type"] == "http":
            reason = refusal(scope)
            if reason is not None:
                await error_response(ApiError(403, f"forbidden: {reason}"))(scope, receive, send)
                return
        await self.app(scope, receive, send)
