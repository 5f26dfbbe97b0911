"""Finding providers and kinds packages: built-in and third-party alike, through the
``reconcile.providers`` entry-point group. The one discovery rule, used by ``connect()``,
the CLI and the Runtime (through
:meth:`~reconcile.model.registry.KindRegistry.from_entry_points` for kinds).

An entry point names one of two things:

* a **provider** (an object with ``name``, ``kinds`` and ``connect``: a
  :class:`~reconcile.model.external.Provider`), or a provider class, or a factory
  function that returns one (as pytest's and Flask's plugin hooks allow);
* a **kinds package**: an application's own kinds, reconciled by its own controllers
  and no provider. That is an object with ``kinds`` and no ``connect`` (an
  :class:`~reconcile.runtime.Operator`, which brings its controllers; a module with a
  ``kinds`` list), or an iterable of :class:`~reconcile.model.Kind` (a list, a
  :class:`~reconcile.model.KindRegistry`), or a factory returning either. Its kinds are
  known to every client and command; an Operator's controllers run in a Runtime that
  discovers what is installed (``reconcile run``).

An entry point that gives neither is an error naming it, never something silently left
out.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from typing import Any

import attrs

from reconcile.errors import ProviderLoadError
from reconcile.model.external import Provider
from reconcile.model.kinds import ENTRY_POINT_GROUP, Kind

__all__ = [
    "Discovered",
    "KindsPackage",
    "discover",
    "discover_providers",
    "load_entry_point",
    "load_provider",
]


@attrs.frozen
class KindsPackage:
    """The kinds an entry point declares without a provider."""

    #: The entry point's name (or the operator's).
    name: str
    kinds: tuple[Kind, ...]
    #: What the entry point named (an Operator, whose controllers a Runtime runs).
    source: object = None


@attrs.frozen
class Discovered:
    """What the entry points of a group give: providers, and provider-less kinds."""

    providers: tuple[Provider, ...] = ()
    packages: tuple[KindsPackage, ...] = ()


def _is_provider(candidate: object) -> bool:
    return not isinstance(candidate, type) and all(
        hasattr(candidate, attribute) for attribute in ("name", "kinds", "connect")
    )


def _kinds_of(candidate: object) -> tuple[Kind, ...] | None:
    """The kinds a provider-less candidate declares, or None when it is not one."""
    if isinstance(candidate, type | str | bytes):
        return None
    kinds = getattr(candidate, "kinds", candidate)
    if not isinstance(kinds, Iterable) or isinstance(kinds, str | bytes):
        return None
    found = tuple(kinds)
    return found if all(isinstance(kind, Kind) for kind in found) else None


def load_entry_point(entry_point: metadata.EntryPoint) -> Provider | KindsPackage:
    """What an entry point names: a provider, or a kinds package (see the module's
    docstring); the object itself, or what calling the class or factory it names returns."""
    where = f"entry point {entry_point.name!r} ({entry_point.value})"
    try:
        loaded: Any = entry_point.load()
    except Exception as exc:
        raise ProviderLoadError(f"{where} could not be loaded: {exc}") from exc
    candidate = loaded
    if not _is_provider(candidate) and _kinds_of(candidate) is None and callable(candidate):
        try:
            candidate = candidate()
        except Exception as exc:
            raise ProviderLoadError(f"{where}: calling it failed: {exc}") from exc
    if _is_provider(candidate):
        provider: Provider = candidate
        return provider
    kinds = _kinds_of(candidate)
    if kinds is None:
        raise ProviderLoadError(
            f"{where} is not a provider: it needs name, kinds and connect, or (a kinds package) "
            f"kinds without connect, or an iterable of Kind (got {type(candidate).__name__})"
        )
    name = getattr(candidate, "name", None)
    return KindsPackage(name if isinstance(name, str) else entry_point.name, kinds, candidate)


def load_provider(entry_point: metadata.EntryPoint) -> Provider:
    """The provider an entry point names; ProviderLoadError for a kinds package."""
    loaded = load_entry_point(entry_point)
    if isinstance(loaded, KindsPackage):
        raise ProviderLoadError(f"entry point {entry_point.name!r} ({entry_point.value}) is not a provider")
    return loaded


def discover(group: str = ENTRY_POINT_GROUP) -> Discovered:
    """Load every entry point of the group: the providers sorted by name, the kinds
    packages too."""
    loaded = [load_entry_point(entry_point) for entry_point in metadata.entry_points(group=group)]
    providers = sorted((p for p in loaded if not isinstance(p, KindsPackage)), key=lambda p: p.name)
    packages = sorted((p for p in loaded if isinstance(p, KindsPackage)), key=lambda p: p.name)
    return Discovered(tuple(providers), tuple(packages))


def discover_providers(group: str = ENTRY_POINT_GROUP) -> list[Provider]:
    """Load every installed provider, sorted by name (kinds packages are left out: they
    have nothing to connect)."""
    return list(discover(group).providers)
