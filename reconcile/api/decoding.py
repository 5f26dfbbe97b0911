"""Reading stored bodies back as typed resources and events.

What the store holds was admitted (strictly, with field paths) before it was written, so
reading it back takes the fast way: metadata built directly, spec and status through the
stored-body converter, and whatever the caller already holds in structured form (the spec
a write left alone, the status it wrote) reused instead of decoded again.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Mapping
from typing import Any

import attrs

from reconcile.errors import ConversionError, CorruptError
from reconcile.model.events import Event
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectMeta
from reconcile.model.registry import KindRegistry
from reconcile.model.resource import AnyResource, Resource, api_group_of
from reconcile.model.serde import make_stored_converter, structure_stored_meta
from reconcile.model.spelling import is_old_body, respell_document
from reconcile.model.versions import convert_body
from reconcile.store.contract import Mutation, RawEvent, StoredObject

__all__ = ["Decoder", "Unconverted"]


def _corrupt(body: Any, exc: Exception) -> CorruptError:
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    revision = meta.get("resourceVersion", meta.get("resource_version"))
    kind = body.get("kind") if isinstance(body, Mapping) else None
    key = f"{kind} {meta.get('namespace')}/{meta.get('name')}"
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return CorruptError(revision if isinstance(revision, int) else 0, key, f"does not structure: {reason}")


@attrs.frozen
class _OnCurrent:
    """A mutation given the stored object in the current spelling (see
    :meth:`Decoder.mutation`)."""

    decoder: Decoder
    mutation: Mutation

    def __call__(self, stored: StoredObject | None) -> Any:
        return self.mutation(self.decoder.current(stored))


@attrs.frozen
class Unconverted(Resource[Any, Any]):
    """An object whose body is of another version of its kind and whose conversion to the
    storage version failed: as stored (its version's spec, the kind's status), with the
    error. What a cache holds for it, so that the rest of the kind goes on: a read of it
    through the cached client raises ``error`` (a TerminalError: its reconcile stops
    there), and a status write (the terminal record) still goes through."""

    error: ConversionError | None = None


class Decoder:
    """Structures stored bodies with the kinds of one registry."""

    def __init__(self, kinds: KindRegistry) -> None:
        self.kinds = kinds
        #: Reads back what the store wrote (admitted through the strict converter before).
        self.converter = make_stored_converter()

    def resource(self, body: Mapping[str, Any], *, spec: Any = None, status: Any = None) -> AnyResource:
        """A stored body as a Resource (spec and status as the kind's classes; plain
        mappings when the kind is not registered). ``spec`` and ``status``, when given,
        are the already structured spec and status of this body. A body that does not
        structure (it was admitted, so the disk changed under it) is a CorruptError."""
        try:
            return self._resource(body, spec, status)
        except ConversionError:
            raise  # (the kind's function failed, not the disk)
        except Exception as exc:
            raise _corrupt(body, exc) from exc

    def cached(self, body: Mapping[str, Any], based_on: AnyResource | None = None) -> AnyResource:
        """:meth:`resource`, for a cache: a body whose conversion fails is an
        :class:`Unconverted` object instead of an error (the informer goes on). The spec
        of ``based_on``, the object the cache holds for the key, is reused when the body
        is the same incarnation (its uid) at the same generation (every spec change bumps
        it, and :func:`~reconcile.api.changing.same` tells ``1`` from ``true``): a status
        or metadata change decodes only what it can have changed. So the cache must hold
        stored specs only: a write's result built from an object the caller changed (a
        spec ``record_actions`` was handed but did not write) would stay in it until the
        next spec change or list, where the next watch event used to replace it."""
        spec = None
        if based_on is not None and not isinstance(based_on, Unconverted):
            meta, known = body.get("metadata"), based_on.metadata
            if (
                isinstance(meta, Mapping)
                and known.generation is not None
                and (meta.get("generation"), meta.get("uid")) == (known.generation, known.uid)
            ):
                spec = based_on.spec
        try:
            return self.resource(body, spec=spec)
        except ConversionError as exc:
            return self._unconverted(body, exc)

    def _unconverted(self, body: Mapping[str, Any], error: ConversionError) -> Unconverted:
        body = self.respelled(body)
        spoke = self.kinds.spoke(body["apiVersion"], body["kind"])
        assert spoke is not None  # (only a spoke's body is converted)
        kind, version = spoke
        spec: Any = body.get("spec")
        with contextlib.suppress(Exception):  # (its own version's class, when it fits)
            spec = self.converter.structure(spec or {}, version.spec_type)
        status = self.converter.structure(body.get("status") or {}, kind.status_type)
        meta = structure_stored_meta(body["metadata"])
        return Unconverted(body["apiVersion"], body["kind"], meta, spec, status, error)

    def _resource(self, body: Mapping[str, Any], spec: Any, status: Any) -> AnyResource:
        body = self.respelled(body)
        kind = self.kinds.get(body["apiVersion"], body["kind"])
        if kind is None and self.kinds.has_versions:
            # Written under another version of its kind (the log is forever): read in
            # the storage version. (A kind with one version never comes here.)
            body, kind = self._stored_version(body)
        meta = structure_stored_meta(body["metadata"])
        if kind is None:
            return Resource(body["apiVersion"], body["kind"], meta, body.get("spec"), body.get("status"))
        if spec is None:
            spec = self.converter.structure(body["spec"], kind.spec_type)
        if status is None:
            status = self.converter.structure(body.get("status") or {}, kind.status_type)
        return Resource(body["apiVersion"], body["kind"], meta, spec, status)

    def respelled(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """A body in the current spelling: one the store wrote before the change to
        Kubernetes' camelCase (the log is never rewritten) is read in the new spelling,
        walked with its kind's classes (a kind not registered here: its envelope and
        metadata only); any other is returned as it is."""
        return self._respelled_old(body) if is_old_body(body) else body

    def comparable(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """``body`` in the current spelling and its kind's storage version, for
        comparison with another (history's changes: neither a rename nor a migration
        to the storage version is a change); as it is when its conversion fails."""
        body = self.respelled(body)
        if self.kinds.has_versions and self.kinds.spoke(body["apiVersion"], body["kind"]) is not None:
            with contextlib.suppress(ConversionError):
                return self._stored_version(body)[0]
        return body

    def _stored_version(self, body: Mapping[str, Any]) -> tuple[Mapping[str, Any], Kind | None]:
        """A body of a spoke version (served or not) converted to its kind's storage
        version, and that kind; any other body as it is, with no kind."""
        spoke = self.kinds.spoke(body["apiVersion"], body["kind"])
        if spoke is None:
            return body, None
        kind, version = spoke
        converted = convert_body(
            body,
            to_api_version=kind.api_version,
            from_type=version.spec_type,
            to_type=kind.spec_type,
            function=version.to_storage,
            structure=self.converter,
            unstructure=self.converter,
        )
        return converted, kind

    def at_version(self, obj: AnyResource, api_version: str) -> tuple[AnyResource, str | None]:
        """``obj`` (as read: its storage version) in another served version of its kind,
        given whole (``sites.example.dev/v1alpha1``) or by name (``v1alpha1``), and the
        version's deprecation warning, if any. An unknown or unserved version is an
        :class:`~reconcile.errors.InvalidError` naming the served ones; a conversion that
        raises, a :class:`~reconcile.model.versions.ConversionError`."""
        if "/" not in api_version:
            api_version = f"{api_group_of(obj.api_version)}/{api_version}"
        if api_version == obj.api_version:
            return obj, None
        kind, version = self.kinds.lookup_version(api_version, obj.kind)
        if version is None:  # pragma: no cover - reads are decoded in the storage version
            return obj, None
        meta = obj.metadata
        subject = f"{meta.namespace}/{meta.name}"
        try:
            spec = version.from_storage(obj.spec)
            if not isinstance(spec, version.spec_type):
                msg = f"the conversion returned {type(spec).__name__}, not {version.spec_type.__name__}"
                raise TypeError(msg)  # noqa: TRY301 - reported as the others are
        except Exception as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ConversionError(obj.kind, subject, obj.api_version, api_version, reason) from exc
        converted = Resource(api_version, obj.kind, meta, spec, obj.status)
        return converted, version.warning(api_version, obj.kind, kind.api_version)

    def _respelled_old(self, body: Mapping[str, Any]) -> dict[str, Any]:
        api_version, kind_name = str(body["api_version"]), str(body.get("kind", ""))
        spoke = self.kinds.spoke(api_version, kind_name)
        if spoke is not None:  # walked with its own version's spec class
            return dict(respell_document(body, spoke[1].spec_type, spoke[0].status_type).data)
        kind = self._kind_of_old(api_version, kind_name)
        if kind is None:
            return dict(respell_document(body).data)
        return dict(respell_document(body, kind.spec_type, kind.status_type).data)

    def _kind_of_old(self, api_version: str, kind: str) -> Kind | None:
        """The kind an old body is walked with: its own version's, else the registered
        version of its group and kind (a kind may have moved to a new version since the
        body was written: its fields' spelling is what matters, and the object is the
        same object whatever its version)."""
        found = self.kinds.get(api_version, kind)
        if found is None:
            group = api_group_of(api_version)
            found = next((k for k in self.kinds if k.api_group == group and k.kind == kind), None)
        return found

    def current(self, stored: StoredObject | None) -> StoredObject | None:
        """``stored`` with its body in the current spelling and its kind's storage version
        (what mutations read). A body whose conversion fails is left in its version: a
        write that replaces it (an apply) or only records (a status) still goes through."""
        if stored is None or (not self.kinds.has_versions and not is_old_body(stored.body)):
            return stored  # (every write of a one-version kind's object: two tests)
        body = stored.body
        if is_old_body(body):
            body = self._respelled_old(body)
        if self.kinds.has_versions and self.kinds.spoke(body["apiVersion"], body["kind"]) is not None:
            with contextlib.suppress(ConversionError):
                body = dict(self._stored_version(body)[0])
        if body is stored.body:
            return stored
        return StoredObject(stored.key, stored.uid, stored.resource_version, dict(body))

    def mutation(self, mutation: Mutation) -> Mutation:
        """``mutation``, given the current object in the current spelling; one already
        given it is returned as it is (a write wraps what it is handed, and an apply's
        mutation was wrapped when it was made: the body is looked at once)."""
        return mutation if isinstance(mutation, _OnCurrent) else _OnCurrent(self, mutation)

    def written(
        self, stored: StoredObject | None, based_on: AnyResource | None = None, status: Any = None
    ) -> AnyResource:
        """A write's result, reusing what the write cannot have changed: the spec of
        ``based_on`` when the object is still its incarnation (its uid) at its generation
        (every spec change bumps it), and the ``status`` it wrote."""
        assert stored is not None
        spec = None
        if based_on is not None:
            meta, known = stored.body["metadata"], based_on.metadata
            if meta.get("generation") == known.generation and meta.get("uid") == known.uid:
                spec = based_on.spec
        try:
            return self.resource(stored.body, spec=spec, status=status)
        except ConversionError as exc:  # (a status written on a body that does not convert)
            return self._unconverted(stored.body, exc)

    def evolved(self, based_on: AnyResource, stored: StoredObject | None, status: Any = None) -> AnyResource:
        """The result of a write that only records (action events, annotations, a
        finalizer, the ``status`` given) made on ``based_on`` while it was the stored
        revision: ``based_on`` with the write's metadata, nothing decoded."""
        assert stored is not None
        written = stored.body["metadata"]
        old = based_on.metadata
        # Built field by field (attrs.evolve looks the fields up at every call: a third of
        # this method's time). A test compares the result with a full decode.
        meta = ObjectMeta(
            old.name,
            old.namespace,
            old.uid,
            old.generation,
            stored.resource_version,
            old.creation_timestamp,
            old.deletion_timestamp,
            old.labels,
            dict(written.get("annotations") or {}),
            tuple(written.get("finalizers") or ()),
            old.owner_references,
            old.managed_fields,
        )
        return Resource(
            based_on.api_version,
            based_on.kind,
            meta,
            based_on.spec,
            based_on.status if status is None else status,
        )

    def event(self, raw: RawEvent) -> Event:
        """A stored event with its object (None for a note or a body left out)."""
        return Event(
            revision=raw.revision,
            time=datetime.datetime.fromtimestamp(raw.time, datetime.UTC),
            type=raw.type,
            key=raw.key,
            uid=raw.uid,
            actor=raw.actor,
            object=None if raw.body is None else self.resource(raw.body),
            data=raw.data,
            user=raw.user,
        )
