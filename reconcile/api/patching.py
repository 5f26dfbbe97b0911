"""RFC 6902 JSON patch: a list of operations (``add``, ``remove``, ``replace``, ``move``,
``copy``, ``test``) applied in order to a JSON document, addressed by RFC 6901 JSON
pointers (``/spec/records/0/ttl``; ``~1`` is a ``/`` in a key, ``~0`` a ``~``).

All or nothing, as the RFC says: the operations work on a copy, and the first that fails
(a member that is not there, an index out of range, a ``test`` whose value differs)
fails the whole patch with :class:`~reconcile.errors.InvalidError`, naming the operation
by its index (``patch[2]``) and saying why. The document given is never changed.

Written here rather than taken from the ``jsonpatch`` distribution: it is not among
reconcile's dependencies, and the six operations are small enough to own and test.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from reconcile.api.merging import json_equal
from reconcile.errors import FieldError, InvalidError

__all__ = ["OPERATIONS", "json_patch"]

OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
_INDEX = re.compile(r"0|[1-9][0-9]*")
_END = "-"


class _Failed(Exception):  # noqa: N818 - internal: becomes one FieldError
    """One operation cannot be applied."""


def _tokens(pointer: object, member: str) -> list[str]:
    """The reference tokens of an RFC 6901 pointer (``""`` is the whole document)."""
    if not isinstance(pointer, str):
        raise _Failed(f"{member}: expected a string (a JSON pointer such as /spec/size)")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise _Failed(f"{member}: {pointer!r} is not a JSON pointer (it starts with /, as in /spec/size)")
    # ~1 before ~0, as RFC 6901 says: "~01" is the key "~1", not "/".
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _index(token: str, size: int, *, pointer: str, end_allowed: bool) -> int:
    if token == _END and end_allowed:
        return size
    if not _INDEX.fullmatch(token):
        raise _Failed(f"{pointer}: {token!r} is not an index of the list (a number without leading zeros)")
    index = int(token)
    if index > size or (index == size and not end_allowed):
        raise _Failed(f"{pointer}: index {index} is past the end of the list ({size} items)")
    return index


def _parent(document: Any, tokens: list[str], pointer: str) -> Any:
    """The container the last token names a place in."""
    current = document
    for depth, token in enumerate(tokens[:-1]):
        at = "/" + "/".join(tokens[: depth + 1])
        if isinstance(current, dict):
            if token not in current:
                raise _Failed(f"{pointer}: {at} does not exist")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(token, len(current), pointer=pointer, end_allowed=False)]
        else:
            raise _Failed(f"{pointer}: {at} is a {_type_name(current)}, not a mapping or a list")
    if not isinstance(current, dict | list):
        raise _Failed(f"{pointer}: the parent is a {_type_name(current)}, not a mapping or a list")
    return current


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {str: "string", int: "number", float: "number", type(None): "null"}.get(type(value), "value")


def _get(document: Any, pointer: str) -> Any:
    tokens = _tokens(pointer, "path")
    if not tokens:
        return document
    parent = _parent(document, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _Failed(f"{pointer}: no such member")
        return parent[last]
    return parent[_index(last, len(parent), pointer=pointer, end_allowed=False)]


def _add(document: Any, pointer: str, value: Any) -> Any:
    tokens = _tokens(pointer, "path")
    if not tokens:
        return value
    parent = _parent(document, tokens, pointer)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    else:
        parent.insert(_index(tokens[-1], len(parent), pointer=pointer, end_allowed=True), value)
    return document


def _remove(document: Any, pointer: str) -> tuple[Any, Any]:
    """The document without the value at ``pointer``, and that value."""
    tokens = _tokens(pointer, "path")
    if not tokens:
        raise _Failed("path: the whole document cannot be removed")
    parent = _parent(document, tokens, pointer)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise _Failed(f"{pointer}: no such member")
        return document, parent.pop(tokens[-1])
    return document, parent.pop(_index(tokens[-1], len(parent), pointer=pointer, end_allowed=False))


def _replace(document: Any, pointer: str, value: Any) -> Any:
    tokens = _tokens(pointer, "path")
    if not tokens:
        return value
    parent = _parent(document, tokens, pointer)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise _Failed(f"{pointer}: no such member")
        parent[tokens[-1]] = value
    else:
        parent[_index(tokens[-1], len(parent), pointer=pointer, end_allowed=False)] = value
    return document


def _member(operation: Mapping[str, Any], name: str) -> Any:
    if name not in operation:
        raise _Failed(f"{operation['op']} needs {name!r}")
    return operation[name]


def _apply_one(document: Any, operation: object) -> Any:
    if not isinstance(operation, Mapping):
        raise _Failed('expected an operation, such as {"op": "add", "path": "/spec/size", "value": 2}')
    op = operation.get("op")
    if op not in OPERATIONS:
        shown = "missing" if op is None else repr(op)
        raise _Failed(f"op: {shown} is not one of {', '.join(OPERATIONS)}")
    path = _member(operation, "path")
    _tokens(path, "path")  # a bad pointer is said as such before anything else
    if op == "add":
        return _add(document, path, copy.deepcopy(_member(operation, "value")))
    if op == "remove":
        return _remove(document, path)[0]
    if op == "replace":
        return _replace(document, path, copy.deepcopy(_member(operation, "value")))
    if op == "test":
        expected = _member(operation, "value")
        found = _get(document, path)
        if not json_equal(found, expected):
            raise _Failed(f"test {path or '(the document)'}: is {_shown(found)}, not {_shown(expected)}")
        return document
    source = _member(operation, "from")
    from_tokens = _tokens(source, "from")
    if op == "move":
        path_tokens = _tokens(path, "path")
        if path_tokens[: len(from_tokens)] == from_tokens and len(path_tokens) > len(from_tokens):
            raise _Failed(f"move: {path} is inside {source}: a value cannot be moved into itself")
        if source == path:
            _get(document, source)
            return document
        document, value = _remove(document, source)
        return _add(document, path, value)
    return _add(document, path, copy.deepcopy(_get(document, source)))  # copy


def _shown(value: object) -> str:
    import json  # noqa: PLC0415 - only a failed test pays for it

    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."  # noqa: PLR2004


def json_patch(document: Any, operations: object) -> Any:
    """``document`` with the RFC 6902 ``operations`` applied (a new value; ``document``
    is not changed); :class:`InvalidError` naming the operation that failed."""
    if not isinstance(operations, Sequence) or isinstance(operations, str | bytes):
        raise InvalidError([FieldError("patch", "a JSON patch is a list of operations")])
    result = copy.deepcopy(document)
    for number, operation in enumerate(operations):
        try:
            result = _apply_one(result, operation)
        except _Failed as exc:
            raise InvalidError([FieldError(f"patch[{number}]", str(exc))]) from None
    return result
