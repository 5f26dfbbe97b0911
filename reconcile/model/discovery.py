"""Finding providers: built-in and third-party alike, through the ``reconcile.providers``
entry-point group. The one discovery rule, used by ``connect()``, the CLI and the Runtime
(through :meth:`~reconcile.model.registry.KindRegistry.from_entry_points` for kinds).

An entry point names a provider object, a provider class, or a factory function that
returns one (as pytest's and Flask's plugin hooks allow). What it loads must look like a
:class:`~reconcile.model.external.Provider` (a ``name``, ``kinds`` and ``connect``); an
entry point that does not is an error naming it, never a provider silently left out.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from reconcile.errors import ProviderLoadError
from reconcile.model.external import Provider
from reconcile.model.kinds import ENTRY_POINT_GROUP

__all__ = ["discover_providers", "load_provider"]


def _is_provider(candidate: object) -> bool:
    return not isinstance(candidate, type) and all(
        hasattr(candidate, attribute) for attribute in ("name", "kinds", "connect")
    )


def load_provider(entry_point: metadata.EntryPoint) -> Provider:
    """The provider an entry point names: the object itself, or what calling the class
    or factory it names returns."""
    where = f"entry point {entry_point.name!r} ({entry_point.value})"
    try:
        loaded: Any = entry_point.load()
    except Exception as exc:
        raise ProviderLoadError(f"{where} could not be loaded: {exc}") from exc
    candidate = loaded
    if not _is_provider(candidate) and callable(candidate):
        try:
            candidate = candidate()
        except Exception as exc:
            raise ProviderLoadError(f"{where}: calling it failed: {exc}") from exc
    if not _is_provider(candidate):
        raise ProviderLoadError(
            f"{where} is not a provider: it needs name, kinds and connect (got {type(candidate).__name__})"
        )
    provider: Provider = candidate
    return provider


def discover_providers(group: str = ENTRY_POINT_GROUP) -> list[Provider]:
    """Load every installed provider, sorted by name."""
    found = [load_provider(entry_point) for entry_point in metadata.entry_points(group=group)]
    return sorted(found, key=lambda p: p.name)
