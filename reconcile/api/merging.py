"""RFC 7386 JSON merge patch: a mapping merges key by key, ``null`` deletes, anything
else (lists included) replaces."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["merge_patch"]


_ATOMS = frozenset({str, int, float, bool, type(None)})


def merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` applied; neither argument is modified."""
    if type(patch) in _ATOMS:
        return patch  # immutable: nothing to copy (an annotation's value, say)
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
