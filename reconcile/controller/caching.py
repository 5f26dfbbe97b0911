"""The cache of the controller layer, and the client reconcilers read and write through.

As controller-runtime's manager cache does, one :class:`Cache` holds one informer per
kind, shared by every controller and reader of that kind, and it owns read-your-writes:

* a write through a :class:`CachedClient` goes to the store, and its result goes into the
  kind's informer at once (client-go's mutation cache), with the key's **minimum
  revision** recorded;
* a read of that key waits, on the injected clock and within a bound, until the cache
  holds the key at that revision or newer (controller-runtime's minimum-resource-version
  tracking), so a reconcile never acts on a cache older than a write it has seen
  succeed.

The store knows nothing of this: it commits and it streams events; the cache recognizes
its own writes when their events arrive (by revision) and drops them unparsed.
"""

from __future__ import annotations

import builtins
import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from reconcile.api.bulk import Applied
from reconcile.api.client import DEFAULT_MANAGER, Client
from reconcile.api.decoding import Unconverted
from reconcile.api.paging import ResourceList, decode_continue, encode_continue
from reconcile.api.reading import KindRef
from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.informing import GrowthHook, Informer, ListingHook
from reconcile.errors import FieldError, InvalidError, NotFoundError, VersionWarning
from reconcile.model.kinds import Kind
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.model.selectors import LabelSelector

__all__ = ["Cache", "CachedClient", "CachedEngine"]

LOG = logging.getLogger("reconcile.cache")


class Cache:
    """One informer per kind and the minimum revision each written key must be read at."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        namespace: str | None = None,
        on_growth: GrowthHook | None = None,
        listing: ListingHook | None = None,
        read_timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.clock = clock or LoopClock()
        self.namespace = namespace
        #: Given to every informer (see :data:`~reconcile.controller.informing.GrowthHook`):
        #: the Runtime's collector tuning, when it is on.
        self.on_growth = on_growth
        #: Given to every informer (see :data:`~reconcile.controller.informing.ListingHook`):
        #: what each list's reading and decoding run inside, the Runtime's collector tuning when it is on.
        self.listing = listing
        #: How long a read waits for the cache to reach a write it must reflect; past it,
        #: the read returns what the cache holds and says so in the log.
        self.read_timeout = read_timeout
        self._informers: dict[tuple[str, str], Informer] = {}
        self._minimum: dict[ObjectKey, int] = {}

    # -- informers -----------------------------------------------------------------------

    def informer(self, kind: KindRef) -> Informer:
        """The informer of ``kind``, made on first ask (run it with ``Informer.run``;
        every controller of the kind shares it)."""
        found = kind if isinstance(kind, Kind) else self.client.kinds.resolve(kind)
        index = (found.api_group, found.kind)
        informer = self._informers.get(index)
        if informer is None:
            informer = Informer(
                self.client,
                found,
                namespace=self.namespace,
                clock=self.clock,
                on_growth=self.on_growth,
                listing=self.listing,
            )
            self._informers[index] = informer
        return informer

    def informers(self) -> list[Informer]:
        """Every informer made so far."""
        return list(self._informers.values())

    def _informer_of(self, key: ObjectKey) -> Informer | None:
        return self._informers.get((key.api_group, key.kind))

    def synced(self, kind: KindRef) -> Informer | None:
        """The informer of ``kind`` when there is one and it holds its first list (None:
        reads of the kind go to the store)."""
        found = kind if isinstance(kind, Kind) else self.client.kinds.resolve(kind)
        informer = self._informers.get((found.api_group, found.kind))
        return informer if informer is not None and informer.synced.is_set() else None

    # -- read-your-writes ------------------------------------------------------------------

    def written(self, key: ObjectKey, obj: AnyResource | None, revision: int, actor: str) -> None:
        """A write of ``key`` committed at ``revision``: later reads of the key reflect it.
        ``obj`` (the write's result, None when the write removed the object) goes into
        the kind's informer at once."""
        informer = self._informer_of(key)
        if informer is None or revision <= 0:
            return
        if obj is not None:
            informer.written(obj, actor)
        if revision > informer.revision and not informer.holds(key, revision):
            self._minimum[key] = max(revision, self._minimum.get(key, 0))

    async def fresh(self, key: ObjectKey) -> Informer | None:
        """The key's informer once it reflects every write of the key seen through this
        cache (within :attr:`read_timeout`, on the clock); None for a kind not cached."""
        informer = self._informer_of(key)
        if informer is None:
            return None
        minimum = self._minimum.pop(key, 0)
        if minimum and informer.revision < minimum and not informer.holds(key, minimum):
            try:
                async with self.clock.timeout(self.read_timeout):
                    await informer.wait_for_revision(minimum)
            except TimeoutError:
                LOG.warning("cache did not reach revision %d for %s in time", minimum, key)
        return informer

    def get_now(self, key: ObjectKey) -> tuple[bool, AnyResource | None]:
        """``(True, the cached object or None)`` when the cache can answer at once (its
        kind is cached and no write of the key is still to reach it); ``(False, None)``
        when :meth:`get` must be awaited. The common read of a resync, without a
        coroutine."""
        informer = self._informer_of(key)
        if informer is None or key in self._minimum:
            return False, None
        return True, informer.get(key)

    async def get(self, key: ObjectKey) -> AnyResource | None:
        """The cached object (None when absent), at least as new as this cache's last
        write of it; a kind without an informer is read from the store."""
        informer = await self.fresh(key)
        if informer is None:
            try:
                return await self.client.get(key)
            except NotFoundError:
                return None
        return informer.get(key)


class CachedClient:
    """What a reconciler reads and writes through: the client protocols
    (:class:`~reconcile.api.protocols.Reader`, ``Writer``, ``StatusWriter``) with the
    same signatures as :class:`~reconcile.api.Client`'s, so the same reconciler code runs
    against either. Reads come from the :class:`Cache` (at least as new as this cache's
    last write of the key); writes go to the store through the ``Client``, each write's
    result put in the cache so the next read sees it (read-your-writes)."""

    def __init__(self, client: Client, cache: Cache, *, manager: str = DEFAULT_MANAGER) -> None:
        self.client = client
        self.cache = cache
        #: The field manager writes are recorded under when a call names none.
        self.manager = manager
        #: The engine-facing side: a controller's records, through the same cache.
        self.engine = CachedEngine(client, cache, manager)

    @property
    def wall_clock(self) -> Any:
        """The wall clock the store stamps times with."""
        return self.client.clock

    def _key(self, kind: KindRef, name: str | None, namespace: str) -> ObjectKey:
        if name is None:
            raise TypeError("get() needs a name with a kind")
        return self.client.kinds.key_of(kind, name, namespace)[1]

    # -- reads -----------------------------------------------------------------------------

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
        """The object, from the cache (see :meth:`Cache.get`), by kind and name or by its
        key (``get(request.key)``); :class:`NotFoundError` when absent."""
        key = kind if isinstance(kind, ObjectKey) else self._key(kind, name, namespace)
        answered, obj = self.cache.get_now(key)
        if not answered:
            obj = await self.cache.get(key)
        if obj is None:
            raise NotFoundError(f"{key} not found")
        if type(obj) is Unconverted:  # (its conversion failed: the reconcile is terminal)
            assert obj.error is not None
            raise obj.error
        if api_version is None:
            return obj
        converted, warning = self.client.decoder.at_version(obj, api_version)
        if warning is not None:
            warnings.warn(warning, VersionWarning, stacklevel=2)
        return converted

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ResourceList:
        """Cached objects of a kind, as ``Client.list`` gives them (in (namespace, name)
        order, filtered, a page at a time); from the store while the kind's informer has
        not synced (or there is none)."""
        informer = self.cache.synced(kind)
        if informer is None:
            return await self.client.list(
                kind, namespace=namespace, label_selector=label_selector, limit=limit, continue_=continue_
            )
        if limit is not None and limit < 1:
            raise InvalidError([FieldError("limit", "must be >= 1")])
        after = None if continue_ is None else decode_continue(continue_)
        items = [
            o
            for o in informer.list(LabelSelector.parse(label_selector))
            if (namespace is None or o.metadata.namespace == namespace)
            and (after is None or (o.metadata.namespace, o.metadata.name) > after)
        ]
        items.sort(key=lambda o: (o.metadata.namespace, o.metadata.name))
        token = None
        if limit is not None and len(items) > limit:
            items = items[:limit]
            token = encode_continue((items[-1].metadata.namespace, items[-1].metadata.name))
        return ResourceList(tuple(items), informer.revision, token)

    def owned_by(self, kind: KindRef, uid: str) -> builtins.list[AnyResource]:
        """Cached objects of ``kind`` with an owner reference to ``uid``."""
        return self.cache.informer(kind).owned_by(uid)

    # -- writes ----------------------------------------------------------------------------

    def _put(self, obj: AnyResource) -> AnyResource:
        self.cache.written(obj.key, obj, obj.metadata.resource_version or 0, self.manager)
        return obj

    async def _gone(self, key: ObjectKey) -> None:
        # The write removed the object: no result to cache, so reads of the key wait
        # until the watch has brought the removal (the store's head is past it).
        self.cache.written(key, None, await self.client.revision(), self.manager)

    async def _applied(self, applied: AnyResource) -> AnyResource:
        if applied.metadata.deletion_timestamp is not None and not applied.metadata.finalizers:
            await self._gone(applied.key)  # the apply completed a deletion
            return applied
        return self._put(applied)

    async def apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None = None,
        origin: Path | None = None,
        force: bool = False,
        owners_stored: bool = False,
    ) -> AnyResource:
        """``Client.apply``, then into the cache."""
        manager = manager or self.manager
        return await self._applied(
            await self.client.apply(
                manifest, manager=manager, origin=origin, force=force, owners_stored=owners_stored
            )
        )

    async def create(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None = None,
        origin: Path | None = None,
    ) -> AnyResource:
        """``Client.create``, then into the cache."""
        return self._put(await self.client.create(manifest, manager=manager or self.manager, origin=origin))

    async def update(self, obj: AnyResource, *, manager: str | None = None) -> AnyResource | None:
        """``Client.update``, then into the cache (None: the update removed the object)."""
        updated = await self.client.update(obj, manager=manager or self.manager)
        if updated is None:
            await self._gone(obj.key)
            return None
        return self._put(updated)

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
        """``Client.patch``, then into the cache."""
        return self._put(
            await self.client.patch(
                kind,
                name,
                patch,
                namespace=namespace,
                resource_version=resource_version,
                manager=manager or self.manager,
            )
        )

    async def apply_many(
        self,
        manifests: Sequence[Mapping[str, Any] | AnyResource],
        *,
        origins: Sequence[Path | None] | None = None,
        check_all_first: bool = False,
        atomic: bool = False,
    ) -> builtins.list[Applied]:
        """``Client.apply_many``, each written object into the cache as its write lands."""
        gone: list[ObjectKey] = []

        def landed(result: Applied) -> None:
            obj = result.object
            if obj is None or result.key is None:
                return
            if obj.metadata.deletion_timestamp is not None and not obj.metadata.finalizers:
                gone.append(result.key)  # an apply that completed a deletion
            else:
                self._put(obj)

        results = await self.client.apply_many(
            manifests,
            manager=self.manager,
            origins=origins,
            check_all_first=check_all_first,
            on_applied=landed,
            atomic=atomic,
        )
        if gone:
            revision = await self.client.revision()
            for key in gone:
                self.cache.written(key, None, revision, self.manager)
        return results

    async def update_status(
        self, obj: AnyResource, *, manager: str | None = None, force: bool = False
    ) -> AnyResource:
        """``Client.update_status``, then into the cache. The cached object of the key
        is what the result's spec is taken from, when the write left it the stored spec
        (the same incarnation and generation): nothing decoded again."""
        _, based_on = self.cache.get_now(obj.key)
        return self._put(
            await self.client.update_status(
                obj, manager=manager or self.manager, force=force, based_on=based_on
            )
        )

    async def add_finalizer(
        self,
        kind: KindRef,
        name: str,
        finalizer: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str | None = None,
    ) -> AnyResource:
        """``Client.add_finalizer``, then into the cache."""
        return self._put(
            await self.client.add_finalizer(
                kind, name, finalizer, namespace=namespace, manager=manager or self.manager
            )
        )

    async def remove_finalizer(
        self,
        kind: KindRef,
        name: str,
        finalizer: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str | None = None,
    ) -> AnyResource | None:
        """``Client.remove_finalizer``, then into the cache (None: the object is gone)."""
        removed = await self.client.remove_finalizer(
            kind, name, finalizer, namespace=namespace, manager=manager or self.manager
        )
        if removed is None:
            await self._gone(self._key(kind, name, namespace))
            return None
        return self._put(removed)

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
        """``Client.delete``, then into the cache (None: the object is gone)."""
        deleted = await self.client.delete(
            kind,
            name,
            namespace=namespace,
            resource_version=resource_version,
            manager=manager or self.manager,
            propagation_policy=propagation_policy,
        )
        if deleted is None:
            await self._gone(self._key(kind, name, namespace))
            return None
        return self._put(deleted)

    async def record(
        self,
        kind: KindRef,
        name: str,
        event_type: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        data: Mapping[str, Any] | None = None,
        manager: str | None = None,
    ) -> int:
        """``Client.record``: an event about the object, which does not change it."""
        return await self.client.record(
            kind, name, event_type, namespace=namespace, data=data, manager=manager or self.manager
        )


class CachedEngine:
    """The engine-facing side of a :class:`CachedClient` (``cached.engine``): what a
    recording reconciler (the managed one) writes its bookkeeping with, beside the verbs,
    each result into the cache as the verbs' are."""

    def __init__(self, client: Client, cache: Cache, manager: str) -> None:
        self._client = client
        self._cache = cache
        self._manager = manager

    def _put(self, obj: AnyResource, manager: str) -> AnyResource:
        self._cache.written(obj.key, obj, obj.metadata.resource_version or 0, manager)
        return obj

    async def get(self, key: ObjectKey) -> AnyResource | None:
        """The cached object, None when absent (no exception: a resync of many objects
        runs this)."""
        cache = self._cache
        answered, obj = cache.get_now(key)
        return obj if answered else await cache.get(key)

    async def release(
        self,
        obj: AnyResource,
        finalizer: str,
        events: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        status: Any = None,
        manager: str | None = None,
    ) -> tuple[AnyResource | None, int]:
        """``Client.engine.release`` (same signature), then into the cache: ``(None,
        revision)`` when the write removed the object."""
        manager = manager or self._manager
        released, revision = await self._client.engine.release(
            obj, finalizer, events, status=status, manager=manager
        )
        if released is None:
            self._cache.written(obj.key, None, revision, manager)
            return None, revision
        return self._put(released, manager), revision

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
        """``Client.engine.record_actions`` (same signature) about ``obj`` (as it was
        read), then into the cache."""
        manager = manager or self._manager
        written = await self._client.engine.record_actions(
            obj, events, annotations=annotations, add_finalizer=add_finalizer, status=status, manager=manager
        )
        return self._put(written, manager)
