r"""``fieldValidation``: what becomes of the fields of a body that its kind does not have.

Admission is strict (:mod:`reconcile.api.admission`): an unknown field is one of its
field errors, ``unknown field``, with its path. Rather than a second walk of the
document to find them, a write runs as it is: on the happy path nothing is added. When
admission refuses it and some of its errors are unknown fields:

* ``Strict``: ``400 BadRequest``, Kubernetes' ``strict decoding error`` naming each;
* ``Warn`` (Kubernetes' default when the query says nothing): the fields are dropped
  and the write runs again; the response carries a ``Warning: 299 - "unknown field
  \"spec.foo\""`` header per field;
* ``Ignore``: the same, without the warnings.

A warning is the client's field name: what is not printable ASCII in it is escaped
(``\r\n`` cannot end the header), each is cut at 256 characters and a response
carries 4,096 characters of them at most, then one saying how many more there were,
as Kubernetes limits them.

Nothing is stored by the refused attempt, so running the write again is safe; the other
errors of the body are then reported as they stand (``422 Invalid``).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.responses import Response

from reconcile.errors import InvalidError
from reconcile.http.errors import ApiError, Cause
from reconcile.http.mapping import ApiResource

__all__ = ["add_warnings", "unknown_fields", "validated", "without"]

T = TypeVar("T")

#: How an unknown field's error begins (``unknown field (did you mean "size"?)``).
UNKNOWN = "unknown field"
#: How many times a write is retried without its unknown fields (each round drops at
#: least one; fields inside a dropped one are never reported twice).
_ROUNDS = 8
#: Kubernetes' limits on warnings: characters of one, and of all of a response's.
MAX_WARNING_LENGTH = 256
MAX_WARNING_CHARACTERS = 4096
_SEGMENT = re.compile(r"""\.?([^.\[\]]+)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\]""")


def unknown_fields(exc: InvalidError) -> list[str]:
    """The paths of the unknown fields among an admission's errors."""
    return [error.path for error in exc.errors if error.message.startswith(UNKNOWN)]


def _segments(path: str) -> list[str | int] | None:
    segments: list[str | int] = []
    position = 0
    while position < len(path):
        match = _SEGMENT.match(path, position)
        if match is None:
            return None
        name, index, key = match.groups()
        if index is not None:
            segments.append(int(index))
        elif key is not None:
            segments.append(str(ast.literal_eval(key)))
        else:
            segments.append(name)
        position = match.end()
    return segments


def without(document: Mapping[str, Any], paths: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``document`` without the fields at ``paths`` (``spec.rules[0].foo``),
    and the paths it found and removed."""
    result = copy.deepcopy(dict(document))
    removed = []
    for path in paths:
        segments = _segments(path)
        if not segments:
            continue
        node: Any = result
        for segment in segments[:-1]:
            try:
                node = node[segment]
            except (KeyError, IndexError, TypeError):
                node = None
                break
        last = segments[-1]
        if isinstance(node, dict) and last in node:
            del node[last]
            removed.append(path)
    return result, removed


def _strict(resource: ApiResource, paths: list[str]) -> ApiError:
    kind = resource.kind.kind
    fields = ", ".join(f'unknown field "{path}"' for path in paths)
    return ApiError(
        400,
        f'{kind} in version "{resource.version}" cannot be handled as a {kind}: '
        f"strict decoding error: {fields}",
        causes=[Cause(field=path, message=UNKNOWN, reason="FieldValueInvalid") for path in paths],
    )


async def validated(
    write: Callable[[Mapping[str, Any]], Awaitable[T]],
    document: Mapping[str, Any],
    mode: str,
    resource: ApiResource,
) -> tuple[T, list[str]]:
    """``write(document)`` under the ``fieldValidation`` mode (see the module): its
    result and the unknown fields it dropped to get it (to warn about under ``Warn``)."""
    dropped: list[str] = []
    for _ in range(_ROUNDS):
        try:
            return await write(document), dropped if mode == "Warn" else []
        except InvalidError as exc:
            unknown = unknown_fields(exc)
            if not unknown:
                raise
            if mode == "Strict":
                raise _strict(resource, unknown) from None
            document, removed = without(document, unknown)
            if not removed:
                raise
            dropped.extend(removed)
    return await write(document), dropped if mode == "Warn" else []  # pragma: no cover - a last try


def add_warnings(response: Response, paths: list[str], resource: ApiResource | None = None) -> Response:
    """``response`` with Kubernetes' ``Warning`` header for each unknown field dropped,
    and for the use of a deprecated version (``resource``'s, when it is one)."""
    messages = [f'unknown field "{path}"' for path in paths]
    if resource is not None and resource.spoke is not None:
        kind = resource.kind
        deprecation = resource.spoke.warning(resource.group_version, kind.kind, kind.api_version)
        if deprecation is not None:
            messages.insert(0, deprecation)
    total = 0
    for index, message in enumerate(messages):
        text = _header_safe(message)
        total += len(text)
        if total > MAX_WARNING_CHARACTERS:
            text = f"{len(messages) - index} more warnings not shown"
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.append("Warning", f'299 - "{escaped}"')
        if total > MAX_WARNING_CHARACTERS:
            break
    return response


def _header_safe(message: str) -> str:
    """``message`` fit for a header: what is not printable ASCII escaped (a field name is
    the client's; a CR LF in it must not end the header), at most
    :data:`MAX_WARNING_LENGTH` characters."""
    text = "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in message)
    return text if len(text) <= MAX_WARNING_LENGTH else text[: MAX_WARNING_LENGTH - 3] + "..."
