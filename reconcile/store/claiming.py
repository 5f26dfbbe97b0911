"""Identity claims, the part both backends share: the refusal of a write whose object
declares an external resource another live object declares already."""

from __future__ import annotations

from reconcile.errors import FieldError, InvalidError
from reconcile.model.meta import ObjectKey

__all__ = ["claimed"]


def claimed(key: ObjectKey, identity: str, other: ObjectKey) -> InvalidError:
    """``key``'s write refused: ``identity`` is declared by ``other`` already."""
    reason = (
        f"{identity} is already declared by {other.kind} {other.namespace}/{other.name}: "
        "one external resource is declared by one object"
    )
    return InvalidError([FieldError("spec", reason)], subject=f"{key.kind} {key.namespace}/{key.name}")
