"""The client as small protocols, as controller-runtime defines it (``client.Reader``,
``client.Writer``, ``client.StatusClient``): what reconciler code types against, so the
same code runs against a user's :class:`~reconcile.api.Client` (reads from the store)
and a reconciler's :class:`~reconcile.controller.CachedClient` (reads from the shared
cache, at least as new as its own last write).

* :class:`Reader` -- ``get`` and ``list``.
* :class:`Writer` -- ``apply``, ``create``, ``update``, ``patch``, ``delete`` and the
  finalizer verbs.
* :class:`StatusWriter` -- ``update_status``.
* :class:`ResourceClient` -- all three.
* :class:`Recorder` -- not a user's verbs: the engine-facing bookkeeping a recording
  reconciler (the managed one) writes with, ``record_actions`` and ``release``, which
  ``client.engine`` and ``cached.engine`` implement with the same signatures (each takes
  the object as it was read).

Both clients implement them with the same signatures and the same errors (a missing
object is :class:`~reconcile.errors.NotFoundError` for both). Both take ``manager``, the
field manager a write is recorded under (None: the client's own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, overload, runtime_checkable

from reconcile.api.paging import ResourceList
from reconcile.api.reading import KindRef
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.model.selectors import LabelSelector

__all__ = ["Reader", "Recorder", "ResourceClient", "StatusWriter", "Writer"]


@runtime_checkable
class Reader(Protocol):
    """Reads of objects."""

    @overload
    async def get(self, kind: ObjectKey, /, *, api_version: str | None = None) -> AnyResource: ...

    @overload
    async def get(
        self, kind: KindRef, name: str, *, namespace: str = DEFAULT_NAMESPACE, api_version: str | None = None
    ) -> AnyResource: ...

    async def get(
        self,
        kind: KindRef | ObjectKey,
        name: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        api_version: str | None = None,
    ) -> AnyResource:
        """The object (by kind and name, or by its key: ``get(request.key)``);
        :class:`~reconcile.errors.NotFoundError` when absent; ``api_version``: in another
        served version of its kind (docs/reference/versions.md)."""
        ...

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ResourceList:
        """Objects of a kind in (namespace, name) order, filtered by namespace and label
        selector, a page at a time."""
        ...


@runtime_checkable
class Writer(Protocol):
    """Writes of objects (their status aside: :class:`StatusWriter`)."""

    async def apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None = None,
        origin: Path | None = None,
        force: bool = False,
    ) -> AnyResource:
        """Declare an object: create it, or bring the stored one to the manifest (by
        server-side apply under the field manager; ``force`` takes over fields other
        managers own)."""
        ...

    async def create(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None = None,
        origin: Path | None = None,
    ) -> AnyResource:
        """Create an object; :class:`~reconcile.errors.AlreadyExistsError` when it exists."""
        ...

    async def update(self, obj: AnyResource, *, manager: str | None = None) -> AnyResource | None:
        """Replace spec and metadata, guarded by ``obj.metadata.resource_version``; None
        when that removed the last finalizer of a deleting object."""
        ...

    async def patch(
        self,
        kind: KindRef,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        resource_version: int | None = None,
        manager: str | None = None,
    ) -> AnyResource:
        """An RFC 7386 merge patch of ``spec``, labels and annotations."""
        ...

    async def delete(
        self,
        kind: KindRef,
        name: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        resource_version: int | None = None,
        manager: str | None = None,
        propagation_policy: str = "Background",
    ) -> AnyResource | None:
        """Delete: the object marked while finalizers remain, None once removed;
        ``propagation_policy`` (Background, Foreground, Orphan) says what becomes of its
        dependents."""
        ...

    async def add_finalizer(
        self,
        kind: KindRef,
        name: str,
        finalizer: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str | None = None,
    ) -> AnyResource:
        """Add a finalizer (a no-op when present)."""
        ...

    async def remove_finalizer(
        self,
        kind: KindRef,
        name: str,
        finalizer: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str | None = None,
    ) -> AnyResource | None:
        """Remove a finalizer; None when that removed a deleting object."""
        ...


@runtime_checkable
class StatusWriter(Protocol):
    """Writes of the status alone."""

    async def update_status(
        self, obj: AnyResource, *, manager: str | None = None, force: bool = False
    ) -> AnyResource:
        """Replace the status, guarded by ``obj.metadata.resource_version`` unless
        ``force``."""
        ...


@runtime_checkable
class ResourceClient(Reader, Writer, StatusWriter, Protocol):
    """Reads, writes and status writes: what a reconciler reads and writes through."""


@runtime_checkable
class Recorder(Protocol):
    """Action events with their bookkeeping, in one write each: ``client.engine``'s
    (:class:`~reconcile.api.engine.Engine`) and ``cached.engine``'s
    (:class:`~reconcile.controller.CachedEngine`, which also puts the result into the
    cache). ``obj`` is the object acted on, exactly as it was read."""

    async def record_actions(
        self,
        obj: AnyResource,
        events: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        annotations: Mapping[str, str | None] | None = None,
        add_finalizer: str | None = None,
        status: Any = None,
        manager: str | None = None,
    ) -> AnyResource:
        """Record action events and, atomically with them, merge annotations, add a
        finalizer and replace the status; the object after the write."""
        ...

    async def release(
        self,
        obj: AnyResource,
        finalizer: str,
        events: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        status: Any = None,
        manager: str | None = None,
    ) -> tuple[AnyResource | None, int]:
        """Record action events and remove ``finalizer`` in one write: ``(None,
        revision)`` when it removed the object, else the object after it and its
        revision."""
        ...
