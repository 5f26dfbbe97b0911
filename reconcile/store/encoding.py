"""How bodies become text in the database and back: orjson, compact, keys in the order
the API layer built them (canonical and deterministic), non-ASCII kept as UTF-8.

orjson serializes a typical object about 12 times faster than the stdlib and parses one
about 6 times faster; at group-commit rates that is most of the CPU a write costs.
"""

from __future__ import annotations

from typing import Any

import orjson

from reconcile.errors import CorruptError

__all__ = ["dumps", "load_body", "loads"]


def dumps(value: Any) -> str:
    """The JSON text of a body."""
    return orjson.dumps(value).decode()


def loads(text: str | bytes) -> Any:
    """Parse JSON text written by :func:`dumps`."""
    return orjson.loads(text)


def load_body(text: str | bytes, revision: int, key: object) -> Any:
    """Parse a stored body; CorruptError naming the event when it is not JSON (a flipped
    byte on disk), instead of the parser's own error."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CorruptError(revision, key, str(exc)) from exc
