"""The two spellings of a document: Kubernetes' camelCase, and the snake_case of before.

Documents (manifests, ``get -o yaml``, the log's bodies, the Python API's dicts) spell
every field as Kubernetes does: ``apiVersion``, ``metadata.resourceVersion``,
``spec.forceDestroy``; attrs classes keep Python's snake_case. The mapping is made here
once, from the field names (:func:`camel`), and the one converter
(:mod:`reconcile.model.serde`) applies it to every attrs class, so a new kind gets it for
free. Map keys inside fields (labels, annotations, tags, a file's ``content``) are user
data and never renamed.

The release before wrote snake_case. :func:`respell` turns such a document into the new
spelling, walking it with its types (so it knows a field from a user's map key), and says
which keys were in which spelling: admission accepts an old document with a warning and
refuses one that mixes both; a body the store wrote before the change is read through it.
"""

from __future__ import annotations

import collections.abc
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from reconcile.model.meta import ObjectMeta

__all__ = ["ENVELOPE", "Respelled", "camel", "camel_path", "is_old_body", "respell", "respell_document"]

#: The envelope's fields in the new spelling, by their old one.
ENVELOPE = {"api_version": "apiVersion"}


@functools.cache
def camel(name: str) -> str:
    """``force_destroy`` -> ``forceDestroy``; a name without an underscore is its own."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_BRACKETS = re.compile(r"(\[[^\]]*\])")


def camel_path(path: str) -> str:
    """A field path in the new spelling: each field name camelCased, what stands in
    brackets (an index, a map key) left as it is (``tags['cost_center']`` stays)."""
    parts = _BRACKETS.split(path)
    return "".join(part if part.startswith("[") else ".".join(map(camel, part.split("."))) for part in parts)


@attrs.frozen
class Respelled:
    """A document in the new spelling, and the keys it had in each spelling."""

    data: Any
    #: ``(old path, new path)`` of every key that was in the old spelling.
    old: tuple[tuple[str, str], ...] = ()
    #: The path of every key in the new spelling that the old one spells differently.
    new: tuple[str, ...] = ()

    def summary(self, most: int = 3) -> str:
        """The old keys and their new spelling, the first ``most`` of them, for a message.

        ``api_version -> apiVersion, spec.force_destroy -> spec.forceDestroy and 2 more``.
        """
        shown = ", ".join(f"{old} -> {new}" for old, new in self.old[:most])
        return shown + (f" and {len(self.old) - most} more" if len(self.old) > most else "")


@attrs.frozen
class _Fields:
    """One attrs class's fields: each name's type by both spellings, and the new name."""

    types: dict[str, Any]
    new_names: dict[str, str]
    old_names: frozenset[str]
    renamed: frozenset[str]


@functools.cache
def _fields(cls: type) -> _Fields:
    hints = typing.get_type_hints(cls)
    types_: dict[str, Any] = {}
    new_names: dict[str, str] = {}
    old_names, renamed = set(), set()
    for field in attrs.fields(cls):
        new = camel(field.name)
        kind = hints.get(field.name, Any)
        types_[field.name] = types_[new] = kind
        new_names[field.name] = new_names[new] = new
        if new != field.name:
            old_names.add(field.name)
            renamed.add(new)
    return _Fields(types_, new_names, frozenset(old_names), frozenset(renamed))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Walk:
    def __init__(self) -> None:
        self.old: list[tuple[str, str]] = []
        self.new: list[str] = []

    def value(self, data: Any, type_: Any, path: str) -> Any:
        if data is None or type_ is Any:
            return data
        origin = typing.get_origin(type_)
        if origin is typing.Union or origin is types.UnionType:
            members = [m for m in typing.get_args(type_) if m is not type(None)]
            return self.value(data, members[0], path) if len(members) == 1 else data
        cls = origin or type_
        if isinstance(cls, type) and attrs.has(cls):
            return self.fields(data, cls, path) if isinstance(data, Mapping) else data
        args = typing.get_args(type_)
        if origin in (dict, collections.abc.Mapping) and len(args) == 2 and isinstance(data, Mapping):  # noqa: PLR2004
            return {key: self.value(item, args[1], f"{path}[{key!r}]") for key, item in data.items()}
        if origin in (list, tuple, collections.abc.Sequence) and args and isinstance(data, list):
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004
                return data
            return [self.value(item, args[0], f"{path}[{index}]") for index, item in enumerate(data)]
        return data

    def fields(self, data: Mapping[str, Any], cls: type, path: str) -> dict[str, Any]:
        known = _fields(cls)
        result: dict[str, Any] = {}
        for key, item in data.items():
            new = known.new_names.get(key) if isinstance(key, str) else None
            if new is None:  # not a field: the converter names it unknown
                result[key] = item
                continue
            if key in known.old_names:
                self.old.append((_join(path, key), _join(path, new)))
            elif key in known.renamed:
                self.new.append(_join(path, key))
            result[new] = self.value(item, known.types[key], _join(path, new))
        return result


def respell(data: Any, type_: Any, path: str = "") -> Respelled:
    """``data``, a value of ``type_`` in either spelling, in the new one."""
    walk = _Walk()
    value = walk.value(data, type_, path)
    return Respelled(value, tuple(walk.old), tuple(walk.new))


def respell_document(document: Mapping[str, Any], spec_type: Any = Any, status_type: Any = Any) -> Respelled:
    """A whole document (envelope, metadata, spec and status) in the new spelling; spec
    and status as ``Any`` (a kind not known here) are left as they are."""
    walk = _Walk()
    result: dict[str, Any] = {}
    parts = {"metadata": ObjectMeta, "spec": spec_type, "status": status_type}
    for key, item in document.items():
        if key in ENVELOPE:
            walk.old.append((key, ENVELOPE[key]))
            result[ENVELOPE[key]] = item
        elif key in ENVELOPE.values():
            walk.new.append(key)
            result[key] = item
        elif key in parts:
            result[key] = walk.value(item, parts[key], key)
        else:
            result[key] = item
    return Respelled(result, tuple(walk.old), tuple(walk.new))


def is_old_body(body: Mapping[str, Any]) -> bool:
    """Whether a stored body was written in the old spelling (every body has the
    envelope's version field, in one spelling or the other)."""
    return "api_version" in body
