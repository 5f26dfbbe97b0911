"""Which kind a URL names: the API's resources, one per kind and served version, as
Kubernetes' discovery lists them (group, version, plural, singular, short names).

``/apis/files.reconcile.dev/v1/namespaces/default/files/index`` names the kind whose group
is ``files.reconcile.dev`` and whose plural is ``files``, in its version ``v1``: the storage
version, or one of the kind's served spoke versions (:class:`~reconcile.model.KindVersion`),
whose documents are converted on the way in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs

from reconcile.http.errors import ApiError
from reconcile.model import Kind, KindRegistry
from reconcile.model.versions import KindVersion

__all__ = ["ApiResource", "ResourceMap"]

#: The verbs every kind's resource answers to (Kubernetes' names).
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@attrs.frozen
class ApiResource:
    """A kind in one of its served versions, as the API names it."""

    kind: Kind
    group: str
    version: str
    #: The spoke version this resource serves; None for the storage version.
    spoke: KindVersion | None = None

    @property
    def plural(self) -> str:
        """The URL's name of the kind (``files``)."""
        return self.kind.plural

    @property
    def singular(self) -> str:
        """``file``."""
        return self.kind.kind.lower()

    @property
    def group_version(self) -> str:
        """``files.reconcile.dev/v1``: the documents' ``apiVersion``."""
        return f"{self.group}/{self.version}"

    @property
    def storage(self) -> bool:
        """Whether this is the kind's storage version."""
        return self.spoke is None

    @property
    def short_names(self) -> tuple[str, ...]:
        """kubectl's short names (``f``)."""
        return tuple(s.lower() for s in self.kind.short_names)


class ResourceMap:
    """Every served resource of a kind registry, looked up by URL parts."""

    def __init__(self, kinds: KindRegistry | Iterable[Kind]) -> None:
        self._by_path: dict[tuple[str, str, str], ApiResource] = {}
        self._groups: dict[str, list[str]] = {}
        for kind in kinds:
            group, _, version = kind.api_version.rpartition("/")
            self._add(ApiResource(kind, group, version))
            for spoke in kind.versions:
                if spoke.served:
                    self._add(ApiResource(kind, group, spoke.name, spoke))

    def _add(self, resource: ApiResource) -> None:
        self._by_path[(resource.group, resource.version, resource.plural)] = resource
        versions = self._groups.setdefault(resource.group, [])
        if resource.version not in versions:
            versions.append(resource.version)

    def __iter__(self) -> Iterator[ApiResource]:
        return iter(self._by_path.values())

    def groups(self) -> dict[str, list[str]]:
        """Each group's served versions, the storage version first."""
        return {group: list(versions) for group, versions in sorted(self._groups.items())}

    def preferred(self, group: str) -> str:
        """The group's preferred version: the storage version of its kinds."""
        versions = self._groups.get(group)
        if not versions:
            raise ApiError(404, f"the server could not find the requested resource (group {group!r})")
        storage = [r.version for r in self if r.group == group and r.storage]
        return storage[0] if storage else versions[0]

    def in_version(self, group: str, version: str) -> list[ApiResource]:
        """The resources of one group version (404 when it is not served)."""
        found = [r for r in self if r.group == group and r.version == version]
        if not found:
            raise ApiError(404, f"the server could not find the requested resource ({group}/{version})")
        return found

    def resolve(self, group: str, version: str, plural: str) -> ApiResource:
        """The resource a URL names (404 naming what is unknown)."""
        found = self._by_path.get((group, version, plural))
        if found is None:
            if group not in self._groups:
                raise ApiError(404, f"the server could not find the requested resource (group {group!r})")
            if version not in self._groups[group]:
                raise ApiError(
                    404, f"the server could not find the requested resource (version {group}/{version})"
                )
            raise ApiError(404, f"the server could not find the requested resource ({plural}.{group})")
        return found
