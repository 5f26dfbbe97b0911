"""The resource: ``api_version``, ``kind``, ``metadata``, ``spec``, ``status``.

Users own ``spec``; controllers own ``status``. ``spec`` and ``status`` are instances of
the attrs classes a provider registered for the kind (see :mod:`reconcile.model.kinds`);
resources are frozen values, changed with :func:`attrs.evolve`.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import attrs

from reconcile.model.meta import ObjectKey, ObjectMeta

__all__ = ["Resource", "api_group_of"]

SpecT = TypeVar("SpecT")
StatusT = TypeVar("StatusT")


def api_group_of(api_version: str) -> str:
    """Return the group of an ``api_version`` (``files.reconcile.dev/v1`` -> ``files.reconcile.dev``)."""
    group, _, _ = api_version.rpartition("/")
    return group


@attrs.frozen
class Resource(Generic[SpecT, StatusT]):
    """A declared object with its observed status."""

    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: SpecT
    status: StatusT

    @property
    def key(self) -> ObjectKey:
        """The identity of this object in the store."""
        return ObjectKey(
            api_group_of(self.api_version),
            self.kind,
            self.metadata.namespace,
            self.metadata.name,
        )


AnyResource = Resource[Any, Any]
