"""Finding providers: built-in and third-party alike, through the ``reconcile.providers``
entry-point group. Each entry point names a Provider object (or a callable returning one).
"""

from __future__ import annotations

from importlib import metadata

from reconcile.model.external import Provider
from reconcile.model.kinds import ENTRY_POINT_GROUP

__all__ = ["discover_providers"]


def discover_providers(group: str = ENTRY_POINT_GROUP) -> list[Provider]:
    """Load every installed provider, sorted by name."""
    found: list[Provider] = []
    for entry_point in metadata.entry_points(group=group):
        loaded = entry_point.load()
        provider = loaded() if isinstance(loaded, type) or not hasattr(loaded, "kinds") else loaded
        found.append(provider)
    return sorted(found, key=lambda p: p.name)
