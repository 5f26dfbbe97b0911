"""Pages of a list: the items, the revision they reflect, an opaque token for the next.

Later pages continue after the last key of the previous one and reflect the store as it
is when they are read (Kubernetes' continue tokens promise a snapshot; ours do not, and
say so).
"""

from __future__ import annotations

import base64
import binascii
import json

import attrs

from reconcile.errors import FieldError, InvalidError
from reconcile.model.resource import AnyResource

__all__ = ["ResourceList", "decode_continue", "encode_continue"]


@attrs.frozen
class ResourceList:
    """One page of a list: items, the revision they reflect, and a token for the next page."""

    items: tuple[AnyResource, ...]
    resource_version: int
    continue_: str | None = None


def encode_continue(after: tuple[str, str]) -> str:
    """The token for the page after ``(namespace, name)``."""
    return base64.urlsafe_b64encode(json.dumps(after).encode()).decode()


def decode_continue(token: str) -> tuple[str, str]:
    """The ``(namespace, name)`` a token continues after; InvalidError for a bad token."""
    try:
        namespace, name = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError, binascii.Error):
        raise InvalidError([FieldError("continue_", "not a token returned by list")]) from None
    return str(namespace), str(name)
