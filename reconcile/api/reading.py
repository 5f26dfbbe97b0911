"""The reading half of the Client: get, list, history, watch, and the store's
maintenance (revision, compaction, verify). :class:`~reconcile.api.client.Client` adds
the writes; raw reads for caches are the engine's (:mod:`.engine`)."""

from __future__ import annotations

import builtins
import warnings
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, overload

import attrs

from reconcile.api.decoding import Decoder
from reconcile.api.paging import ResourceList, decode_continue, encode_continue
from reconcile.errors import FieldError, InvalidError, NotFoundError, VersionWarning
from reconcile.model.events import Bookmark, Event, EventType, FieldChange, diff_objects
from reconcile.model.kinds import Kind
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.registry import KindRegistry
from reconcile.model.resource import AnyResource
from reconcile.model.selectors import LabelSelector
from reconcile.store.contract import EventStore, RawEvent, StoredObject, VerifyReport

__all__ = ["KindRef", "Reading"]

KindRef = str | Kind


class Reading:
    """Reads of resources and events, typed; the store's maintenance."""

    store: EventStore
    kinds: KindRegistry
    decoder: Decoder

    def _kind(self, kind: KindRef) -> Kind:
        return self.kinds.resolve(kind)

    def _key(self, kind: KindRef, name: str, namespace: str) -> tuple[Kind, ObjectKey]:
        return self.kinds.key_of(kind, name, namespace)

    def decode(self, body: Mapping[str, Any], *, spec: Any = None, status: Any = None) -> AnyResource:
        """Structure a stored body into a Resource (spec and status as the kind's classes;
        plain mappings when the kind is not registered here). ``spec`` and ``status``,
        when given, are the already structured spec and status of this body."""
        return self.decoder.resource(body, spec=spec, status=status)

    # -- reads -------------------------------------------------------------------------

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
        """The current object, by kind and name or by its key (``get(request.key)``);
        :class:`NotFoundError` when absent. ``api_version`` asks for it in another served
        version of its kind (``sites.example.dev/v1alpha1``, or ``v1alpha1``), converted
        from the storage version; a deprecated one warns
        (:class:`~reconcile.errors.VersionWarning`), an unknown or unserved one is an
        :class:`InvalidError`."""
        obj = await self._get(kind, name, namespace)
        if api_version is None:
            return obj
        converted, warning = self.decoder.at_version(obj, api_version)
        if warning is not None:
            warnings.warn(warning, VersionWarning, stacklevel=2)
        return converted

    async def _get(self, kind: KindRef | ObjectKey, name: str | None, namespace: str) -> AnyResource:
        if isinstance(kind, ObjectKey):
            key = kind
        else:
            if name is None:
                raise TypeError("get() needs a name with a kind")
            _, key = self._key(kind, name, namespace)
        stored = await self.store.read(key)
        if stored is None:
            raise NotFoundError(f"{key} not found")
        return self.decode(stored.body)

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ResourceList:
        """Objects of a kind, in (namespace, name) order, in every namespace unless one
        is given, filtered by a Kubernetes label selector, a page at a time."""
        found = self._kind(kind)
        selector = LabelSelector.parse(label_selector)
        if limit is not None and limit < 1:
            raise InvalidError([FieldError("limit", "must be >= 1")])

        def matches(item: StoredObject) -> bool:
            return selector.matches(item.body["metadata"].get("labels") or {})

        page = await self.store.list(
            found.api_group,
            found.kind,
            namespace=namespace,
            after=None if continue_ is None else decode_continue(continue_),
            limit=limit,
            predicate=matches if selector.requirements else None,
        )
        token = None if page.next_after is None else encode_continue(page.next_after)
        return ResourceList(tuple(self.decode(i.body) for i in page.items), page.revision, token)

    async def history(
        self, kind: KindRef, name: str, *, namespace: str = DEFAULT_NAMESPACE
    ) -> builtins.list[Event]:
        """Every retained event of the object key, oldest first, each with what it changed;
        earlier incarnations (deleted, then created again) included."""
        _, key = self._key(kind, name, namespace)
        raw = await self.store.events(key)
        if not raw:
            raise NotFoundError(f"{key} has no history")
        events, previous = [], None
        for item in raw:
            changes: tuple[FieldChange, ...] = ()
            if item.body is not None:
                # The first snapshot retained is the whole object: no change list. An old
                # body is compared in the new spelling and the storage version (a rename,
                # or a migration to the storage version, is not a change).
                body = self.decoder.comparable(item.body)
                changes = () if previous is None else tuple(diff_objects(previous, body))
                previous = None if item.type == EventType.DELETED else body
            events.append(attrs.evolve(self._event(item), changes=changes))
        return events

    def _event(self, raw: RawEvent) -> Event:
        return self.decoder.event(raw)

    @overload
    def watch(
        self,
        kind: KindRef | None = None,
        *,
        namespace: str | None = None,
        since: int = 0,
        bookmarks: Literal[False] = False,
    ) -> AsyncIterator[Event]: ...

    @overload
    def watch(
        self,
        kind: KindRef | None = None,
        *,
        namespace: str | None = None,
        since: int = 0,
        bookmarks: Literal[True],
    ) -> AsyncIterator[Event | Bookmark]: ...

    async def watch(
        self,
        kind: KindRef | None = None,
        *,
        namespace: str | None = None,
        since: int = 0,
        bookmarks: bool = False,
    ) -> AsyncIterator[Event | Bookmark]:
        """Every event after revision ``since``, in order and without gaps, then live
        ones as they commit. With ``bookmarks``, a :class:`Bookmark` whenever caught up.
        :class:`ExpiredError` when ``since`` is before the compaction horizon."""
        found = None if kind is None else self._kind(kind)
        raw = self.store.watch(
            since=since,
            api_group=None if found is None else found.api_group,
            kind=None if found is None else found.kind,
            namespace=namespace,
        )
        async for item in raw:
            if isinstance(item, Bookmark):
                if bookmarks:
                    yield item
            else:
                yield self._event(item)

    # -- maintenance -------------------------------------------------------------------

    async def revision(self) -> int:
        """The store's latest revision."""
        return await self.store.revision()

    async def compact(self, before: int) -> int:
        """Drop history before revision ``before``; each object's latest state stays."""
        return await self.store.compact(before)

    async def unknown_kinds(self) -> builtins.list[tuple[str, int]]:
        """The stored kinds this client's registry does not know (their provider is not
        installed here), as ``Kind.group`` with how many live objects each has."""
        known = {(kind.api_group, kind.kind) for kind in self.kinds}
        return [
            (f"{kind}.{group}", count)
            for group, kind, count in await self.store.kinds()
            if (group, kind) not in known
        ]

    async def verify(self, *, deep: bool = False) -> VerifyReport:
        """Rebuild the projection from the log, compare, and report the differences;
        decode every current object (with ``deep``: every event's body too) and report
        each that cannot be decoded, by revision."""
        return await self.store.verify(deep=deep, check=self.decoder.resource)
