"""What admission hooks read other objects with inside a Runtime: the shared cache.

A Kubernetes admission webhook that checks a rule across objects (a name unique in a
namespace, "a CNAME alone at its name") reads them from its informers, not from etcd:
cheap, and as fresh as its watch. A Runtime holds the same informers for its
controllers, so its writes give their hooks a :class:`HookReader`:

* a kind whose informer has synced is answered from the cache: no store round trip,
  and at least as new as every write of the key made through the Runtime's cached
  clients (the cache's read-your-writes, :class:`~reconcile.controller.Cache`);
* a kind without one (no controller watches it), or whose informer has not finished its
  first list, is read from the store, as a hook outside a Runtime always is
  (``reconcile apply``: the client's own reads).

Staleness, as for a webhook reading informers: the cache trails the store by the watch's
latency, so a hook can miss a write committed a moment before by another process (a
``reconcile apply`` beside the runner) or by a concurrent write of this Runtime not yet
back from the watch. A store read has the same race in a wider form (two applies
admitted at once both pass, since neither is stored when the other's hook reads): a
hook's rule across objects is a check at the door, and what must hold anyway is checked
again by a controller (or by a kind's ``identity`` and ``conflicts``, which the store
checks in the write's transaction). :meth:`HookReader.source` says which answers a kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, overload

from reconcile.api.client import Client
from reconcile.api.paging import ResourceList
from reconcile.api.reading import KindRef
from reconcile.controller.caching import Cache, CachedClient
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.model.selectors import LabelSelector

__all__ = ["HookReader"]


class HookReader:
    """A :class:`~reconcile.api.protocols.Reader` (``get``, ``list``) answering from a
    :class:`Cache`'s synced informers and from the store for the other kinds; it writes
    nothing."""

    def __init__(self, client: Client, cache: Cache) -> None:
        self._client = client
        self._cache = cache
        self._cached = CachedClient(client, cache)

    def source(self, kind: KindRef | ObjectKey) -> Literal["cache", "store"]:
        """Where reads of ``kind`` (or of a key's kind) are answered from now."""
        if isinstance(kind, ObjectKey):
            kind = f"{kind.kind}.{kind.api_group}"
        return "store" if self._cache.synced(kind) is None else "cache"

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
        """The object (by kind and name, or by key), from the cache when its kind's
        informer has synced, else from the store; NotFoundError when absent."""
        if isinstance(kind, ObjectKey):
            key = kind
        elif name is None:
            raise TypeError("get() needs a name with a kind")
        else:
            found, key = self._client.kinds.key_of(kind, name, namespace)
            kind = found
        if self.source(kind) == "store":
            return await self._client.get(key, api_version=api_version)
        return await self._cached.get(key, api_version=api_version)

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ResourceList:
        """Objects of a kind, as ``Client.list`` gives them, from the cache when its
        kind's informer has synced, else from the store."""
        return await self._cached.list(
            kind, namespace=namespace, label_selector=label_selector, limit=limit, continue_=continue_
        )
