"""A write's options, from its query (Kubernetes' ``CreateOptions``, ``UpdateOptions``,
``PatchOptions``): ``dryRun``, ``fieldManager``, ``fieldValidation`` and ``force``.

A value Kubernetes would refuse is refused as it does: ``422 Invalid`` naming the
option (``PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be
specified for non-apply patch``).

The field manager is the ``fieldManager`` parameter; without one, the first part of the
``User-Agent`` (``kubectl`` of ``kubectl/v1.32.0 (linux/amd64) kubernetes/...``), as
Kubernetes does; without either, ``reconcile-http``.
"""

from __future__ import annotations

from typing import Literal, cast

import attrs
from starlette.requests import Request

from reconcile.http.errors import ApiError, Cause

__all__ = [
    "DEFAULT_MANAGER",
    "FIELD_VALIDATIONS",
    "MAX_MANAGER_LENGTH",
    "WriteOptions",
    "boolean",
    "write_options",
]

#: The field manager of a request that names none and has no User-Agent.
DEFAULT_MANAGER = "reconcile-http"
#: Kubernetes' limit on a field manager's name.
MAX_MANAGER_LENGTH = 128
FIELD_VALIDATIONS = ("Ignore", "Strict", "Warn")
FieldValidation = Literal["Ignore", "Strict", "Warn"]
#: A boolean query parameter as Kubernetes reads it (Go's ``strconv.ParseBool``: the
#: Python client sends ``True``).
_BOOLEANS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


@attrs.frozen
class WriteOptions:
    """What a write's query asks for."""

    #: ``dryRun=All``: checked and answered, nothing stored.
    dry_run: bool
    #: Who the write is recorded as (the events' actor, the managed fields' manager).
    manager: str
    #: What becomes of unknown fields: ``Strict`` (refused), ``Warn`` (dropped, with a
    #: ``Warning`` header each; the default) or ``Ignore`` (dropped).
    field_validation: FieldValidation
    #: ``force=true`` of an apply patch: take over fields other managers own.
    force: bool
    #: Whether the request named its field manager (an apply patch must).
    manager_given: bool


def boolean(value: str) -> bool | None:
    """A boolean query parameter's value as Kubernetes reads it; None when it is not one."""
    return _BOOLEANS.get(value)


def _invalid(options: str, field: str, message: str, reason: str = "FieldValueNotSupported") -> ApiError:
    return ApiError(
        422,
        f'{options}.meta.k8s.io "" is invalid: {field}: {message}',
        causes=[Cause(field=field, message=message, reason=reason)],
        details={"group": "meta.k8s.io", "kind": options},
    )


def _manager(request: Request) -> str:
    agent = request.headers.get("user-agent", "")
    return agent.split("/", 1)[0].strip() or DEFAULT_MANAGER


def write_options(request: Request, options: str, *, apply: bool = False) -> WriteOptions:
    """The write options of ``request``; ``options`` names them in a refusal
    (``CreateOptions``, ``UpdateOptions``, ``PatchOptions``, ``DeleteOptions``);
    ``apply``: an apply patch, which must name its field manager and alone may force."""
    query = request.query_params
    dry_run = query.getlist("dryRun")
    for value in dry_run:
        if value != "All":
            raise _invalid(options, "dryRun", f'Unsupported value: "{value}": supported values: "All"')
    validation = query.get("fieldValidation") or "Warn"
    if validation not in FIELD_VALIDATIONS:
        supported = ", ".join(f'"{v}"' for v in FIELD_VALIDATIONS)
        raise _invalid(
            options, "fieldValidation", f'Unsupported value: "{validation}": supported values: {supported}'
        )
    given = query.get("fieldManager") or ""
    if len(given) > MAX_MANAGER_LENGTH:
        raise _invalid(
            options,
            "fieldManager",
            f"Too long: may not be more than {MAX_MANAGER_LENGTH} bytes",
            reason="FieldValueTooLong",
        )
    if not given.isprintable():
        raise _invalid(
            options,
            "fieldManager",
            "Invalid value: must only contain printable characters",
            "FieldValueInvalid",
        )
    force = query.get("force")
    if force is not None and force not in _BOOLEANS:
        raise ApiError(400, f'force: "{force}" is not a boolean (true or false)')
    if force is not None and not apply:
        raise _invalid(
            options, "force", "Forbidden: may not be specified for non-apply patch", "FieldValueForbidden"
        )
    if apply and not given:
        raise _invalid(
            options, "fieldManager", "Required value: is required for apply patch", "FieldValueRequired"
        )
    return WriteOptions(
        dry_run=bool(dry_run),
        manager=given or _manager(request),
        field_validation=cast("FieldValidation", validation),
        force=_BOOLEANS.get(force or "false", False),
        manager_given=bool(given),
    )
