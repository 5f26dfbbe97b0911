r"""Naming rules, as Kubernetes has them (``k8s.io/apimachinery/pkg/util/validation``).

Names are DNS-1123 subdomains, namespaces DNS-1123 labels; label and annotation keys are
qualified names with an optional DNS-subdomain prefix; label values are short and plain.
Each check returns the reasons a value is invalid, empty when it is valid. They are pure
functions of short strings that repeat (namespaces, label keys), so results are cached.

:func:`unstorable` is the one check of a whole document every kind gets: the store, the
event log and every wire format speak JSON in UTF-8 with 64-bit integers (SQLite's
INTEGER, orjson), so a string that does not encode as UTF-8 (a lone surrogate, which a
JSON ``"\udcff"`` escape carries into Python) or an integer outside the signed 64-bit
range can never be stored or sent. Refused at admission with its field path, it never
reaches an encoder that would raise a bare ``TypeError`` half-way through a write.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_DEPTH",
    "dns1123_label",
    "dns1123_subdomain",
    "label_value",
    "plain_and_storable",
    "qualified_name",
    "unstorable",
]

#: The integers a document may hold: SQLite's INTEGER, and what every JSON encoder here takes.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: Levels of nesting one document may have (a manifest needs about ten).
MAX_DEPTH = 64
_OUT_OF_RANGE = f"integer outside the signed 64-bit range ({INT64_MIN} to {INT64_MAX})"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@functools.lru_cache(maxsize=4096)
def dns1123_label(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a DNS-1123 label (a namespace)."""
    if len(value) > _LABEL_MAX:
        return ("must be no more than 63 characters",)
    if not _DNS1123_LABEL.fullmatch(value):
        return (
            (
                "must consist of lower case alphanumeric characters or '-', and must start "
                "and end with an alphanumeric character"
            ),
        )
    return ()


@functools.lru_cache(maxsize=4096)
def dns1123_subdomain(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a DNS-1123 subdomain (an object name)."""
    if len(value) > _SUBDOMAIN_MAX:
        return ("must be no more than 253 characters",)
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            (
                "must consist of lower case alphanumeric characters, '-' or '.', and must "
                "start and end with an alphanumeric character"
            ),
        )
    return ()


@functools.lru_cache(maxsize=4096)
def qualified_name(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a qualified name (a label, annotation or finalizer key)."""
    prefix, slash, name = value.rpartition("/")
    reasons: list[str] = []
    if slash:
        if not prefix:
            reasons.append("prefix part must be non-empty")
        else:
            reasons.extend(f"prefix part {r}" for r in dns1123_subdomain(prefix))
    if not name:
        reasons.append("name part must be non-empty")
    elif len(name) > _LABEL_MAX:
        reasons.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.fullmatch(name):
        reasons.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character"
        )
    return tuple(reasons)


@functools.lru_cache(maxsize=4096)
def label_value(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a valid label value."""
    if len(value) > _LABEL_MAX:
        return ("must be no more than 63 characters",)
    if not _LABEL_VALUE.fullmatch(value):
        return (
            (
                "must be empty or consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character"
            ),
        )
    return ()


def _encodes(text: str) -> bool:
    if text.isascii():  # nearly every string: no encoding needed to know
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_reason(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        position = exc.start
        return (
            f"not valid Unicode text: lone surrogate {ascii(text[position])[1:-1]} at character "
            f"{position} (it has no UTF-8 encoding; text must be Unicode scalar values)"
        )
    return ""  # pragma: no cover - only called for a string that does not encode


def _bad_scalar(value: object) -> str:
    """Why ``value`` cannot be stored ("" when it can, or when it is not a scalar)."""
    if isinstance(value, str):
        return "" if _encodes(value) else _text_reason(value)
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        return _OUT_OF_RANGE
    return ""


def _any_unstorable(data: object) -> bool:
    """Whether anything in ``data`` cannot be stored: one pass without paths (the common
    case, every document of a bulk apply, finds nothing)."""
    stack: list[object] = [data]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if not _encodes(item):  # type: ignore[arg-type]
                return True
        elif kind is int:
            if not INT64_MIN <= item <= INT64_MAX:  # type: ignore[operator]
                return True
        elif kind is dict or (kind is not list and isinstance(item, Mapping)):
            stack.extend(item.keys())  # type: ignore[attr-defined]
            stack.extend(item.values())  # type: ignore[attr-defined]
        elif kind is list or kind is tuple:
            stack.extend(item)  # type: ignore[arg-type]
        elif _bad_scalar(item):  # subclasses of str and int
            return True
    return False


#: The scalar types a plain document holds besides strings and integers.
_OTHER_SCALARS = frozenset({float, bool, type(None)})


def plain_and_storable(data: object, max_depth: int) -> bool:
    """Whether ``data`` is plain JSON-like data (dicts with ASCII string keys, lists,
    ASCII strings, 64-bit integers, floats, booleans, None) nested at most ``max_depth``
    levels: one walk, for every document of a bulk apply. True means both the depth check
    (:func:`reconcile.model.manifests.check_depth`) and :func:`unstorable` would find
    nothing; False only that they must be asked (a non-ASCII string, a Mapping that is
    not a dict, a tuple: those exact checks decide)."""
    level: list[object] = [data]
    depth = 1
    while level:
        below: list[object] = []
        for item in level:
            if depth > max_depth:
                return False
            values: Iterable[object]
            if type(item) is dict:
                for key in item:
                    if type(key) is not str or not key.isascii():
                        return False
                values = item.values()
            elif type(item) is list:
                values = item
            else:
                return False
            for value in values:
                kind = type(value)
                if kind is str:
                    if not value.isascii():
                        return False
                elif kind is int:
                    if not INT64_MIN <= value <= INT64_MAX:
                        return False
                elif kind is dict or kind is list:
                    below.append(value)
                elif kind not in _OTHER_SCALARS:
                    return False
        level = below
        depth += 1
    return True


def _child(path: str, key: object) -> str:
    if isinstance(key, str) and _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}" if path else key
    shown = ascii(key) if isinstance(key, str) and not _encodes(key) else repr(key)
    if isinstance(key, int) and not INT64_MIN <= key <= INT64_MAX:
        shown = "<integer key>"  # a huge integer's digits are not a path
    return f"{path}[{shown}]"


def unstorable(data: object, path: str = "") -> list[tuple[str, str]]:
    """``(field path, reason)`` for every string (value or key) in ``data`` that does not
    encode as UTF-8 and every integer outside the signed 64-bit range; empty when there
    is none. ``data`` is plain decoded data (mappings, lists, scalars) already checked
    for depth (:func:`reconcile.model.manifests.check_depth`); ``path`` names ``data``
    itself (``metadata.annotations`` for a patch of annotations)."""
    if not _any_unstorable(data):
        return []
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, object]] = [(path, data)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, Mapping):
            children = list(item.items())
            for key, value in reversed(children):
                stack.append((_child(where, key), value))
            for key, _ in children:
                if reason := _bad_scalar(key):
                    found.append((_child(where, key), f"key {reason}"))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{index}]", value) for index, value in reversed(list(enumerate(item))))
        elif reason := _bad_scalar(item):
            found.append((where, reason))
    return found
