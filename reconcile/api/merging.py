"""RFC 7386 JSON merge patch: a mapping merges key by key, ``null`` deletes, anything
else (lists included) replaces."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["json_equal", "merge_diff", "merge_patch"]


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


def merge_diff(old: Any, new: Any) -> dict[str, Any]:
    """The merge patch that turns mapping ``old`` into mapping ``new``: what changed,
    key by key, ``null`` for a key ``new`` lacks. ``merge_patch(old, merge_diff(old,
    new)) == new`` for any JSON mappings, except that a key ``new`` holds as ``null``
    comes out absent (a merge patch cannot say "set to null"; admission then gives the
    field its default, which for an optional field is that null)."""
    old = old if isinstance(old, Mapping) else {}
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if key in old and json_equal(before, value):
            continue
        if value is None:
            if before is not None:
                patch[key] = None
        elif isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = merge_diff(before, value)
        else:
            patch[key] = copy.deepcopy(value)
    return patch


def json_equal(a: Any, b: Any) -> bool:
    """JSON's equality, which Python's ``==`` is not: ``true`` is not ``1`` (nor ``1.0``),
    while ``1`` is ``1.0``; mappings compare key by key, lists item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b
