"""OpenAPI schemas of a kind's spec and status, generated from their attrs classes.

Each field is a property named as documents spell it (camelCase), typed from its
annotation (``str`` a string, ``int`` an integer, ``tuple[str, ...]`` an array of
strings, ``dict[str, X]`` an object of X, an attrs class an object of its own fields, an
enum or a field's ``values`` an ``enum``), described by its ``doc_field`` description
(:mod:`reconcile.model.fields`, which ``reconcile explain`` prints too), with its default.
A field without a default is ``required``. An annotation this cannot read (a forward
reference that does not resolve, ``Any``) is an object of any fields
(``x-kubernetes-preserve-unknown-fields``), never a failure: a schema is documentation.
"""

from __future__ import annotations

import datetime
import enum
import json
import types
import typing
from collections import abc
from collections.abc import Mapping
from typing import Any

import attrs

from reconcile.model.fields import class_description, field_description
from reconcile.model.spelling import camel

__all__ = ["class_schema", "prose", "type_schema"]

_SCALARS: Mapping[type, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer", "format": "int64"},
    float: {"type": "number", "format": "double"},
    bytes: {"type": "string", "format": "byte"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
}
_ANY: Mapping[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
#: How deep nested attrs classes are written out (a class that holds itself stops here).
_DEPTH = 8


_COLLECTIONS = (list, tuple, set, frozenset, abc.Sequence, abc.Set, abc.MutableSet, abc.Iterable)
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def prose(text: str) -> str:
    """A docstring as a description: each paragraph's lines joined into one (kubectl
    wraps descriptions itself), paragraphs apart by a blank line."""
    paragraphs = [" ".join(line.strip() for line in block.splitlines()) for block in text.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _hints(cls: type[Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable annotation leaves its fields untyped
        return {}


def type_schema(annotation: Any, depth: int = 0) -> dict[str, Any]:
    """The schema of one annotation."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        present = [a for a in arguments if a is not type(None)]
        inner = type_schema(present[0], depth) if len(present) == 1 else dict(_ANY)
        return {**inner, "nullable": True} if len(present) < len(arguments) else inner
    if origin is typing.Literal:
        values = list(arguments)
        kind = "string" if all(isinstance(v, str) for v in values) else "integer"
        return {"type": kind, "enum": values}
    if origin in _COLLECTIONS:
        items = [a for a in arguments if a is not Ellipsis]
        item = type_schema(items[0], depth) if len(set(items)) == 1 else dict(_ANY)
        return {"type": "array", "items": item}
    if origin in _MAPPINGS:
        value = type_schema(arguments[1], depth) if len(arguments) == 2 else dict(_ANY)  # noqa: PLR2004
        return {"type": "object", "additionalProperties": value}
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            values = [member.value for member in annotation]
            kind = "string" if all(isinstance(v, str) for v in values) else "integer"
            return {"type": kind, "enum": values}
        if attrs.has(annotation) and depth < _DEPTH:
            return class_schema(annotation, depth + 1)
        for scalar, schema in _SCALARS.items():
            if issubclass(annotation, scalar):
                return dict(schema)
    return dict(_ANY)


def _default(field: attrs.Attribute[Any]) -> tuple[bool, Any]:
    """Whether the field has a default a schema can state, and that default."""
    if field.default is attrs.NOTHING or isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return False, None
    value = field.default.value if isinstance(field.default, enum.Enum) else field.default
    try:
        json.dumps(value)
    except TypeError:
        return False, None
    return True, value


def class_schema(cls: type[Any], depth: int = 0) -> dict[str, Any]:
    """The schema of an attrs class: an object of its fields."""
    hints = _hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        name = camel(field.name)
        schema = type_schema(hints.get(field.name, Any), depth)
        description = field_description(field)
        if description:
            schema["description"] = description
        values = field.metadata.get("values")
        if values and "enum" not in schema:
            schema["enum"] = list(values)
        has_default, default = _default(field)
        if has_default and default is not None:
            schema["default"] = default
        if field.default is attrs.NOTHING:
            required.append(name)
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    description = prose(class_description(cls))
    if description:
        result["description"] = description
    if required:
        result["required"] = required
    return result
