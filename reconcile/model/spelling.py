"""The two spellings of a document: Kubernetes' camelCase, and the snake_case of before.

Documents (manifests, ``get -o yaml``, the log's bodies, the Python API's dicts) spell
every field as Kubernetes does: ``apiVersion``, ``metadata.resourceVersion``,
``spec.forceDestroy``; attrs classes keep Python's snake_case. The mapping is made here
once, from the field names (:func:`camel`), and the one converter
(:mod:`reconcile.model.serde`) applies it to every attrs class, so a new kind gets it for
free. Map keys inside fields (labels, annotations, tags, a file's ``content``) are user
data and never renamed.

The release before wrote snake_case. :func:`respell_document` turns such a document into the new
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

__all__ = ["ENVELOPE", "Respelled", "camel", "camel_path", "is_old_body", "respell_document"]

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


#: What a walker records: the old keys found (old path, new path), the new keys found.
_Found = tuple[list[tuple[str, str]], list[str]]
#: Walks a value of one type: returns it in the new spelling (the same object when no
#: key in it changed), recording what it found.
_Walker = typing.Callable[[Any, str, _Found], Any]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@functools.cache
def _walker(type_: Any) -> _Walker | None:
    """The walker of ``type_``, made once per type; None for a type that holds no attrs
    class (a string, a map of strings, a list of numbers): nothing in it is a field name,
    so a document's user data and leaves are never visited."""
    if type_ is Any:
        return None
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Union or origin is types.UnionType:
        members = [m for m in args if m is not type(None)]
        return _walker(members[0]) if len(members) == 1 else None
    cls = origin or type_
    if isinstance(cls, type) and attrs.has(cls):
        return _class_walker(cls)
    if origin in (dict, collections.abc.Mapping) and len(args) == 2:  # noqa: PLR2004
        return _map_walker(_walker(args[1]))
    if origin in (list, tuple, collections.abc.Sequence) and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004
            return None
        return _list_walker(_walker(args[0]))
    return None


def _class_walker(cls: type) -> _Walker:
    hints = typing.get_type_hints(cls)
    #: Each key a field may have, in either spelling: (its new spelling, 1 if it is an old
    #: spelling, 2 if a new one the old spells differently, else 0; the field's walker).
    #: Filled on first use: a class may hold itself.
    plan: dict[str, tuple[str, int, _Walker | None]] = {}

    def fill() -> None:
        made: dict[str, tuple[str, int, _Walker | None]] = {}
        for field in attrs.fields(cls):
            new, child = camel(field.name), _walker(hints.get(field.name, Any))
            made[new] = (new, 2 if new != field.name else 0, child)
            if new != field.name:
                made[field.name] = (new, 1, child)
        plan.update(made)  # whole, in one step: another thread sees it empty or complete

    def walk(data: Any, path: str, found: _Found) -> Any:
        if not isinstance(data, Mapping):
            return data
        if not plan:
            fill()
        result: dict[Any, Any] | None = None
        for index, (key, item) in enumerate(data.items()):
            entry = plan.get(key) if isinstance(key, str) else None
            new, value = key, item
            if entry is not None:
                new, spelling, child = entry
                if spelling == 1:
                    found[0].append((_join(path, key), _join(path, new)))
                elif spelling == 2:  # noqa: PLR2004 - the new spelling
                    found[1].append(_join(path, key))
                if child is not None:
                    value = child(item, _join(path, new), found)
            if result is None and (new != key or value is not item):
                result = dict(list(data.items())[:index])
            if result is not None:
                result[new] = value
        return data if result is None else result

    return walk


def _map_walker(child: _Walker | None) -> _Walker | None:
    if child is None:
        return None

    def walk(data: Any, path: str, found: _Found) -> Any:
        if not isinstance(data, Mapping):
            return data
        result = {key: child(item, f"{path}[{key!r}]", found) for key, item in data.items()}
        return data if all(result[k] is data[k] for k in data) else result

    return walk


def _list_walker(child: _Walker | None) -> _Walker | None:
    if child is None:
        return None

    def walk(data: Any, path: str, found: _Found) -> Any:
        if not isinstance(data, list | tuple):  # a tuple: a Python caller's manifest
            return data
        result = [child(item, f"{path}[{index}]", found) for index, item in enumerate(data)]
        return data if all(a is b for a, b in zip(result, data, strict=True)) else result

    return walk


def respell_document(document: Mapping[str, Any], spec_type: Any = Any, status_type: Any = Any) -> Respelled:
    """A whole document (envelope, metadata, spec and status) in the new spelling; spec
    and status as ``Any`` (a kind not known here) are left as they are. The document
    itself when nothing in it is in the old spelling."""
    found: _Found = ([], [])
    walkers = {"metadata": _walker(ObjectMeta), "spec": _walker(spec_type), "status": _walker(status_type)}
    result: dict[str, Any] | None = None
    for index, (key, item) in enumerate(document.items()):
        new, value = ENVELOPE.get(key, key), item
        if new != key:
            found[0].append((key, new))
        elif key in _NEW_ENVELOPE:
            found[1].append(key)
        elif (walker := walkers.get(key)) is not None:
            value = walker(item, key, found)
        if result is None and (new != key or value is not item):
            result = dict(list(document.items())[:index])
        if result is not None:
            result[new] = value
    return Respelled(document if result is None else result, tuple(found[0]), tuple(found[1]))


_NEW_ENVELOPE = frozenset(ENVELOPE.values())


def is_old_body(body: Mapping[str, Any]) -> bool:
    """Whether a stored body was written in the old spelling (every body has the
    envelope's version field, in one spelling or the other)."""
    return "api_version" in body
