"""Object metadata, after the Kubernetes API conventions (kept small).

Users set ``name``, ``namespace``, ``labels``, ``annotations``, ``finalizers`` and
``owner_references``; the store sets ``uid``, ``generation``, ``resource_version`` and
the timestamps. ``generation`` changes only when ``spec`` changes; ``resource_version`` is
the revision of the last event that touched the object.
"""

from __future__ import annotations

import datetime
from typing import NamedTuple

import attrs

from reconcile.model.printing import printable

__all__ = ["DEFAULT_NAMESPACE", "ObjectKey", "ObjectMeta", "OwnerReference"]

DEFAULT_NAMESPACE = "default"


class ObjectKey(NamedTuple):
    """What identifies an object: API group, kind, namespace and name.

    The version is a representation, not part of identity, as in Kubernetes. A named
    tuple: keys are hashed and compared in C, and the work queue, the informer cache and
    the store's batches hash them many times per reconcile.
    """

    api_group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        """``Kind.group namespace/name`` (a control character in any of them escaped:
        see :mod:`reconcile.model.printing`)."""
        group = f".{self.api_group}" if self.api_group else ""
        return f"{self.kind}{group} {printable(self.namespace)}/{printable(self.name)}"


@attrs.frozen
class OwnerReference:
    """Points at the object that owns this one (for garbage collection)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    block_owner_deletion: bool = False


@attrs.frozen
class ObjectMeta:
    """Metadata every resource carries."""

    name: str
    namespace: str = DEFAULT_NAMESPACE
    uid: str | None = None
    generation: int = 0
    resource_version: int | None = None
    creation_timestamp: datetime.datetime | None = None
    deletion_timestamp: datetime.datetime | None = None
    labels: dict[str, str] = attrs.Factory(dict)
    annotations: dict[str, str] = attrs.Factory(dict)
    finalizers: tuple[str, ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()
    #: Which labels, annotations and finalizers each field manager set through ``apply``
    #: (``{"deploy": ("labels/app",)}``): an apply removes what its manager applied
    #: before and no longer declares, and leaves what others added alone.
    managed_fields: dict[str, tuple[str, ...]] = attrs.Factory(dict)
