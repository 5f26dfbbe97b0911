"""Kubernetes' ``omitempty`` on the wire: optional fields that are null are left out.

The store keeps every field of a spec and status, nulls included (``contentBase64:
null``); Kubernetes leaves an optional field it does not hold out of a document, so
``kubectl describe`` and ``get -o yaml`` show only what is set. Here a field is left out
only when its value is null *and* its attrs default is null (or an empty list or mapping
whose default is an empty container: ``conditions: []``): a client that sends the
document back (a ``PUT`` of what it got, a merge patch computed on it) gets the very
object it read, the missing field defaulting to that same null. A field whose default is
something else keeps its null (leaving it out would change it), and nothing below a
free-form mapping (a ``dict[str, Any]`` such as a bucket policy) is touched: there a null
is data. Empty metadata (``labels: {}``, ``finalizers: []``) is left out as Kubernetes
does; a missing one reads as empty.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from reconcile.model.spelling import camel

__all__ = ["omit_empty_metadata", "omit_null_fields"]

#: Metadata fields an empty value of is left out (a missing one reads as empty).
_EMPTY_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")

#: Per field of an attrs class: its document key, whether a null there is left out (its
#: default is null), whether an empty list or mapping there is (its default is an empty
#: container), and the attrs class of what it holds, if any (its own fields then looked
#: at the same way, in a mapping or in each item of a list).
_Plan = tuple[tuple[str, bool, bool, type[Any] | None], ...]
_ABSENT: Any = object()


def _attrs_class_in(hint: Any) -> type[Any] | None:
    """The attrs class a field holds: ``T``, ``list[T]``, ``tuple[T, ...]``, and any of
    them ``| None``."""
    if isinstance(hint, type) and attrs.has(hint):
        return hint
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType, list, tuple):
        found = {
            cls
            for arg in typing.get_args(hint)
            if arg is not type(None) and arg is not Ellipsis
            if (cls := _attrs_class_in(arg)) is not None
        }
        return found.pop() if len(found) == 1 else None
    return None


_PLANS: dict[type[Any], _Plan] = {}


def _plan(cls: type[Any]) -> _Plan:
    found = _PLANS.get(cls)
    if found is None:
        found = _PLANS[cls] = _make_plan(cls)
    return found


def _make_plan(cls: type[Any]) -> _Plan:
    """Only the fields omission may touch: those whose default is null, and those that
    hold an attrs class (the rest are never looked at)."""
    if not attrs.has(cls):
        return ()
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # pragma: no cover - an annotation that cannot be resolved
        hints = {}
    plan = (
        (camel(f.name), f.default is None, _empty_default(f), _attrs_class_in(hints.get(f.name)))
        for f in attrs.fields(cls)
    )
    return tuple(entry for entry in plan if entry[1] or entry[2] or entry[3] is not None)


def _empty_default(field: attrs.Attribute[Any]) -> bool:
    """Whether ``field``'s default is an empty container (``()``, or a factory of an empty
    list, dict, tuple, set): an empty list or mapping there reads back as its default."""
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            return False
        default = default.factory()
    return isinstance(default, (list, dict, tuple, set, frozenset)) and len(default) == 0


def omit_null_fields(value: Any, cls: type[Any] | None) -> Any:
    """``value`` (``cls`` unstructured: a mapping) without its null fields whose default
    is null and its empty lists and mappings whose default is an empty container, at
    every level of attrs classes below it; anything else as it is. ``value`` itself is
    returned when nothing is left out (it is never changed)."""
    plan = _plan(cls) if cls is not None else ()
    if not plan or not isinstance(value, Mapping):
        return value
    out: dict[str, Any] | None = None
    for key, optional, empty, nested in plan:
        item = value.get(key, _ABSENT)
        if item is _ABSENT:
            continue
        if (optional and item is None) or (empty and isinstance(item, (list, dict)) and not item):
            if out is None:
                out = dict(value)
            del out[key]
            continue
        if item is None:
            continue
        if nested is None:
            continue
        if isinstance(item, Mapping):
            changed = omit_null_fields(item, nested)
        elif isinstance(item, list):
            items = [omit_null_fields(element, nested) for element in item]
            changed = items if any(a is not b for a, b in zip(items, item, strict=True)) else item
        else:
            continue
        if changed is not item:
            if out is None:
                out = dict(value)
            out[key] = changed
    return value if out is None else out


def omit_empty_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` without null fields and without empty labels, annotations, finalizers and
    owner references."""
    return {k: v for k, v in meta.items() if v is not None and not (k in _EMPTY_METADATA and not v)}
