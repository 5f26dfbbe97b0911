"""How a Runtime declares and deletes objects: through the controllers' cache, so that
a controller hears of its object's change at once (a base class of
:class:`~reconcile.runtime.running.Runtime`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconcile.api.bulk import Applied
from reconcile.api.client import Client
from reconcile.api.reading import KindRef
from reconcile.controller.caching import Cache, CachedClient
from reconcile.model.meta import DEFAULT_NAMESPACE
from reconcile.model.resource import AnyResource
from reconcile.runtime import collecting
from reconcile.runtime.options import RuntimeOptions

__all__ = ["Applying"]


class Applying:
    """Applying and deleting through a Runtime (what the Runtime sets in its ``__init__``
    is declared here)."""

    options: RuntimeOptions

    if TYPE_CHECKING:

        @property
        def client(self) -> Client:
            """The Runtime's client (:attr:`Runtime.client`)."""

        @property
        def cache(self) -> Cache:
            """The Runtime's cache (:attr:`Runtime.cache`)."""

    async def apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str = "reconcile",
        origin: Path | None = None,
        force: bool = False,
    ) -> AnyResource:
        """Declare an object (``Client.apply``: server-side apply under ``manager``;
        ``force`` takes over other managers' fields), through the controllers' cache:
        the applied object is cached at once and its controller hears of it now."""
        cached = CachedClient(self.client, self.cache, manager=manager)
        return await cached.apply(manifest, origin=origin, force=force)

    async def delete(
        self,
        kind: KindRef,
        name: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str = "reconcile",
        propagation_policy: str = "Background",
    ) -> AnyResource | None:
        """Delete an object (``Client.delete``), through the controllers' cache: the object
        marked for deletion is cached at once, its controller hears of it now, and its
        watch event is dropped unparsed; None when it was removed at once (no finalizers),
        and reads of it then wait for the watch to bring the removal. ``propagation_policy``:
        what the garbage collector does with its dependents (``Client.delete``)."""
        cached = CachedClient(self.client, self.cache, manager=manager)
        return await cached.delete(kind, name, namespace=namespace, propagation_policy=propagation_policy)

    async def apply_many(
        self,
        manifests: Sequence[Mapping[str, Any] | AnyResource],
        *,
        manager: str = "reconcile",
        origins: Sequence[Path | None] | None = None,
        check_all_first: bool = False,
        atomic: bool = False,
    ) -> list[Applied]:
        """Declare many objects (``Client.apply_many``: one admission each, writes
        sharing group commits, one result per manifest), through the controllers' cache.
        ``atomic``: all stored in one transaction, or none. With ``gc_tuning``, the
        collector collects less while it runs (:func:`~reconcile.runtime.collecting.collecting_less`)."""
        cached = CachedClient(self.client, self.cache, manager=manager)
        with collecting.collecting_less() if self.options.gc_tuning else contextlib.nullcontext():
            return await cached.apply_many(
                manifests, origins=origins, check_all_first=check_all_first, atomic=atomic
            )
