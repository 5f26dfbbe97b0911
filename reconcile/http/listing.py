"""A list's (or a watch's) query parameters, read and checked as Kubernetes'
``ListOptions``: ``watch``, ``labelSelector``, ``fieldSelector``, ``limit``, ``continue``,
``resourceVersion``, ``resourceVersionMatch``, ``timeoutSeconds``,
``allowWatchBookmarks`` and ``sendInitialEvents``.

A parameter that does not parse (``timeoutSeconds=soon``, ``resourceVersion=abc``, a
selector) is a 400 BadRequest naming it, as the apiserver's parameter decoding answers.
A combination its ``ValidateListOptions`` refuses (``resourceVersionMatch`` without a
``resourceVersion``, ``sendInitialEvents`` on a list) is a 422 Invalid ``ListOptions``
with a cause per field, as there.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from reconcile.http.errors import ApiError, Cause
from reconcile.http.selecting import Selection, parse_selection

__all__ = [
    "EXACT",
    "NOT_OLDER_THAN",
    "ListOptions",
    "parse_bool",
    "parse_list_options",
    "too_large",
    "wants_watch",
]

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})


@attrs.frozen
class ListOptions:
    """What a list or watch request asks for."""

    watch: bool = False
    selection: Selection = attrs.field(factory=Selection)
    limit: int | None = None
    continue_token: str | None = None
    #: None: the parameter was absent or ``""``; 0: ``"0"`` (any revision will do).
    resource_version: int | None = None
    resource_version_match: str = ""
    timeout_seconds: int | None = None
    allow_bookmarks: bool = False
    send_initial_events: bool | None = None


def _bad(field: str, value: str, why: str) -> ApiError:
    return ApiError(
        400, f"{field}: Invalid value: {value!r}: {why}", causes=[Cause(field=field, message=why)]
    )


def parse_bool(query: Mapping[str, str], field: str) -> bool | None:
    """A boolean parameter as Go's ``strconv.ParseBool`` reads it (None when absent)."""
    raw = query.get(field)
    if raw is None or raw == "":
        return None
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise _bad(field, raw, "not a boolean (true or false)")


def wants_watch(query: Mapping[str, str]) -> bool:
    """Whether the request is a watch (``watch=true`` or ``watch=1``)."""
    return bool(parse_bool(query, "watch"))


#: The largest whole number a parameter may be (Kubernetes reads them as int64).
_INT64 = 2**63 - 1


def _whole(query: Mapping[str, str], field: str) -> int | None:
    raw = query.get(field)
    if raw is None or raw == "":
        return None
    if not raw.isdecimal() or len(raw) > len(str(_INT64)) or int(raw) > _INT64:
        raise _bad(field, raw, "not a whole number >= 0")
    return int(raw)


def _forbidden(field: str, why: str) -> Cause:
    return Cause(field=field, message=f"Forbidden: {why}", reason="FieldValueForbidden")


def _not_supported(field: str, value: str, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{s}"' for s in supported)
    return Cause(
        field=field,
        message=f'Unsupported value: "{value}": supported values: {listed}',
        reason="FieldValueNotSupported",
    )


def _validate(options: ListOptions, raw_version: str) -> list[Cause]:
    """``ValidateListOptions``: the combinations the apiserver refuses."""
    causes: list[Cause] = []
    match = options.resource_version_match
    field = "resourceVersionMatch"
    if options.watch:
        if options.send_initial_events is not None:
            if match != NOT_OLDER_THAN:
                why = f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
                causes.append(_forbidden(field, why))
            if options.send_initial_events and not options.allow_bookmarks:
                why = "sendInitialEvents requires setting allowWatchBookmarks to true"
                causes.append(_forbidden("allowWatchBookmarks", why))
        if match:
            if options.send_initial_events is None:
                why = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
                causes.append(_forbidden(field, why))
            if match != NOT_OLDER_THAN:
                causes.append(_not_supported(field, match, (NOT_OLDER_THAN,)))
    else:
        if options.send_initial_events is not None:
            causes.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
        if match:
            if not raw_version:
                why = "resourceVersionMatch is forbidden unless resourceVersion is provided"
                causes.append(_forbidden(field, why))
            if match not in (EXACT, NOT_OLDER_THAN):
                causes.append(_not_supported(field, match, (EXACT, NOT_OLDER_THAN, "")))
            if match == EXACT and raw_version == "0":
                causes.append(
                    _forbidden(field, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
                )
    if match and options.continue_token:
        causes.append(_forbidden(field, "resourceVersionMatch is forbidden when continue is provided"))
    return causes


def _resource_version(query: Mapping[str, str]) -> int | None:
    raw = query.get("resourceVersion")
    if raw is None or raw == "":
        return None
    if not raw.isdecimal():
        raise _bad("resourceVersion", raw, "not a resource version this server gave out")
    return int(raw)


def parse_list_options(query: Mapping[str, str]) -> ListOptions:
    """The request's list options; a 400 for a parameter that does not parse, a 422 for
    a combination Kubernetes refuses."""
    options = ListOptions(
        watch=wants_watch(query),
        selection=parse_selection(query.get("labelSelector"), query.get("fieldSelector")),
        limit=_whole(query, "limit") or None,
        continue_token=query.get("continue") or None,
        resource_version=_resource_version(query),
        resource_version_match=query.get("resourceVersionMatch") or "",
        timeout_seconds=_whole(query, "timeoutSeconds") or None,
        allow_bookmarks=bool(parse_bool(query, "allowWatchBookmarks")),
        send_initial_events=parse_bool(query, "sendInitialEvents"),
    )
    causes = _validate(options, query.get("resourceVersion") or "")
    if causes:
        details = "; ".join(f"{c.field}: {c.message}" for c in causes)
        raise ApiError(
            422,
            f'ListOptions.meta.k8s.io "" is invalid: {details}',
            causes=causes,
            details={"group": "meta.k8s.io", "kind": "ListOptions", "name": ""},
        )
    if options.continue_token and options.resource_version:
        raise ApiError(400, "specifying resource version is not allowed when using continue")
    return options


def too_large(asked: int, head: int) -> ApiError:
    """The refusal of a ``resourceVersion`` after the store's head (Kubernetes' 504
    "Too large resource version", with Retry-After: the client asks again)."""
    message = f"Too large resource version: {asked}, current: {head}"
    return ApiError(
        504,
        message,
        reason="Timeout",
        causes=[Cause(field="resourceVersion", message=message, reason="ResourceVersionTooLarge")],
        details={"retryAfterSeconds": 1},
        headers={"Retry-After": "1"},
    )
