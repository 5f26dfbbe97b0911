"""Comparing bucket policies by meaning, not by text: AWS (and every S3-compatible
server) may return a policy with its keys reordered, a one-element list as a single
value, or list members in another order; none of that is drift."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["canonical_policy", "same_policy"]


def canonical_policy(value: Any) -> Any:
    """A form of a policy (or any part of it) in which equivalent spellings are equal:
    keys sorted, a one-element list as its element, lists of values sorted."""
    if isinstance(value, dict):
        return {key: canonical_policy(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        items = [canonical_policy(item) for item in value]
        if len(items) == 1:
            return items[0]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    return value


def same_policy(found: Any, wanted: Any) -> bool:
    """Whether two policy documents mean the same."""
    return bool(canonical_policy(found) == canonical_policy(wanted))
