"""The Client: every read and write of resources goes through it.

Writes are admitted (validated, defaulted) here, in the caller's task, and then handed to
the store as pure mutations (:mod:`.mutations`), so many concurrent writers share one
group commit. Reads come back as typed :class:`~reconcile.model.Resource` values, with
spec and status structured into the kind's classes.
"""

from __future__ import annotations

import builtins
import copy
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reconcile.api import bulk, fields, mutations
from reconcile.api.admission import MAX_ANNOTATIONS_BYTES, Admission, Admitted, warned
from reconcile.api.bulk import Applied
from reconcile.api.decoding import Decoder
from reconcile.api.engine import Engine, Maintenance, admitted_key
from reconcile.api.merging import merge_patch
from reconcile.api.paging import ResourceList
from reconcile.api.reading import KindRef, Reading
from reconcile.api.rehearsing import rehearsing
from reconcile.api.requests import PATCHABLE_METADATA, check_action, check_patch
from reconcile.errors import ConflictError, InvalidError, NotFoundError, ReconcileError
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.registry import KindRegistry
from reconcile.model.resource import AnyResource
from reconcile.model.serde import format_epoch, make_converter, structure_errors
from reconcile.store.contract import (
    EventStore,
    Mutation,
    Note,
    StoredObject,
    WriteResult,
)

__all__ = ["DEFAULT_MANAGER", "Client", "ResourceList"]

DEFAULT_MANAGER = "reconcile"
_PATCH_ATTEMPTS = 16


class Client(Reading):
    """Resource API over an :class:`~reconcile.store.EventStore`."""

    def __init__(
        self,
        store: EventStore,
        kinds: KindRegistry,
        *,
        clock: Callable[[], float] = time.time,
        provider_config: Mapping[str, Mapping[str, Any]] | None = None,
        manager: str = DEFAULT_MANAGER,
        user: str | None = None,
    ) -> None:
        """``manager`` is the field manager this client's writes are recorded under when a
        call names none (the events' actor, the key of ``managed_fields``); ``user`` is
        who asks for them (``alice@laptop``), recorded beside it in every event it writes
        (None: nobody in particular, as for a controller)."""
        self.store = store
        self.manager = manager
        self.user = user
        self.kinds = kinds
        self.converter = make_converter()
        self.decoder = Decoder(kinds)
        self.admission = Admission(kinds, self.converter, provider_config)
        self._clock = clock
        #: The engine-facing side: what controllers, caches and the bulk apply use
        #: beside the verbs (raw reads, queued applies, recorded actions).
        self.engine = Engine(
            store,
            kinds,
            admission=self.admission,
            converter=self.converter,
            decoder=self.decoder,
            manager=manager,
            user=user,
            write=self._write,
            now=self._now,
        )
        self.engine.reader = self  # what admission hooks read other objects with
        #: The store's upkeep beside ``compact`` and ``verify`` (vacuum, orphans).
        self.maintenance = Maintenance(store)

    def acting_as(self, user: str | None, *, dry_run: bool = False) -> Client:
        """A client for another ``user`` (recorded in the events its writes append),
        sharing everything else with this one: the store, the kinds, the converter, admission and the
        decoder (cheap: one object and its engine, for each request of a server that
        acts for many users). ``dry_run``: its writes are checked and answered as they
        would be, and nothing is stored (:mod:`reconcile.api.rehearsing`)."""
        other = copy.copy(self)
        other.user = user
        if dry_run:
            other.store = rehearsing(self.store)
        other.engine = Engine(
            other.store,
            self.kinds,
            admission=self.admission,
            converter=self.converter,
            decoder=self.decoder,
            manager=self.manager,
            user=user,
            write=other._write,  # noqa: SLF001 - its own class's
            now=other._now,  # noqa: SLF001
        )
        other.engine.reader = other if self.engine.reader is self else self.engine.reader
        other.maintenance = Maintenance(other.store)
        return other

    @property
    def clock(self) -> Callable[[], float]:
        """The wall clock this client stamps times with (``time.time`` by default)."""
        return self._clock

    async def _write(self, key: ObjectKey, mutation: Mutation, *, actor: str | None) -> WriteResult:
        written = self.decoder.mutation(mutation)
        return await self.store.write(key, written, actor=actor or self.manager, user=self.user)

    def _now(self) -> str:
        return format_epoch(self._clock())

    def _result(self, stored: StoredObject | None) -> AnyResource:
        assert stored is not None
        return self.decode(stored.body)

    # -- writes ------------------------------------------------------------------------

    async def apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None = None,
        origin: Path | None = None,
        force: bool = False,
        owners_stored: bool = False,
    ) -> AnyResource:
        """Declare an object: create it, or bring the stored one to the manifest by
        server-side apply under the field manager ``manager`` (see
        :mod:`reconcile.api.fields`): the fields it declared before and no longer
        declares go, fields other managers own stay, and declaring one of those with
        another value is :class:`~reconcile.errors.FieldConflictError` unless ``force``.

        An identical apply appends nothing. A ``metadata.resource_version`` in the
        manifest is a precondition. ``origin`` is the manifest file it was read from:
        kinds that resolve relative references (a source file) resolve them against it.
        ``owners_stored`` is a hint, checked by the write: the caller saw the stored
        object list every owner reference the manifest names (a controller declaring
        its child again), so the ownership-cycle check, which reads the owners, is
        needed only if the write finds otherwise (see ``Engine.write_admitted``).
        """
        return await self._apply(
            manifest,
            manager=manager,
            create_only=False,
            origin=origin,
            force=force,
            owners_stored=owners_stored,
        )

    async def create(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None = None,
        origin: Path | None = None,
    ) -> AnyResource:
        """Create an object; :class:`AlreadyExistsError` when it exists. The fields it
        sets are ``manager``'s Update entry (``NAME (Update)``), as Kubernetes records a
        ``POST``, not an apply's: a later apply of another value by another manager is a
        conflict with it, of the same value shares the field."""
        return await self._apply(manifest, manager=manager, create_only=True, origin=origin, force=False)

    async def _apply(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        *,
        manager: str | None,
        create_only: bool,
        origin: Path | None,
        force: bool,
        owners_stored: bool = False,
    ) -> AnyResource:
        try:
            admitted = self.admission.admit(manifest, origin=origin)
        except InvalidError as exc:
            admitted = await self._admit_partial(manifest, exc, manager=manager, origin=origin)
        if admitted.needs_review:
            admitted = await self.engine.review(admitted)
        applied = await self.engine.write_admitted(
            warned(admitted),
            manager=manager,
            create_only=create_only,
            force=force,
            owners_stored=owners_stored,
        )
        if applied.object is None:  # pragma: no cover - a write that succeeded has its object
            raise ReconcileError(f"{applied.key}: the apply returned no object")
        return applied.object

    async def _admit_partial(
        self,
        manifest: Mapping[str, Any] | AnyResource,
        refused: InvalidError,
        *,
        manager: str | None,
        origin: Path | None,
    ) -> Admitted:
        """A manifest that declares only some fields (server-side apply), admitted with
        the stored values of the fields other managers own filled in: as Kubernetes
        validates an apply merged with the live object. What it declares is still only
        what it gave. ``refused`` is raised when that does not apply (no stored object,
        no field of another manager's to fill in)."""
        # No spec at all declares none of it (kubectl's apply of the last-applied
        # annotation alone, when it moves a client-side apply's fields to server-side).
        spec = manifest.get("spec", {}) if isinstance(manifest, Mapping) else None
        meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
        if (
            not isinstance(spec, Mapping)
            or not isinstance(meta, Mapping)
            or not isinstance(manifest, Mapping)
        ):
            raise refused
        try:
            kind = self.kinds.lookup(str(manifest.get("apiVersion")), str(manifest.get("kind")))
            key = ObjectKey(
                kind.api_group, kind.kind, str(meta.get("namespace") or DEFAULT_NAMESPACE), meta["name"]
            )
        except (InvalidError, KeyError):
            raise refused from None
        if kind.api_version != manifest.get("apiVersion"):
            raise refused  # an older version's spec: the stored (storage) paths are not its own
        stored = await self.store.read(key)
        if stored is None:
            raise refused
        mine = manager or self.manager
        managed = stored.body["metadata"].get("managedFields") or {}
        theirs = [
            p for name, paths in managed.items() if name != mine for p in paths if p.startswith(fields.SPEC)
        ]
        if not theirs:
            raise refused
        whole = {**manifest, "spec": fields.filled(spec, stored.body["spec"], theirs)}
        admitted = self.admission.admit(whole, origin=origin)
        declared = tuple(fields.declared_paths(spec, admitted.body["spec"]))
        return attrs.evolve(admitted, declared=declared)

    async def apply_many(
        self,
        manifests: Sequence[Mapping[str, Any] | AnyResource | Admitted],
        *,
        manager: str | None = None,
        origins: Sequence[Path | None] | None = None,
        check_all_first: bool = False,
        batch: int = 1024,
        on_applied: Callable[[Applied], None] | None = None,
        atomic: bool = False,
        stop: Callable[[], bool] | None = None,
        prune: Sequence[tuple[ObjectKey, int]] = (),
        force: bool = False,
    ) -> builtins.list[Applied]:
        """Apply many manifests, one result per manifest in their order (see
        :func:`reconcile.api.bulk.apply_many`). ``atomic``: all are stored, in one store
        transaction, or none is (implies ``check_all_first``). ``prune``: objects
        (key, resource_version) deleted with them, in the same transaction with
        ``atomic``; their results follow the manifests'. ``force``: take over fields other
        field managers own (see :meth:`apply`)."""
        return await bulk.apply_many(
            self.engine,
            manifests,
            manager=manager or self.manager,
            origins=origins,
            check_all_first=check_all_first,
            batch=batch,
            on_applied=on_applied,
            atomic=atomic,
            stop=stop,
            prune=prune,
            force=force,
        )

    async def update(
        self, obj: Mapping[str, Any] | AnyResource, *, manager: str | None = None
    ) -> AnyResource | None:
        """Replace spec, labels, annotations, finalizers and owner references, on the
        condition that the object is still at ``obj.metadata.resource_version`` (a
        manifest's ``metadata.resourceVersion``). The
        fields it changes become ``manager``'s (its ``(Update)`` entry in
        ``managedFields``) and no other manager's, without conflict, as a Kubernetes
        update (see :func:`reconcile.api.fields.recorded_update`).

        Returns None when the update removed the last finalizer of a deleting object.
        """
        admitted = self.admission.admit(obj)
        if admitted.needs_review:
            admitted = warned(await self.engine.review(admitted))
        key = admitted_key(admitted)
        mine = manager or self.manager
        replaced = mutations.replace(key, admitted.body, admitted.kind.immutable, manager=mine)
        result = await self._write(key, self.engine.noted(replaced, admitted), actor=mine)
        return None if result.object is None else self.decode(result.object.body)

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
        """Apply an RFC 7386 merge patch to ``spec``, ``metadata.labels`` and
        ``metadata.annotations``. Without ``resource_version`` a concurrent change is
        retried against the new version; with it, a stale version is a conflict. The
        fields it changes become ``manager``'s, as :meth:`update`'s do."""
        _, key = self._key(kind, name, namespace)
        check_patch(patch)
        manager = manager or self.manager
        if "spec" not in patch:
            # Labels and annotations only: validated here, merged inside the write, so no
            # read round trip and no conflict to retry.
            patches = {f: v for f, v in patch.get("metadata", {}).items() if f in PATCHABLE_METADATA}
            errors = self.admission.metadata_patch_errors(patches)
            if errors:
                raise InvalidError(errors, subject=str(key))
            mutation = mutations.patch_metadata(
                key, patches, resource_version, MAX_ANNOTATIONS_BYTES, manager=manager
            )
            return self._result((await self._write(key, mutation, actor=manager)).object)
        for _ in range(_PATCH_ATTEMPTS):
            current = self.decoder.current(await self.store.read(key))
            if current is None:
                raise NotFoundError(f"{key} not found")
            if resource_version is not None and resource_version != current.resource_version:
                raise ConflictError(
                    f"{key} was modified: expected resourceVersion {resource_version}, "
                    f"found {current.resource_version}"
                )
            meta = current.body["metadata"]
            manifest = {
                "apiVersion": current.body["apiVersion"],
                "kind": current.body["kind"],
                "metadata": {
                    **{f: meta.get(f) for f in ("name", "namespace", "finalizers", "ownerReferences")},
                    "labels": merge_patch(
                        meta.get("labels") or {}, patch.get("metadata", {}).get("labels", {})
                    ),
                    "annotations": merge_patch(
                        meta.get("annotations") or {}, patch.get("metadata", {}).get("annotations", {})
                    ),
                    "resourceVersion": current.resource_version,
                },
                "spec": merge_patch(current.body["spec"], patch.get("spec", {})),
            }
            admitted = self.admission.admit(manifest)
            if admitted.needs_review:
                admitted = warned(await self.engine.review(admitted))
            try:
                mutation = self.engine.noted(
                    mutations.replace(key, admitted.body, admitted.kind.immutable, manager=manager), admitted
                )
                result = await self._write(key, mutation, actor=manager)
            except ConflictError:
                if resource_version is not None:
                    raise
                continue
            return self._result(result.object)
        raise ConflictError(f"{key}: gave up after {_PATCH_ATTEMPTS} conflicting attempts")

    async def update_status(
        self,
        obj: AnyResource,
        *,
        manager: str | None = None,
        force: bool = False,
        based_on: AnyResource | None = None,
    ) -> AnyResource:
        """Replace the status only. Guarded by ``obj.metadata.resource_version`` unless
        ``force``; a status equal to the stored one appends nothing. ``based_on``: an
        object of the key whose spec is the stored one of its generation (a cache's):
        the result reuses that spec while the generation is still its own (nothing
        decoded again); ``obj``'s own spec is never trusted so (a caller may have
        changed it)."""
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
        if based_on is not None and not isinstance(based_on.spec, kind.spec_type):
            based_on = None  # (an object whose conversion failed holds its own version's spec)
        key = obj.key
        expected = None if force else obj.metadata.resource_version
        mutation = mutations.update_status(key, body, expected)
        found_at: list[int | None] = []

        def writing(current: StoredObject | None) -> Any:
            found_at.append(None if current is None else current.resource_version)
            return mutation(current)

        result = await self._write(key, writing, actor=manager)
        # The stored status is now the one given (written or already equal to it). A
        # status write changes nothing else of the object: written on ``based_on``'s own
        # revision, the result is ``based_on`` with the write's metadata (nothing decoded).
        if based_on is not None and found_at and found_at[-1] == based_on.metadata.resource_version:
            return self.decoder.evolved(based_on, result.object, status)
        return self.decoder.written(result.object, based_on, status)

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
        """Delete: the object is marked (``deletion_timestamp``) while finalizers remain
        and removed when none do. Returns the marked object, or None once removed.

        ``propagation_policy`` says what becomes of its dependents (the objects whose
        owner references name it; see :data:`reconcile.api.owning.PROPAGATION_POLICIES`):
        ``Background`` (the garbage collector deletes them once it is gone),
        ``Foreground`` (it stays, with the ``foregroundDeletion`` finalizer, until the
        collector has deleted those that block it) or ``Orphan`` (they stay, their
        reference to it removed; it waits with the ``orphan`` finalizer meanwhile)."""
        _, key = self._key(kind, name, namespace)
        mutation = self.engine.delete_mutation(
            key, resource_version=resource_version, propagation_policy=propagation_policy
        )
        result = await self._write(key, mutation, actor=manager)
        return None if result.object is None else self.decode(result.object.body)

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
        manager: str | None = None,
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
        manager: str | None = None,
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
