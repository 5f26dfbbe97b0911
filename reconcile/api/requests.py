"""Checks of requests that are not manifests: merge patches and recorded actions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconcile.errors import FieldError, InvalidError
from reconcile.store.encoding import dumps

__all__ = ["PATCHABLE_METADATA", "check_action", "check_patch"]

PATCHABLE_METADATA = frozenset({"labels", "annotations"})
_EVENT_TYPE = re.compile(r"[A-Z][A-Za-z0-9]{0,63}")


_CHECKED_TYPES: set[str] = set()  # the few event types a process records, checked once
_MAX_REMEMBERED = 4096


def check_action(event_type: str, data: Mapping[str, Any] | None) -> None:
    """An action event needs a CamelCase type and JSON data."""
    if event_type not in _CHECKED_TYPES:
        if not isinstance(event_type, str) or not _EVENT_TYPE.fullmatch(event_type):
            raise InvalidError([FieldError("event_type", "must be CamelCase, like CreateRequested")])
        if len(_CHECKED_TYPES) < _MAX_REMEMBERED:
            _CHECKED_TYPES.add(event_type)
    if data is None:
        return
    try:
        dumps(data)
    except TypeError as exc:
        raise InvalidError([FieldError("data", f"must be JSON data ({exc})")]) from None


def check_patch(patch: Mapping[str, Any]) -> None:
    """A merge patch may touch spec, labels and annotations only."""
    if not isinstance(patch, Mapping):
        raise InvalidError([FieldError("", "a merge patch must be a mapping")])
    errors = [FieldError(str(k), "cannot be patched") for k in patch if k not in ("spec", "metadata")]
    meta = patch.get("metadata", {})
    if not isinstance(meta, Mapping):
        errors.append(FieldError("metadata", "expected a mapping"))
    else:
        errors += [
            FieldError(f"metadata.{k}", "cannot be patched") for k in meta if k not in PATCHABLE_METADATA
        ]
    if "spec" in patch and not isinstance(patch["spec"], Mapping):
        errors.append(FieldError("spec", "expected a mapping"))
    if errors:
        raise InvalidError(errors)
