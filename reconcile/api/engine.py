"""The engine-facing side of a :class:`~reconcile.api.Client`, and its maintenance.

A user's :class:`~reconcile.api.Client` reads like kubectl's verbs (``get``, ``list``,
``apply``, ``patch``, ``delete``, ...). What the engine needs besides -- the writes a
controller records its actions with, the applies the bulk path queues by the thousand,
the raw reads an informer decodes only in part -- is here, as ``client.engine``
(:class:`Engine`); what maintenance needs (``compact --vacuum``, ``orphans``) as
``client.maintenance`` (:class:`Maintenance`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import cattrs

from reconcile.api import mutations, owning
from reconcile.api.admission import Admission, Admitted
from reconcile.api.applied import ApplyWrite
from reconcile.api.bulk import Applied
from reconcile.api.conflicts import conflict_error
from reconcile.api.decoding import Decoder
from reconcile.api.owning import check_cycle, owner_key
from reconcile.api.reading import KindRef
from reconcile.api.requests import check_action
from reconcile.api.reviewing import ADMISSION_HOOK_IGNORED, review
from reconcile.api.uids import new_uid
from reconcile.errors import InvalidError
from reconcile.model.events import Bookmark
from reconcile.model.external import ANNOTATION_MANAGEMENT_POLICY, FINALIZER
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectKey
from reconcile.model.registry import KindRegistry
from reconcile.model.resource import AnyResource
from reconcile.store.contract import (
    Change,
    EventStore,
    ListPage,
    Mutation,
    Note,
    Put,
    RawEvent,
    Remove,
    StoredObject,
    WriteResult,
)

__all__ = ["Engine", "Maintenance", "admitted_key"]

#: A client's write: the key, the mutation, and the actor (None: the client's manager).
Write = Callable[..., Awaitable[WriteResult]]


def admitted_key(admitted: Admitted) -> ObjectKey:
    """The key of an admitted manifest."""
    meta = admitted.metadata
    return ObjectKey(admitted.kind.api_group, admitted.kind.kind, meta["namespace"], meta["name"])


def _noting(mutation: Mutation, notes: Sequence[Note]) -> Mutation:
    """``mutation``, followed by ``notes`` in the same write when it puts the object."""

    def noting(current: StoredObject | None) -> Change | Sequence[Change] | None:
        change = mutation(current)
        if isinstance(change, Put):
            return [change, *notes]
        puts = isinstance(change, Sequence) and any(isinstance(c, Put) for c in change)
        if puts and not any(isinstance(c, Remove) for c in change):  # type: ignore[union-attr]
            return [*change, *notes]  # type: ignore[misc]
        return change

    return noting


class _NewOwner(Exception):  # noqa: N818 - not an error: the hint of an apply did not hold
    """An apply's write found an owner reference that the stored object lacks."""


def _owner_edges(references: Sequence[Mapping[str, Any]], namespace: str) -> set[tuple[ObjectKey, str]]:
    return {(owner_key(r, namespace), str(r.get("uid"))) for r in references}


def _no_new_owner(mutation: Mutation, references: Sequence[Mapping[str, Any]]) -> Mutation:
    """``mutation``, run only when the stored object already lists every owner in
    ``references`` (by key and uid); :class:`_NewOwner` otherwise, before it runs.
    Checked in the write's transaction: what it finds is what the write changes."""

    def guarded(current: StoredObject | None) -> Change | Sequence[Change] | None:
        if current is None:
            raise _NewOwner
        namespace = current.key.namespace
        stored = current.body["metadata"].get("ownerReferences") or ()
        if not _owner_edges(references, namespace) <= _owner_edges(stored, namespace):
            raise _NewOwner
        return mutation(current)

    return guarded


class Engine:
    """What the engine writes and reads through, beside a client's verbs: made by the
    :class:`~reconcile.api.Client` (``client.engine``), with its admission, decoder and
    store, writing as it does (under its manager and user)."""

    def __init__(
        self,
        store: EventStore,
        kinds: KindRegistry,
        *,
        admission: Admission,
        converter: cattrs.Converter,
        decoder: Decoder,
        manager: str,
        user: str | None,
        write: Write,
        now: Callable[[], str],
    ) -> None:
        #: The client's store, admission and decoder of stored bodies, and who its
        #: writes are asked by (what the bulk apply needs: :class:`~.bulk.Writer`).
        self.store = store
        self.admission = admission
        self.decoder = decoder
        self.user = user
        self._kinds = kinds
        self._converter = converter
        self._manager = manager
        self._write = write
        self._now = now
        #: What admission hooks read other objects with (the client sets itself; a
        #: Runtime, its cache's ``HookReader``).
        self.reader: Any = None

    def _kind(self, kind: KindRef) -> Kind:
        return self._kinds.resolve(kind)

    def _key(self, kind: KindRef, name: str, namespace: str) -> tuple[Kind, ObjectKey]:
        return self._kinds.key_of(kind, name, namespace)

    # -- raw reads, for caches -----------------------------------------------------------

    async def raw_list(self, kind: KindRef, *, namespace: str | None = None) -> ListPage:
        """Every object of a kind as the store has it (bodies parsed, not decoded into
        Resources) and the revision they reflect: for a cache that decodes only what it
        does not hold already (``client.decode`` makes a Resource of a body)."""
        found = self._kind(kind)
        return await self.store.list(found.api_group, found.kind, namespace=namespace)

    def raw_watch(
        self, kind: KindRef | None = None, *, namespace: str | None = None, since: int = 0
    ) -> AsyncIterator[RawEvent | Bookmark]:
        """``Client.watch`` as the store yields it: bookmarks included, each event's body
        still unparsed until read (``RawEvent.body``; ``client.decode`` makes a Resource
        of it). For a cache that drops the events it already holds before building
        anything."""
        found = None if kind is None else self._kind(kind)
        return self.store.watch(
            since=since,
            api_group=None if found is None else found.api_group,
            kind=None if found is None else found.kind,
            namespace=namespace,
        )

    async def claimant(self, kind: KindRef, spec: Mapping[str, Any]) -> ObjectKey | None:
        """The live object of the kind that declares the external resource an
        unstructured ``spec`` names (``Kind.identity``), if any."""
        found = self._kind(kind)
        identity = found.identity_of(spec)
        if identity is None:
            return None
        return await self.store.claimant(found.api_group, found.kind, identity)

    # -- the store's identity, secret and settings ------------------------------------------

    async def store_identity(self) -> str:
        """The store's identity (made once with the database, kept by a copy or a
        restore): what providers write into their ownership marks."""
        return await self.store.identity()

    async def store_mark_key(self) -> bytes:
        """The store's secret (made once with the database, kept by a copy or a restore,
        never in the event log): what providers sign their ownership marks with. Keep it
        out of logs and output."""
        return await self.store.mark_key()

    async def remembered(self) -> dict[str, Any]:
        """The settings the store remembers (``remember``), by name."""
        return await self.store.remembered()

    async def remember(self, name: str, value: Any) -> None:
        """Have the store remember ``value`` (anything JSON holds; None forgets) under
        ``name``, beside the log: what the next program on this store should find (the
        CLI remembers each provider's config there, as applied)."""
        await self.store.remember(name, value)

    # -- applies, for writers that queue them --------------------------------------------

    def now(self) -> str:
        """The time a write made now is stamped with (the client's clock)."""
        return self._now()

    async def review(self, admitted: Admitted) -> Admitted:
        """``admitted`` through its kind's admission hooks (:mod:`.reviewing`): the object
        to store, or InvalidError. Call it only when ``admitted.needs_review``."""
        return await review(self.admission, admitted, self.reader)

    def apply_mutation(
        self,
        admitted: Admitted,
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
    ) -> tuple[ObjectKey, Mutation]:
        """The key and the store mutation that applying an admitted manifest is: the
        immutable-field, version and deletion checks run inside it, against the stored
        object, once (a dry run calls it on what is stored). A hook that broke under
        ``Ignore`` is recorded by the same write, after the change it let through
        (an apply that changes nothing records nothing: applying again stays a no-op)."""
        key, applying = self._applying(admitted, manager or self._manager, create_only, force, self._now())
        return key, self.decoder.mutation(applying)

    def _applying(
        self, admitted: Admitted, manager: str, create_only: bool, force: bool, now: str
    ) -> tuple[ObjectKey, Mutation]:
        """:meth:`apply_mutation`'s key and mutation, given the stored object in the
        current spelling and version (not wrapped to read it so). Its arguments given
        by position: a bulk apply calls it once per document."""
        kind, body = admitted.kind, admitted.body
        key = admitted_key(admitted)
        applying = mutations.apply(
            key,
            body,
            self.admission.status_maker(kind),
            manager=manager,
            uid=new_uid(),
            now=now,
            create_only=create_only,
            immutable=kind.immutable,
            identity=kind.identity_of(body["spec"]),
            finalizers=self._default_finalizers(admitted),
            declared=admitted.declared,
            force=force,
        )
        if admitted.ignored:
            applying = self.noted(applying, admitted)
        return key, applying

    @staticmethod
    def noted(mutation: Mutation, admitted: Admitted) -> Mutation:
        """``mutation`` recording, after the object it puts, every hook that broke under
        ``Ignore`` while ``admitted`` was reviewed (itself when none did)."""
        if not admitted.ignored:
            return mutation
        return _noting(mutation, [Note(ADMISSION_HOOK_IGNORED, dict(i)) for i in admitted.ignored])

    def applied_body(
        self,
        admitted: Admitted,
        stored: StoredObject | None,
        *,
        manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """The body applying ``admitted`` would leave of ``stored`` (None: nothing
        stored), without writing: the apply's own mutation, run on it (server-side apply
        merged, defaults filled), so what ``plan`` and ``diff`` show is what ``apply``
        does. Raises what the apply would (a conflict, an immutable field)."""
        _, mutation = self.apply_mutation(admitted, manager=manager, force=force)
        change = mutation(stored)
        if change is None:
            assert stored is not None
            return stored.body
        if isinstance(change, Put | Remove):
            return change.body
        return admitted.body  # pragma: no cover - an apply writes one Put or Remove

    def delete_mutation(
        self, key: ObjectKey, *, resource_version: int | None = None, propagation_policy: str = "Background"
    ) -> Mutation:
        """The store mutation that deleting ``key`` is (guarded by ``resource_version``
        when given), for writers that queue it with others (``apply_many``'s prune)."""
        policy = owning.propagation_policy(propagation_policy)
        deleting = mutations.delete(key, now=self._now(), expected=resource_version, policy=policy)
        return self.decoder.mutation(deleting)

    def _default_finalizers(self, admitted: Admitted) -> tuple[str, ...]:
        """The managed finalizer for a new object of a kind a provider manages (unless it
        is only observed): on from the apply's own event, so the external create needs no
        write before it, and a delete that comes while it runs waits for its cleanup."""
        if self._kinds.provider_of(admitted.kind) is None:
            return ()
        annotations = admitted.body["metadata"].get("annotations") or {}
        if annotations.get(ANNOTATION_MANAGEMENT_POLICY) == "ObserveOnly":
            return ()
        return (FINALIZER,)

    async def write_admitted(
        self,
        admitted: Admitted,
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
        owners_stored: bool = False,
    ) -> Applied:
        """Apply a manifest admission has already passed (``Client.admission.admit``):
        no second admission. Says what it did (created, configured, unchanged).

        ``owners_stored``: the caller has seen the stored object list every owner the
        manifest names (a controller declaring again a child it controls): the write
        is tried first without the ownership-cycle check, which reads the owners from
        the store, and goes through only if its transaction finds no owner reference
        that the stored object lacks (then it adds no edge to the owner graph, so no
        cycle either); if it finds one, nothing is written and the apply is made as
        without the hint, check first."""
        key, applying, finish = self.apply_write(
            admitted, manager=manager, create_only=create_only, force=force
        )
        references: Sequence[Mapping[str, Any]] = admitted.metadata.get("ownerReferences") or ()
        hinted = bool(references) and owners_stored
        if references and not hinted:
            await check_cycle(self.store, key, references)
        if admitted.kind.conflicts is not None:
            refusal = await conflict_error(self.store, key, admitted, {})
            if refusal is not None:
                raise refusal
        if hinted:
            try:
                # (Given the owners in today's spelling, as the apply's mutation is.)
                guarded = self.decoder.mutation(_no_new_owner(applying, references))
                return finish(await self._write(key, guarded, actor=manager))
            except _NewOwner:
                # The stored object lacks an owner the caller saw it list (what it read
                # trailed the store): nothing was written; check, then write.
                await check_cycle(self.store, key, references)
        return finish(await self._write(key, applying, actor=manager))

    def apply_write(
        self,
        admitted: Admitted,
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
        now: str | None = None,
    ) -> tuple[ObjectKey, Mutation, Callable[[WriteResult], Applied]]:
        """The store write that applying an admitted manifest is: its key, its mutation,
        and what turns the write's result into an :class:`Applied` (for writers that
        queue a write of their own). ``now``: the creation time of an object it creates
        (None: the clock's, now)."""
        (write,) = self.apply_writes(
            [admitted], manager=manager, create_only=create_only, force=force, now=now
        )
        return write.key, write, write.finish

    def apply_writes(
        self,
        admitted: Sequence[Admitted],
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
        now: str | None = None,
    ) -> list[ApplyWrite]:
        """:meth:`apply_write` of each admitted manifest, for writers that queue many
        writes at once (the bulk apply): each write is the store's mutation, its
        ``key`` the object's and its ``finish`` what makes the :class:`Applied` of its
        result. ``now``: the creation time of the objects they create (None: the
        clock's, now), taken once for them all: they are applied together."""
        manager = manager or self._manager
        now = self._now() if now is None else now
        applying, decoder = self._applying, self.decoder
        return [
            ApplyWrite(*applying(item, manager, create_only, force, now), item, decoder) for item in admitted
        ]

    # -- a controller's records -------------------------------------------------------------

    def _recording(
        self,
        obj: AnyResource,
        events: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        status: Any,
        annotations: Mapping[str, str | None] | None = None,
        add_finalizer: str | None = None,
        release: str | None = None,
    ) -> tuple[Kind, ObjectKey, Mutation]:
        """The checked mutation that records action events with their bookkeeping."""
        found = self._kinds.lookup(obj.api_version, obj.kind)
        key = obj.key
        for event_type, data in events:
            check_action(event_type, data)
        if annotations:
            errors = self.admission.metadata_patch_errors({"annotations": annotations})
            if errors:
                raise InvalidError(errors, subject=str(key))
        converter = self._converter
        status_body = None if status is None else converter.unstructure(status, found.status_type)
        mutation = mutations.record_actions(
            key,
            [(t, None if d is None else dict(d)) for t, d in events],
            annotations=annotations,
            finalizer=add_finalizer,
            status=status_body,
            release=release,
        )
        return found, key, mutation

    async def remove_owner_references(
        self, key: ObjectKey, uids: Sequence[str], *, manager: str | None = None
    ) -> AnyResource | None:
        """Remove ``key``'s owner references to ``uids`` (the garbage collector orphaning
        a dependent); the object after, None when it is gone."""
        result = await self._write(key, mutations.remove_owner_references(key, uids), actor=manager)
        return None if result.object is None else self.decoder.resource(result.object.body)

    async def release(
        self,
        obj: AnyResource,
        finalizer: str,
        events: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        status: Any = None,
        manager: str | None = None,
    ) -> tuple[AnyResource | None, int]:
        """Record action events about ``obj`` and remove ``finalizer`` in one write (a
        controller's cleanup and its record together: a crash keeps both or neither).
        When it was the last finalizer of an object being deleted, the object goes:
        returns ``(None, revision)``; otherwise the object after the write and its
        revision."""
        _, key, mutation = self._recording(obj, events, status=status, release=finalizer)
        result = await self._write(key, mutation, actor=manager)
        if result.object is None:
            return None, result.revision
        return self.decoder.resource(result.object.body), result.revision

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
        """Record action events (``(type, data)``) about ``obj`` and, atomically with
        them, merge annotations (None removes one), add a finalizer and replace the status
        (an instance of the kind's status class). One write, one transaction: a crash
        keeps all of it or none. Returns the object after it.

        ``obj`` is the object the caller acted on, exactly as it was read (from the store
        or an informer, not a modified copy): when the write finds it still the stored
        revision, the result is built from it (the write's metadata, the status written)
        instead of decoding the stored body again; when the write finds its generation
        unchanged, the result reuses its structured spec."""
        found, key, mutation = self._recording(
            obj, events, status=status, annotations=annotations, add_finalizer=add_finalizer
        )
        found_at: list[int | None] = []

        def recording(current: StoredObject | None) -> Any:
            found_at.append(None if current is None else current.resource_version)
            return mutation(current)

        result = await self._write(key, recording, actor=manager)
        based_on: AnyResource | None = obj if isinstance(obj.spec, found.spec_type) else None
        if based_on is not None and found_at[-1] == based_on.metadata.resource_version:
            return self.decoder.evolved(based_on, result.object, status)
        return self.decoder.written(result.object, based_on, status)


class Maintenance:
    """The store's upkeep beside a client's verbs (``client.maintenance``): what
    ``reconcile compact --vacuum`` and ``reconcile orphans`` ask."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    async def compactable(self, before: int) -> int:
        """How many events ``Client.compact`` would drop before ``before``."""
        return await self._store.compactable(before)

    async def vacuum(self) -> None:
        """Return the space ``Client.compact`` freed to the filesystem (the database file
        shrinks; without it, freed pages are only reused by later writes)."""
        await self._store.vacuum()

    async def uids_with_event(self, uids: Sequence[str], event_type: str) -> set[str]:
        """Those of ``uids`` with an event of ``event_type`` in the retained history (a
        scan of the log, for maintenance: what became of objects that are gone)."""
        return await self._store.uids_with_event(uids, event_type)
