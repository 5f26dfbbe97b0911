"""What a kind's fields say about themselves: their description, allowed values, default
and type, as ``reconcile explain`` prints them and the HTTP API's OpenAPI documents
publish them (``kubectl explain``), from the one source both read: the attrs fields of
the kind's spec and status classes and their ``doc_field`` metadata.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import attrs

__all__ = ["class_description", "default_text", "field_description", "plain", "type_name"]

_RST = re.compile(r":[a-z]+:`~?([^`]+)`|``([^`]+)``")


def plain(text: str) -> str:
    """Docstring markup as plain text: ````x```` and ``:mod:`x``` become `x`."""
    return _RST.sub(lambda m: f"`{m.group(1) or m.group(2)}`", text)


def class_description(cls: type[Any]) -> str:
    """A spec or status class's docstring as plain text (empty when it has none)."""
    return plain(inspect.getdoc(cls) or "")


def field_description(field: attrs.Attribute[Any]) -> str:
    """A field's description (``doc``) with its allowed values (``values``) appended."""
    values = field.metadata.get("values")
    doc = str(field.metadata.get("doc", ""))
    if values:
        doc = f"{doc} One of: {', '.join(values)}.".strip()
    return doc


def default_text(field: attrs.Attribute[Any]) -> str | None:
    """A field's default as a manifest would spell it (``"0644"``; ``empty`` for a
    factory); None when the field is required."""
    if field.default is attrs.NOTHING:
        return None
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return "empty"
    return json.dumps(field.default)


def type_name(annotation: object) -> str:
    """A field's annotation as a short text (``str | None``)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return str(text).replace("typing.", "")
