"""How S3's answers become the engine's errors, at the provider's boundary.

Throttling and server errors are transient (the engine retries with jittered backoff);
a missing bucket is an answer, not an error; credentials that are missing or refused are
transient too (they can be fixed outside, without a new spec) with a message naming the
chain. A request that botocore or the HTTP client refuses to send (a parameter botocore
rejects, a header value aiohttp calls an injection) is permanent: the same spec would be
refused the same way at every retry (admission refuses what it can foresee of these, see
:mod:`reconcile_providers.s3.headers`). Messages never carry a credential: botocore's do not, and
ours name only the variables and files of the chain.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Container, Iterator
from typing import Any

from reconcile.errors import NotOwnedError, PermanentError, TransientError

__all__ = ["CHAIN", "code_of", "read_or_none", "s3_errors"]

CHAIN = (
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE, "
    "or the shared credentials file (~/.aws/credentials)"
)
_TRANSIENT = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "503",
        "500",
        "OperationAborted",
    }
)
_CREDENTIALS = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "AccessDenied", "403"}
)


def code_of(exc: BaseException) -> str:
    """The S3 error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def _status_of(exc: BaseException) -> int:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


@contextlib.contextmanager
def s3_errors(operation: str, bucket: str) -> Iterator[None]:
    """Translate what botocore raises during ``operation`` on ``bucket``."""
    from botocore.exceptions import (  # noqa: PLC0415 - botocore loads when the provider connects
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        HTTPClientError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
    )

    try:
        yield
    except ClientError as exc:
        code, status = code_of(exc), _status_of(exc)
        where = f"S3 {operation} of bucket {bucket!r}"
        if code == "BucketAlreadyExists":
            raise NotOwnedError(f"{where}: the name is taken by another account; it is left alone") from exc
        if code in _TRANSIENT or status >= 500 or status == 429:  # noqa: PLR2004 - HTTP statuses
            raise TransientError(f"{where}: {code or status}, retrying with backoff") from exc
        if code in _CREDENTIALS:
            raise TransientError(f"{where}: {code}: the credentials were refused; check {CHAIN}") from exc
        raise PermanentError(f"{where}: {code or status}: {exc}") from exc
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise TransientError(f"S3 {operation}: no AWS credentials found; set {CHAIN}") from exc
    except EndpointConnectionError as exc:
        raise TransientError(f"S3 {operation}: the endpoint is unreachable: {exc}") from exc
    except ParamValidationError as exc:
        message = f"S3 {operation} of bucket {bucket!r}: cannot be sent: {_one_line(exc)}"
        raise PermanentError(message) from exc
    except HTTPClientError as exc:
        # The HTTP client's own refusal of the request as built (aiohttp's ValueError for
        # a control character in a header, an UnicodeEncodeError) happens before a byte
        # is sent and again at every retry; a connection that failed is an OSError or one
        # of aiohttp's own errors (some of which are ValueErrors too: InvalidURL).
        from aiohttp import ClientError as ConnectionFailed  # noqa: PLC0415 - aiobotocore's HTTP client

        cause = exc.kwargs.get("error")
        if isinstance(cause, ValueError) and not isinstance(cause, ConnectionFailed):
            message = f"S3 {operation} of bucket {bucket!r}: cannot be sent: {_one_line(cause)}"
            raise PermanentError(message) from exc
        raise TransientError(f"S3 {operation} of bucket {bucket!r}: {_one_line(exc)}") from exc
    except BotoCoreError as exc:
        raise TransientError(f"S3 {operation} of bucket {bucket!r}: {exc}") from exc


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (botocore's validation report spans several)."""
    return " ".join(str(exc).split())


async def read_or_none(
    operation: str, bucket: str, call: Callable[[], Awaitable[Any]], missing: Container[str]
) -> Any:
    """``await call()`` with its errors translated; None when S3 answers one of the
    ``missing`` codes (NoSuchTagSet, NoSuchBucketPolicy...: a setting never made)."""
    with s3_errors(operation, bucket):
        try:
            return await call()
        except Exception as exc:
            if code_of(exc) in missing:
                return None
            raise
