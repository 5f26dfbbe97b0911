"""The kinds registry: the kinds a client knows, by ``(api_version, kind)`` and by any of
their names (``File``, ``files``, ``file.files.reconcile.dev``), and which provider
declared each.

A registry is built per client (no global state): by hand, from providers, or from every
provider installed under the ``reconcile.providers`` entry-point group
(:meth:`KindRegistry.from_entry_points`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any

from reconcile.errors import FieldError, InvalidError
from reconcile.model.kinds import ENTRY_POINT_GROUP, Kind
from reconcile.model.meta import ObjectKey
from reconcile.model.printing import printable
from reconcile.model.versions import KindVersion

__all__ = ["KindRegistry"]


class KindRegistry:
    """Maps ``(api_version, kind)`` to :class:`Kind`, and resolves kind names."""

    def __init__(self, kinds: Iterable[Kind] = ()) -> None:
        self._kinds: dict[tuple[str, str], Kind] = {}
        self._providers: dict[tuple[str, str], str] = {}
        #: The spoke versions, by ``(api_version, kind)``: empty unless a kind has
        #: several versions (what every miss of ``_kinds`` looks at next).
        self._spokes: dict[tuple[str, str], tuple[Kind, KindVersion]] = {}
        #: Whether any kind here is served in more than one version (an attribute, not
        #: a property: every write's decoder asks).
        self.has_versions = False
        for kind in kinds:
            self.register(kind)

    def register(self, kind: Kind, *, provider: str | None = None) -> None:
        """Add a kind, declared by the named provider; registering a different kind under
        the same names is an error."""
        existing = self._kinds.get((kind.api_version, kind.kind))
        if existing is not None and existing != kind:
            raise ValueError(f"kind {kind.kind} of {kind.api_version} is already registered")
        self._kinds[kind.api_version, kind.kind] = kind
        for version in kind.versions:
            self._spokes[kind.api_version_of(version), kind.kind] = (kind, version)
            self.has_versions = True
        if provider is not None:
            self._providers[kind.api_version, kind.kind] = provider

    def provider_of(self, kind: Kind) -> str | None:
        """The name of the provider that declared the kind, when known."""
        return self._providers.get((kind.api_version, kind.kind))

    def __iter__(self) -> Iterator[Kind]:
        return iter(sorted(self._kinds.values(), key=lambda k: (k.api_group, k.kind)))

    def __len__(self) -> int:
        return len(self._kinds)

    def key_of(self, kind: str | Kind, name: str, namespace: str) -> tuple[Kind, ObjectKey]:
        """The kind (by any of its names, or itself) and the key of one of its objects."""
        found = self.resolve(kind)
        return found, ObjectKey(found.api_group, found.kind, namespace, name)

    def get(self, api_version: str, kind: str) -> Kind | None:
        """The kind registered for this ``api_version`` and ``kind``, or None."""
        return self._kinds.get((api_version, kind))

    def spoke(self, api_version: str, kind: str) -> tuple[Kind, KindVersion] | None:
        """The kind and its spoke version of this ``api_version``, served or not; None
        for a storage version or one not declared."""
        return self._spokes.get((api_version, kind)) if self._spokes else None

    def lookup(self, api_version: str, kind: str) -> Kind:
        """Like :meth:`get`, but an unknown kind is an :class:`InvalidError`."""
        found = self._kinds.get((api_version, kind))
        if found is not None:
            return found
        return self.lookup_version(api_version, kind)[0]

    def lookup_version(self, api_version: str, kind: str) -> tuple[Kind, KindVersion | None]:
        """The kind of a manifest or a read, and its spoke version (None: the storage
        version). A version not declared, or no longer served, is an
        :class:`InvalidError` naming the served ones."""
        found = self._kinds.get((api_version, kind))
        if found is not None:
            return found, None
        spoke = self.spoke(api_version, kind)
        if spoke is not None:
            owner, version = spoke
            if version.served:
                return owner, version
            served = ", ".join(owner.served_versions)
            reason = f"{printable(api_version)} of kind {kind} is no longer served (served: {served})"
            raise InvalidError([FieldError("apiVersion", reason)])
        versions = sorted(v for k in self._kinds.values() if k.kind == kind for v in k.served_versions)
        if versions:
            reason = (
                f"unknown apiVersion {printable(api_version)} for kind {kind} (served: {', '.join(versions)})"
            )
            raise InvalidError([FieldError("apiVersion", reason)])
        reason = f"unknown kind {printable(kind, quoted=True)} in {printable(api_version)}"
        raise InvalidError([FieldError("kind", reason)])

    def resolve(self, name: str | Kind) -> Kind:
        """Find a kind by any of its names: ``File``, ``files``, ``file.files.reconcile.dev``
        (a Kind is its own answer)."""
        if isinstance(name, Kind):
            return name
        wanted = name.lower()
        matches = [k for k in self._kinds.values() if wanted in k.names()]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            known = sorted({n for k in self._kinds.values() for n in k.names()})
            close = difflib.get_close_matches(wanted, known, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise InvalidError([FieldError("kind", f"unknown kind {printable(name, quoted=True)}{hint}")])
        groups = ", ".join(sorted(f"{k.kind}.{k.api_group}" for k in matches))
        raise InvalidError([FieldError("kind", f"{printable(name, quoted=True)} is ambiguous: {groups}")])

    @classmethod
    def from_providers(cls, providers: Iterable[Any]) -> KindRegistry:
        """A registry of the kinds ``providers`` declare, each under its provider's name."""
        registry = cls()
        for provider in providers:
            for kind in provider.kinds:
                registry.register(kind, provider=provider.name)
        return registry

    @classmethod
    def from_entry_points(cls, group: str = ENTRY_POINT_GROUP) -> KindRegistry:
        """Build a registry from every installed provider's ``kinds`` and every kinds
        package's (found by :func:`reconcile.model.discovery.discover`, the one
        discovery rule); a package's kinds have no provider."""
        # Imported here: a registry built by hand needs no entry points (importlib.metadata).
        from reconcile.model.discovery import discover  # noqa: PLC0415

        found = discover(group)
        registry = cls.from_providers(found.providers)
        for package in found.packages:
            for kind in package.kinds:
                registry.register(kind)
        return registry
