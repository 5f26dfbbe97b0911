"""Errors as Kubernetes ``Status`` objects: the code, the reason and, for an invalid
object, a cause per field, as kubectl and the client libraries read them.

Every refusal of the HTTP API is an :class:`ApiError` (raised by a handler) or one of
:mod:`reconcile.errors` (raised by the client below it), turned into a ``Status`` here by
:func:`error_response`. Anything else is a 500 ``InternalError`` whose message names no
internals (the traceback goes to the server's log, never to the client); so is a failure
of the store, and a store that cannot answer now is a 503 that does not quote it either
(its messages name its address, user, database or file).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson
from starlette.responses import Response

from reconcile.errors import (
    AlreadyExistsError,
    ConflictError,
    DeadlineExceededError,
    ExpiredError,
    FencedError,
    FieldConflictError,
    FieldError,
    InvalidError,
    LockedError,
    NotFoundError,
    ReconcileError,
    StoreError,
    StoreUnavailableError,
)

__all__ = ["ApiError", "Cause", "error_response", "status_body", "status_of"]

logger = logging.getLogger("reconcile.http")

#: Kubernetes' reason for each code this API answers with.
REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@attrs.frozen
class Cause:
    """One field's part in a refusal (``details.causes``)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


class ApiError(Exception):
    """A refusal with its HTTP code, Kubernetes reason and details."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        causes: Sequence[Cause] = (),
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.causes = tuple(causes)
        self.details = dict(details or {})
        self.headers = dict(headers or {})


def status_body(
    code: int,
    message: str,
    reason: str,
    *,
    causes: Sequence[Cause] = (),
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Status`` (``apiVersion: v1``) of a failure."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    shown = dict(details or {})
    if causes:
        shown["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]
    if shown:
        body["details"] = shown
    return body


def _field_causes(errors: Sequence[FieldError]) -> list[Cause]:
    return [Cause(field=e.path, message=e.message) for e in errors]


def status_of(exc: BaseException) -> ApiError:
    """The refusal an exception from the client (or a handler) stands for."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, NotFoundError):
        return ApiError(404, str(exc))
    if isinstance(exc, AlreadyExistsError):
        return ApiError(409, str(exc), reason="AlreadyExists")
    if isinstance(exc, FieldConflictError):
        causes = [
            Cause(field=field, message=f'conflict with "{manager}"', reason="FieldManagerConflict")
            for field, manager in exc.conflicts
        ]
        return ApiError(409, str(exc), causes=causes)
    if isinstance(exc, ConflictError):
        return ApiError(409, str(exc))
    if isinstance(exc, InvalidError):
        return ApiError(422, str(exc), causes=_field_causes(exc.errors))
    if isinstance(exc, ExpiredError):
        return ApiError(410, str(exc))
    if isinstance(exc, StoreUnavailableError | LockedError):
        # The store's own words name its address, its user, its file: for the log only.
        logger.warning("the store cannot answer a request now: %s", exc)
        return ApiError(503, "the store is unavailable; retry", headers={"Retry-After": "1"})
    if isinstance(exc, FencedError):
        return ApiError(
            503, "this server no longer holds the write lease; retry", headers={"Retry-After": "1"}
        )
    if isinstance(exc, DeadlineExceededError | TimeoutError):
        return ApiError(504, "the request took too long; retry")
    if isinstance(exc, StoreError):  # a broken store is the server's failure, not the request's
        logger.error("the store failed answering a request", exc_info=exc)
        return ApiError(500, "an internal error occurred; the server's log has the details")
    if isinstance(exc, ReconcileError):
        return ApiError(400, str(exc))
    logger.error("internal error answering a request", exc_info=exc)
    return ApiError(500, "an internal error occurred; the server's log has the details")


def error_response(exc: BaseException) -> Response:
    """The ``Status`` response of an exception (see :func:`status_of`)."""
    error = status_of(exc)
    body = status_body(error.code, error.message, error.reason, causes=error.causes, details=error.details)
    return Response(
        orjson.dumps(body), status_code=error.code, media_type="application/json", headers=error.headers
    )
