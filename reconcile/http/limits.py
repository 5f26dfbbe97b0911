"""Limits that keep the server up: an ASGI middleware in front of the API.

Per request, in this order:

1. a rate limit per client (a token bucket of ``requests_per_second`` and ``burst``);
2. a cap on requests in flight, per client and in all (watches are long-running and not
   counted here: the watch registry caps them on its own);
3. the body: a ``Content-Length`` over ``max_body_bytes`` is refused before a byte is
   read; otherwise the body is read here, in full, before the app sees the request,
   stopping at the limit (a chunked body cannot slip past it) and at ``body_timeout``
   seconds (a client sending its body a byte at a time is cut off).

Refusals are Kubernetes ``Status`` objects: 429 ``TooManyRequests`` with ``Retry-After``,
413 ``RequestEntityTooLarge``, 408 (with ``Connection: close``: the rest of a body that
was not read cannot be told from the next request). Nothing reaches the app, so nothing
is stored.

A client is its authenticated user (:mod:`reconcile.http.authn` runs first); the
anonymous and the unsecured users are told apart by their address instead.

The headers' own deadline is the server's job (uvicorn reads them before any ASGI app
runs): see :mod:`reconcile.http.connections`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs

import attrs
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reconcile.http.authn import UNSECURED
from reconcile.http.context import ANONYMOUS, USER_SCOPE_KEY, User
from reconcile.http.errors import ApiError, error_response

__all__ = ["DEFAULT_MAX_BODY_BYTES", "LimitSettings", "Limits", "client_key", "long_running"]

#: Kubernetes' own limit on a request body.
DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024
#: Buckets kept before the full (idle) ones are dropped.
_BUCKETS_KEPT = 10_000


@attrs.frozen
class LimitSettings:
    """The limits; 0 turns a rate or count limit off."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout: float = 60.0
    max_inflight: int = 400
    max_inflight_per_client: int = 100
    requests_per_second: float = 0.0
    burst: int = 0

    @property
    def bucket_size(self) -> float:
        """The burst a client may spend at once (twice the rate when not given)."""
        return float(self.burst or max(1, math.ceil(2 * self.requests_per_second)))


def client_key(scope: Scope) -> str:
    """Whom a request's limits count against: its user, or its address when anonymous."""
    user = scope.get(USER_SCOPE_KEY)
    if isinstance(user, User) and user not in {ANONYMOUS, UNSECURED}:
        return f"user:{user.name}"
    client = scope.get("client")
    return f"address:{client[0] if client else 'unknown'}"


def _collection(scope: Scope) -> bool:
    """Whether the request's path is a collection's (``/apis/G/V/P``,
    ``/apis/G/V/namespaces/N/P``, and the core group's ``/api/V/...``): what a watch asks."""
    path: str = scope.get("path", "")
    segments = path.removeprefix(scope.get("root_path", "")).strip("/").split("/")
    if segments[0] == "api":  # the core group: one segment less
        segments = ["apis", "core", *segments[1:]]
    if segments[0] != "apis" or not all(segments):
        return False
    return len(segments) == 4 or (len(segments) == 6 and segments[3] == "namespaces")  # noqa: PLR2004


def long_running(scope: Scope) -> bool:
    """Whether a request is a watch (open until the client or the server ends it): a
    ``GET`` of a collection with ``watch=true`` (or ``1``). Only those: a ``GET`` of an
    object with ``watch=true``, or a path that merely holds ``/watch/``, is counted like
    any request (either was a way past the caps on requests in flight)."""
    if scope.get("method") != "GET":
        return False
    watch = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("watch", [""])[-1]
    return watch.lower() in {"true", "1"} and _collection(scope)


class _Refused(Exception):  # noqa: N818 - a refusal carried out of the body reader
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


class Limits:
    """ASGI middleware enforcing :class:`LimitSettings` (see the module's story)."""

    def __init__(
        self, app: ASGIApp, settings: LimitSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.app = app
        self.settings = settings or LimitSettings()
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._inflight: dict[str, int] = {}
        self._inflight_total = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass on one request."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = client_key(scope)
        try:
            self._take_token(key)
            with self._slot(key, counted=not long_running(scope)):
                body = await self._body(scope, receive)
                await self.app(scope, _replay(body, receive) if body is not None else receive, send)
        except _Refused as refused:
            await error_response(refused.error)(scope, receive, send)

    def _take_token(self, key: str) -> None:
        rate = self.settings.requests_per_second
        if rate <= 0:
            return
        size = self.settings.bucket_size
        now = self.clock()
        tokens, at = self._buckets.get(key, (size, now))
        tokens = min(size, tokens + (now - at) * rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            wait = max(1, math.ceil((1 - tokens) / rate))
            raise _Refused(_too_many(f"the rate limit of {rate:g} requests per second", wait))
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > _BUCKETS_KEPT:
            self._forget_full_buckets(now)

    def _forget_full_buckets(self, now: float) -> None:
        rate, size = self.settings.requests_per_second, self.settings.bucket_size
        for key, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * rate >= size:
                del self._buckets[key]

    @contextlib.contextmanager
    def _slot(self, key: str, *, counted: bool) -> Iterator[None]:
        if not counted:
            yield
            return
        per_client, total = self.settings.max_inflight_per_client, self.settings.max_inflight
        if per_client and self._inflight.get(key, 0) >= per_client:
            raise _Refused(_too_many(f"{per_client} requests in flight for one client", 1))
        if total and self._inflight_total >= total:
            raise _Refused(_too_many(f"{total} requests in flight", 1))
        self._inflight[key] = self._inflight.get(key, 0) + 1
        self._inflight_total += 1
        try:
            yield
        finally:
            self._inflight_total -= 1
            left = self._inflight[key] - 1
            if left:
                self._inflight[key] = left
            else:
                del self._inflight[key]

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body (None for a request that declares none), within the limits."""
        headers = dict(scope.get("headers", ()))
        length = headers.get(b"content-length")
        limit = self.settings.max_body_bytes
        if length is None and b"transfer-encoding" not in headers:
            return None
        if length is not None:
            if not length.isdigit():
                raise _Refused(ApiError(400, "the Content-Length header is not a number"))
            if int(length) > limit:
                raise _Refused(_too_large(limit))
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # the client went away
                        raise _Refused(ApiError(400, "the client closed the connection mid-body"))
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise _Refused(_too_large(limit))
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise _Refused(
                ApiError(
                    408,
                    f"the request body did not arrive within {self.settings.body_timeout:g} seconds",
                    reason="Timeout",
                    headers={"Connection": "close"},
                )
            ) from None


def _too_many(what: str, retry_after: int) -> ApiError:
    return ApiError(
        429,
        f"Too many requests, please try again later ({what}).",
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"Request entity too large: limit is {limit} bytes", headers={"Connection": "close"})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then the connection's own messages."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
