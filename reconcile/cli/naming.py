"""``KIND NAME`` or ``KIND/NAME``: the two ways to name an object on the command line,
the second being the form ``apply`` and ``delete`` print (``file.files.reconcile.dev/index``)
and kubectl accepts."""

from __future__ import annotations

from collections.abc import Sequence

from reconcile.cli.failing import BadInput
from reconcile.model.printing import printable

__all__ = ["split_names", "type_and_name"]


def _split(token: str) -> tuple[str, str]:
    kind, _, name = token.partition("/")
    if not kind or not name or "/" in name:
        raise BadInput(f"{printable(token)}: expected KIND/NAME, such as file/index")
    return kind, name


def type_and_name(kind: str | None, name: str | None) -> tuple[str | None, str | None]:
    """``(KIND, NAME)`` from ``KIND NAME`` or ``KIND/NAME``."""
    if kind is None or "/" not in kind:
        return kind, name
    if name is not None:
        raise BadInput(f"{printable(kind)} {printable(name)}: give KIND/NAME or KIND NAME, not both")
    return _split(kind)


def split_names(kind: str | None, names: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """``(KIND, NAMES)`` from ``KIND NAME...`` or ``KIND/NAME...`` (one kind at a time)."""
    if kind is None or "/" not in kind:
        return kind, tuple(names)
    pairs = [_split(token) for token in (kind, *names)]
    kinds = {k for k, _ in pairs}
    if len(kinds) > 1:
        raise BadInput(f"one kind at a time: {', '.join(printable(k) for k in sorted(kinds))}")
    return pairs[0][0], tuple(n for _, n in pairs)
