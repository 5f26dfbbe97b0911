"""The Client: every read and write of resources goes through it.

Writes are admitted (validated, defaulted) here, in the caller's task, and then handed to
the store as pure mutations (:mod:`.mutations`), so many concurrent writers share one
group commit. Reads come back as typed :class:`~reconcile.model.Resource` values, with
spec and status structured into the kind's classes.
"""

from __future__ import annotations

import builtins
import datetime
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import attrs

from reconcile.api import bulk, mutations
from reconcile.api.admission import MAX_ANNOTATIONS_BYTES, Admission, Admitted
from reconcile.api.bulk import Applied, Outcome
from reconcile.api.decoding import Decoder
from reconcile.api.merging import merge_patch
from reconcile.api.paging import ResourceList, decode_continue, encode_continue
from reconcile.api.requests import PATCHABLE_METADATA, check_action, check_patch
from reconcile.errors import ConflictError, FieldError, InvalidError, NotFoundError, ReconcileError
from reconcile.model.events import Bookmark, Event, EventType, FieldChange, diff_objects
from reconcile.model.kinds import Kind, KindRegistry
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.model.selectors import LabelSelector
from reconcile.model.serde import format_timestamp, make_converter, structure_errors
from reconcile.store.contract import (
    EventStore,
    Mutation,
    Note,
    RawEvent,
    StoredObject,
    VerifyReport,
    WriteResult,
)

__all__ = ["DEFAULT_MANAGER", "Client", "ResourceList"]

DEFAULT_MANAGER = "reconcile"
_PATCH_ATTEMPTS = 16


KindRef = str | Kind


class Client:
    """Resource API over an :class:`~reconcile.store.EventStore`."""

    def __init__(
        self,
        store: EventStore,
        kinds: KindRegistry,
        *,
        clock: Callable[[], float] = time.time,
        provider_config: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.store = store
        self.kinds = kinds
        self.converter = make_converter()
        self.decoder = Decoder(kinds)
        self.admission = Admission(kinds, self.converter, provider_config)
        self._clock = clock

    @property
    def clock(self) -> Callable[[], float]:
        """The wall clock this client stamps times with (``time.time`` by default)."""
        return self._clock

    async def _write(self, key: ObjectKey, mutation: Mutation, *, actor: str) -> WriteResult:
        return await self.store.write(key, mutation, actor=actor)

    def _now(self) -> str:
        return format_timestamp(datetime.datetime.fromtimestamp(self._clock(), datetime.UTC))

    def _kind(self, kind: KindRef) -> Kind:
        return kind if isinstance(kind, Kind) else self.kinds.resolve(kind)

    def _key(self, kind: KindRef, name: str, namespace: str) -> tuple[Kind, ObjectKey]:
        found = self._kind(kind)
        return found, ObjectKey(found.api_group, found.kind, namespace, name)

    @staticmethod
    def _key_of(admitted: Admitted) -> ObjectKey:
        meta = admitted.metadata
        return ObjectKey(admitted.kind.api_group, admitted.kind.kind, meta["namespace"], meta["name"])

    def decode(self, body: Mapping[str, Any], *, spec: Any = None, status: Any = None) -> AnyResource:
        """Structure a stored body into a Resource (spec and status as the kind's classes;
        plain mappings when the kind is not registered here). ``spec`` and ``status``,
        when given, are the already structured spec and status of this body."""
        return self.decoder.resource(body, spec=spec, status=status)

    def _result(self, stored: StoredObject | None) -> AnyResource:
        assert stored is not None
        return self.decode(stored.body)

    # -- writes ------------------------------------------------------------------------

    async def apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str = DEFAULT_MANAGER,
        origin: Path | None = None,
    ) -> AnyResource:
        """Declare an object: create it, or bring the stored one to the manifest.

        An identical apply appends nothing. A ``metadata.resource_version`` in the
        manifest is a precondition. ``origin`` is the manifest file it was read from:
        kinds that resolve relative references (a source file) resolve them against it.
        """
        return await self._apply(manifest, manager=manager, create_only=False, origin=origin)

    async def create(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str = DEFAULT_MANAGER,
        origin: Path | None = None,
    ) -> AnyResource:
        """Create an object; :class:`AlreadyExistsError` when it exists."""
        return await self._apply(manifest, manager=manager, create_only=True, origin=origin)

    async def _apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str,
        create_only: bool,
        origin: Path | None,
    ) -> AnyResource:
        admitted = self.admission.admit(manifest, origin=origin)
        applied = await self.write_admitted(admitted, manager=manager, create_only=create_only)
        if applied.object is None:  # pragma: no cover - a write that succeeded has its object
            raise ReconcileError(f"{applied.key}: the apply returned no object")
        return applied.object

    def apply_mutation(
        self, admitted: Admitted, *, manager: str = DEFAULT_MANAGER, create_only: bool = False
    ) -> tuple[ObjectKey, Mutation]:
        """The key and the store mutation that applying an admitted manifest is: the
        immutable-field, version and deletion checks run inside it, against the stored
        object, once (a dry run calls it on what is stored)."""
        key = self._key_of(admitted)
        return key, mutations.apply(
            key,
            admitted.body,
            self.admission.default_status(admitted.kind),
            manager=manager,
            uid=str(uuid.uuid4()),
            now=self._now(),
            create_only=create_only,
            immutable=admitted.kind.immutable,
            identity=admitted.kind.identity_of(admitted.body["spec"]),
        )

    async def write_admitted(
        self, admitted: Admitted, *, manager: str = DEFAULT_MANAGER, create_only: bool = False
    ) -> Applied:
        """Apply a manifest admission has already passed (``Client.admission.admit``):
        no second admission. Says what it did (created, configured, unchanged)."""
        key, mutation = self.apply_mutation(admitted, manager=manager, create_only=create_only)
        changes: list[Any] = []
        before: list[StoredObject | None] = []

        def applying(current: StoredObject | None) -> Any:
            before.append(current)
            changes.append(change := mutation(current))
            return change

        result = await self._write(key, applying, actor=manager)
        outcome: Outcome = (
            "created" if before[-1] is None else "configured" if result.written else "unchanged"
        )
        if result.object is None:
            # The apply released the last finalizer of an object being deleted, which
            # completed its deletion: what is returned is its last state, the body the
            # Remove kept in the log (stamped with its revision by the store).
            return Applied(key, outcome, self.decode(changes[-1].body))
        # apply stores the admitted spec as it is: reuse its structured form.
        return Applied(key, outcome, self.decode(result.object.body, spec=admitted.spec))

    async def apply_many(
        self,
        manifests: Sequence[Mapping[str, Any] | AnyResource | Admitted],
        *,
        manager: str = DEFAULT_MANAGER,
        origins: Sequence[Path | None] | None = None,
        check_all_first: bool = False,
        batch: int = 256,
        on_applied: Callable[[Applied], None] | None = None,
    ) -> builtins.list[Applied]:
        """Apply many manifests, one result per manifest in their order (see
        :func:`reconcile.api.bulk.apply_many`)."""
        return await bulk.apply_many(
            self,
            manifests,
            manager=manager,
            origins=origins,
            check_all_first=check_all_first,
            batch=batch,
            on_applied=on_applied,
        )

    async def update(self, obj: AnyResource, *, manager: str = DEFAULT_MANAGER) -> AnyResource | None:
        """Replace spec, labels, annotations, finalizers and owner references, on the
        condition that the object is still at ``obj.metadata.resource_version``.

        Returns None when the update removed the last finalizer of a deleting object.
        """
        admitted = self.admission.admit(obj)
        key = self._key_of(admitted)
        mutation = mutations.replace(key, admitted.body, admitted.kind.immutable)
        result = await self._write(key, mutation, actor=manager)
        return None if result.object is None else self.decode(result.object.body)

    async def patch(
        self,
        kind: KindRef,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        resource_version: int | None = None,
        manager: str = DEFAULT_MANAGER,
    ) -> AnyResource:
        """Apply an RFC 7386 merge patch to ``spec``, ``metadata.labels`` and
        ``metadata.annotations``. Without ``resource_version`` a concurrent change is
        retried against the new version; with it, a stale version is a conflict."""
        _, key = self._key(kind, name, namespace)
        check_patch(patch)
        if "spec" not in patch:
            # Labels and annotations only: validated here, merged inside the write, so no
            # read round trip and no conflict to retry.
            patches = {f: v for f, v in patch.get("metadata", {}).items() if f in PATCHABLE_METADATA}
            errors = self.admission.metadata_patch_errors(patches)
            if errors:
                raise InvalidError(errors, subject=str(key))
            mutation = mutations.patch_metadata(key, patches, resource_version, MAX_ANNOTATIONS_BYTES)
            return self._result((await self._write(key, mutation, actor=manager)).object)
        for _ in range(_PATCH_ATTEMPTS):
            current = await self.store.read(key)
            if current is None:
                raise NotFoundError(f"{key} not found")
            if resource_version is not None and resource_version != current.resource_version:
                raise ConflictError(
                    f"{key} was modified: expected resource_version {resource_version}, "
                    f"found {current.resource_version}"
                )
            meta = current.body["metadata"]
            manifest = {
                "api_version": current.body["api_version"],
                "kind": current.body["kind"],
                "metadata": {
                    **{f: meta.get(f) for f in ("name", "namespace", "finalizers", "owner_references")},
                    "labels": merge_patch(
                        meta.get("labels") or {}, patch.get("metadata", {}).get("labels", {})
                    ),
                    "annotations": merge_patch(
                        meta.get("annotations") or {}, patch.get("metadata", {}).get("annotations", {})
                    ),
                    "resource_version": current.resource_version,
                },
                "spec": merge_patch(current.body["spec"], patch.get("spec", {})),
            }
            admitted = self.admission.admit(manifest)
            try:
                mutation = mutations.replace(key, admitted.body, admitted.kind.immutable)
                result = await self._write(key, mutation, actor=manager)
            except ConflictError:
                if resource_version is not None:
                    raise
                continue
            return self._result(result.object)
        raise ConflictError(f"{key}: gave up after {_PATCH_ATTEMPTS} conflicting attempts")

    async def update_status(
        self, obj: AnyResource, *, manager: str = DEFAULT_MANAGER, force: bool = False
    ) -> AnyResource:
        """Replace the status only. Guarded by ``obj.metadata.resource_version`` unless
        ``force``; a status equal to the stored one appends nothing."""
        kind = self.kinds.lookup(obj.api_version, obj.kind)
        status = obj.status
        if not isinstance(status, kind.status_type):
            try:
                status = self.converter.structure(status, kind.status_type)
            except Exception as exc:  # noqa: BLE001 - cattrs raises groups of anything
                raise InvalidError(
                    structure_errors(exc, "status"), subject=f"{obj.kind} {obj.metadata.name!r}"
                ) from None
        body = self.converter.unstructure(status, kind.status_type)
        key = obj.key
        expected = None if force else obj.metadata.resource_version
        result = await self._write(key, mutations.update_status(key, body, expected), actor=manager)
        # The stored status is now the one given (written or already equal to it).
        return self.decoder.written(result.object, None, status)

    async def delete(
        self,
        kind: KindRef,
        name: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        resource_version: int | None = None,
        manager: str = DEFAULT_MANAGER,
    ) -> AnyResource | None:
        """Delete: the object is marked (``deletion_timestamp``) while finalizers remain
        and removed when none do. Returns the marked object, or None once removed."""
        _, key = self._key(kind, name, namespace)
        mutation = mutations.delete(key, now=self._now(), expected=resource_version)
        result = await self._write(key, mutation, actor=manager)
        return None if result.object is None else self.decode(result.object.body)

    async def add_finalizer(
        self,
        kind: KindRef,
        name: str,
        finalizer: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str = DEFAULT_MANAGER,
    ) -> AnyResource:
        """Add a finalizer (a no-op when present)."""
        _, key = self._key(kind, name, namespace)
        result = await self._write(key, mutations.add_finalizer(key, finalizer), actor=manager)
        return self._result(result.object)

    async def remove_finalizer(
        self,
        kind: KindRef,
        name: str,
        finalizer: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        manager: str = DEFAULT_MANAGER,
    ) -> AnyResource | None:
        """Remove a finalizer; returns None when that removed a deleting object."""
        _, key = self._key(kind, name, namespace)
        result = await self._write(key, mutations.remove_finalizer(key, finalizer), actor=manager)
        return None if result.object is None else self.decode(result.object.body)

    async def record(
        self,
        kind: KindRef,
        name: str,
        event_type: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        data: Mapping[str, Any] | None = None,
        manager: str = DEFAULT_MANAGER,
    ) -> int:
        """Record what was done about an object (``CreateRequested``, ``DriftDetected``,
        ...) without changing it: the event joins its history and watches see it, with
        ``object`` None. Returns the event's revision. The object's resource_version
        does not move, so recording never triggers a reconcile."""
        check_action(event_type, data)
        _, key = self._key(kind, name, namespace)
        payload = None if data is None else dict(data)
        result = await self._write(key, lambda _current: Note(event_type, payload), actor=manager)
        return result.revision

    async def record_actions(
        self,
        kind: KindRef,
        name: str,
        events: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        annotations: Mapping[str, str | None] | None = None,
        add_finalizer: str | None = None,
        status: Any = None,
        manager: str = DEFAULT_MANAGER,
        based_on: AnyResource | None = None,
    ) -> AnyResource:
        """Record action events (``(type, data)``) and, atomically with them, merge
        annotations (None removes one), add a finalizer and replace the status (an
        instance of the kind's status class). One write, one transaction: a crash keeps
        all of it or none. Returns the object after it.

        ``based_on`` is the object the caller acted on, exactly as it was read (from the
        store or an informer, not a modified copy): when the write finds its generation
        unchanged, the result reuses its structured spec instead of decoding the stored
        one again."""
        found, key = self._key(kind, name, namespace)
        for event_type, data in events:
            check_action(event_type, data)
        if annotations:
            errors = self.admission.metadata_patch_errors({"annotations": annotations})
            if errors:
                raise InvalidError(errors, subject=str(key))
        status_body = None if status is None else self.converter.unstructure(status, found.status_type)
        mutation = mutations.record_actions(
            key,
            [(t, None if d is None else dict(d)) for t, d in events],
            annotations=annotations,
            finalizer=add_finalizer,
            status=status_body,
        )
        result = await self._write(key, mutation, actor=manager)
        if based_on is not None and not isinstance(based_on.spec, found.spec_type):
            based_on = None
        return self.decoder.written(result.object, based_on, status)

    # -- reads -------------------------------------------------------------------------

    async def get(self, kind: KindRef, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> AnyResource:
        """The current object; :class:`NotFoundError` when absent."""
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
                # The first snapshot retained is the whole object: no change list.
                changes = () if previous is None else tuple(diff_objects(previous, item.body))
                previous = None if item.type == EventType.DELETED else item.body
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
        async for item in self.raw_watch(kind, namespace=namespace, since=since):
            if isinstance(item, Bookmark):
                if bookmarks:
                    yield item
            else:
                yield self._event(item)

    def raw_watch(
        self, kind: KindRef | None = None, *, namespace: str | None = None, since: int = 0
    ) -> AsyncIterator[RawEvent | Bookmark]:
        """:meth:`watch` as the store yields it: bookmarks included, each event's body
        still unparsed until read (``RawEvent.body``; :meth:`decode` makes a Resource of
        it). For a cache that drops the events it already holds before building
        anything."""
        found = None if kind is None else self._kind(kind)
        return self.store.watch(
            since=since,
            api_group=None if found is None else found.api_group,
            kind=None if found is None else found.kind,
            namespace=namespace,
        )

    # -- maintenance -------------------------------------------------------------------

    async def revision(self) -> int:
        """The store's latest revision."""
        return await self.store.revision()

    async def compact(self, before: int) -> int:
        """Drop history before revision ``before``; each object's latest state stays."""
        return await self.store.compact(before)

    async def claimant(self, kind: KindRef, spec: Mapping[str, Any]) -> ObjectKey | None:
        """The live object of the kind that declares the external resource an
        unstructured ``spec`` names (``Kind.identity``), if any."""
        found = self._kind(kind)
        identity = found.identity_of(spec)
        if identity is None:
            return None
        return await self.store.claimant(found.api_group, found.kind, identity)

    async def unknown_kinds(self) -> builtins.list[tuple[str, int]]:
        """The stored kinds this client's registry does not know (their provider is not
        installed here), as ``Kind.group`` with how many live objects each has."""
        known = {(kind.api_group, kind.kind) for kind in self.kinds}
        return [
            (f"{kind}.{group}", count)
            for group, kind, count in await self.store.kinds()
            if (group, kind) not in known
        ]

    async def compactable(self, before: int) -> int:
        """How many events :meth:`compact` would drop before ``before``."""
        return await self.store.compactable(before)

    async def vacuum(self) -> None:
        """Return the space :meth:`compact` freed to the filesystem (the database file
        shrinks; without it, freed pages are only reused by later writes)."""
        await self.store.vacuum()

    async def verify(self, *, deep: bool = False) -> VerifyReport:
        """Rebuild the projection from the log, compare, and report the differences;
        decode every current object (with ``deep``: every event's body too) and report
        each that cannot be decoded, by revision."""
        return await self.store.verify(deep=deep, check=self.decoder.resource)
