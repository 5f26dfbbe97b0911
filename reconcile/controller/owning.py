"""Owned children: how an owner's controller hears of them, and declares them each pass.

Two halves, after controller-runtime's ``Owns()`` and ``controllerutil``:

* :func:`owner_handler` is the informer handler a controller adds to the informer of a
  kind it owns (``Runtime.add_controller(..., owns=[...])``): a change or deletion of a
  child requeues the owner its ``controller: true`` reference names (before the change
  and after it, so an orphaned child requeues its former owner too), as
  ``EnqueueRequestForOwner`` does. The controller's own writes do not requeue, as for
  its own kind.
* :class:`Children` is what a reconcile declares its children with
  (``context.children(owner)``): each :meth:`Children.apply` makes the owner the child's
  controller (:func:`~reconcile.set_controller_reference`) and applies it by server-side
  apply under the controller's field manager; :meth:`Children.prune` (run on leaving an
  ``async with`` block without an error) deletes the children the owner controls that
  this pass did not apply -- found through the owner index of the informers of the kinds
  the pass applied and the kinds the controller owns. A child that another owner
  controls is refused (:class:`~reconcile.errors.AlreadyOwnedError`), and said on the
  owner as a ``Synced=False`` condition with reason ``AlreadyOwned``.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import attrs
import orjson

from reconcile.api.decoding import Unconverted
from reconcile.api.owning import controller_of, set_controller_reference
from reconcile.api.reading import KindRef
from reconcile.controller.caching import CachedClient
from reconcile.controller.informing import Informer, InformerEvent
from reconcile.errors import AlreadyOwnedError, ConflictError, NotFoundError
from reconcile.model.conditions import Condition, ConditionStatus, Status, set_condition
from reconcile.model.kinds import Kind
from reconcile.model.meta import DEFAULT_NAMESPACE, ObjectKey
from reconcile.model.resource import AnyResource, api_group_of

__all__ = ["ALREADY_OWNED", "REAPPLY_SECONDS", "AppliedMemo", "Children", "Remembered", "owner_handler"]

LOG = logging.getLogger("reconcile.children")


@attrs.define(eq=False, slots=True)
class Remembered:
    """What a controller last applied of one child (an :data:`AppliedMemo` entry)."""

    #: A fingerprint of the declaration: its manager, force, origin, owner and manifest.
    fingerprint: bytes
    #: What of the child an apply depends on, as that apply left it (:func:`_apply_state`).
    state: bytes
    #: The child's resourceVersion when it was last found in that state: a child still
    #: at it needs no comparison (any write of it moves its resourceVersion).
    version: int | None
    #: When the apply ran (wall-clock seconds).
    applied_at: float


#: What a controller last applied of each child, by key (see :class:`Remembered`).
AppliedMemo = dict[ObjectKey, Remembered]

#: How long a child declared as before and unchanged since goes without a real apply:
#: an admission that reads beyond the manifest (a File's ``source`` file, which may have
#: changed on disk) is run again at least this often, on the owner's next pass.
REAPPLY_SECONDS = 300.0
#: Entries a controller's memo holds at most (children of owners deleted since stay in
#: it): past it, it starts again empty (each child is then applied once more).
MEMO_LIMIT = 100_000

#: The reason of the ``Synced=False`` condition an owner gets when a child it declares is
#: controlled by another owner.
ALREADY_OWNED = "AlreadyOwned"


def _owner_keys(obj: AnyResource | None, owner: Kind) -> Iterable[ObjectKey]:
    if obj is None:
        return ()
    reference = controller_of(obj)
    if (
        reference is None
        or reference.kind != owner.kind
        or api_group_of(reference.api_version) != owner.api_group
    ):
        return ()
    return (ObjectKey(owner.api_group, owner.kind, obj.metadata.namespace, reference.name),)


def _apply_state(obj: AnyResource, child: Mapping[str, Any]) -> bytes:
    """A digest of what of ``obj`` an apply of ``child`` depends on: its incarnation
    (uid), its spec (generation: any change of it, by anyone), who owns which field, its
    owner references, and the labels, annotations and finalizers ``child`` declares. Not
    its status, nor metadata others set that the apply would keep as it is. A digest,
    not the values: a memo of many children holds no containers for the cyclic
    collector to scan again at each collection."""
    meta = obj.metadata
    declared = child.get("metadata") or {}
    state = (
        meta.uid,
        meta.generation,
        sorted(meta.managed_fields.items()),
        # (The references' fields, not their attrs repr: a third of the time.)
        [
            (r.api_version, r.kind, r.name, r.uid, r.controller, r.block_owner_deletion)
            for r in meta.owner_references
        ],
        [(key, meta.labels.get(key)) for key in declared.get("labels") or ()],
        [(key, meta.annotations.get(key)) for key in declared.get("annotations") or ()],
        [name in meta.finalizers for name in declared.get("finalizers") or ()],
    )
    try:
        encoded = orjson.dumps(state)
    except TypeError:  # pragma: no cover - a declared key that is not a string
        encoded = repr(state).encode()
    return hashlib.blake2b(encoded, digest_size=16).digest()


def owner_handler(
    owner: Kind, enqueue: Callable[[ObjectKey], None], ignore_actors: frozenset[str] = frozenset()
) -> Callable[[InformerEvent], None]:
    """An informer handler that requeues the ``owner``-kind controller of each changed
    child (by its ``controller: true`` owner reference), leaving out the changes made
    by ``ignore_actors`` (a deletion always counts)."""

    def handle(event: InformerEvent) -> None:
        if event.actor is not None and event.actor in ignore_actors and event.type != "deleted":
            return
        for key in {*_owner_keys(event.old, owner), *_owner_keys(event.new, owner)}:
            enqueue(key)

    return handle


@attrs.define(eq=False)
class Children:
    """The children one reconcile of ``owner`` declares (see the module docstring).

    An example::

    async with context.children(site) as children:
        for page in site.spec.pages:
            await children.apply(file_manifest(site, page))
    # leaving the block: Files the site controls that were not applied are deleted
    """

    client: CachedClient
    owner: AnyResource
    #: The field manager the children are applied under (None: the client's).
    manager: str | None = None
    #: Kinds whose children of ``owner`` are pruned even when none was applied this pass
    #: (the controller's ``owns``).
    kinds: tuple[Kind, ...] = ()
    #: Take over fields another manager owns (a controller putting its children back).
    force: bool = True
    #: What the controller's earlier passes applied (:class:`AppliedMemo`), shared by
    #: its passes: a child declared as last time and unchanged since is not applied again.
    memo: AppliedMemo | None = None
    applied: set[ObjectKey] = attrs.field(factory=set, init=False)
    _kinds_seen: dict[tuple[str, str], Kind] = attrs.field(factory=dict, init=False)
    # What the memo's checks look up once per pass, not once per child: the kinds by
    # (apiVersion, kind) as declared, their synced informers, the fingerprint's prefix
    # by what it encodes, the clock.
    _kinds: dict[tuple[str, str], Kind] = attrs.field(factory=dict, init=False)
    _informers: dict[tuple[str, ...], Informer] = attrs.field(factory=dict, init=False)
    _prefixes: dict[tuple[str, bool, Path | None, str | None], Any] = attrs.field(factory=dict, init=False)
    _now: float | None = attrs.field(default=None, init=False)

    async def apply(
        self, manifest: Mapping[str, Any] | AnyResource, *, origin: Path | None = None
    ) -> AnyResource:
        """Apply ``manifest`` as a child of the owner (its controller reference set);
        :class:`~reconcile.errors.AlreadyOwnedError` when another owner controls it (said
        in the owner's status too). A mapping declared exactly as this controller last
        applied it, to a child unchanged since in anything an apply depends on (its
        spec, field ownership, owner references and the metadata the mapping declares;
        a status update is no change), is not applied again (the apply would change
        nothing) for :data:`REAPPLY_SECONDS`: the cached child is returned."""
        # (One isinstance check of an ABC per child, not one per helper: it is not free;
        # none for a plain dict, what a controller declares.)
        mapping = manifest if type(manifest) is dict or isinstance(manifest, Mapping) else None
        try:
            found = None if mapping is None else self._key_of(mapping)
            unchanged = None
            if found is not None and mapping is not None and self.memo is not None:
                unchanged = self._unchanged(mapping, origin, *found)
            if unchanged is not None:
                applied = unchanged
            else:
                child = set_controller_reference(self.owner, manifest)
                applied = await self.client.apply(
                    child,
                    manager=self.manager,
                    origin=origin,
                    force=self.force,
                    owners_stored=isinstance(child, dict)
                    and found is not None
                    and self._owners_cached(child, *found),
                )
                if mapping is not None:
                    self._remember(mapping, origin, applied)
        except AlreadyOwnedError as exc:
            await self._refused(exc)
            raise
        if found is not None:
            kind, key = found
        else:
            kind, key = self.client.client.kinds.resolve(applied.kind), applied.key
        self.applied.add(key)
        seen = (kind.api_group, kind.kind)
        if seen not in self._kinds_seen:
            self._kinds_seen[seen] = kind
        return applied

    def _owners_cached(self, child: Mapping[str, Any], kind: Kind, key: ObjectKey) -> bool:
        """Whether the cached child lists every owner ``child`` names (by uid): then its
        apply most likely adds no owner, and the write skips the ownership-cycle check
        if it finds so (``Client.apply(owners_stored=)``)."""
        informer = self._informers.get(key[:2]) or self.client.cache.synced(kind)
        cached = None if informer is None else informer.get(key)
        if cached is None:
            return False
        held = {reference.uid for reference in cached.metadata.owner_references}
        return all(reference.get("uid") in held for reference in child["metadata"]["ownerReferences"])

    def _fingerprint(self, child: Mapping[str, Any], origin: Path | None) -> bytes | None:
        """A digest of ``child`` as declared (before its controller reference is set),
        with what else decides what its apply writes: the manager, force, the origin and
        the owner (its uid). Cheap, as it runs for every child of every pass: what is the
        same for every child of the pass is encoded once (JSON arrays delimit themselves,
        so the two texts one after the other are unambiguous), the child as orjson's
        bytes, never decoded to a string."""
        if self.memo is None:
            return None
        # Keyed by everything it encodes: ``manager``, ``force`` and ``owner`` are public
        # attributes a caller may set between two applies of one pass.
        manager = self.manager or self.client.manager
        declared = (manager, self.force, origin, self.owner.metadata.uid)
        prefix = self._prefixes.get(declared)
        if prefix is None:
            encoded = orjson.dumps([manager, self.force, str(origin), declared[3]])
            prefix = self._prefixes[declared] = hashlib.blake2b(encoded, digest_size=16)
        digest = prefix.copy()  # (the prefix hashed once a pass: each child adds its own bytes)
        try:
            digest.update(orjson.dumps(child))
        except TypeError:  # pragma: no cover - not JSON (orjson.JSONEncodeError): applied as it is
            return None
        return digest.digest()

    def _key_of(self, child: Mapping[str, Any]) -> tuple[Kind, ObjectKey] | None:
        meta = child.get("metadata") or {}
        name = meta.get("name")
        if type(name) is not str and not isinstance(name, str):
            return None
        api_version, kind_name = child.get("apiVersion"), child.get("kind")
        declared = (
            (api_version, kind_name)
            if type(api_version) is str and type(kind_name) is str
            else (str(api_version), str(kind_name))
        )
        kind = self._kinds.get(declared)
        if kind is None:
            kind = self.client.client.kinds.get(*declared)
            if kind is None:
                return None
            self._kinds[declared] = kind
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        return kind, ObjectKey(
            kind.api_group, kind.kind, namespace if type(namespace) is str else str(namespace), name
        )

    def _unchanged(
        self, child: Mapping[str, Any], origin: Path | None, kind: Kind, key: ObjectKey
    ) -> AnyResource | None:
        """The cached child, when ``child`` is declared as last applied and the child is
        as that apply left it (:func:`_apply_state`); None otherwise (apply it). Cheap,
        as it runs for every child of every pass: the child's state is compared only
        when its resourceVersion moved since it was last found unchanged."""
        if self.memo is None:
            return None
        remembered = self.memo.get(key)
        if remembered is None:
            return None
        informer = self._informers.get(key[:2])
        if informer is None:
            informer = self.client.cache.synced(kind)
            if informer is None:
                return None
            self._informers[key[:2]] = informer  # synced once is synced for good
        cached = informer.get(key)
        if cached is None or cached.metadata.deletion_timestamp is not None:
            return None
        if self._now is None:
            self._now = self.client.client.clock()  # one reading for the pass
        if self._now - remembered.applied_at >= REAPPLY_SECONDS:
            return None
        if remembered.fingerprint != self._fingerprint(child, origin):
            return None
        version = cached.metadata.resource_version
        if version != remembered.version:
            if remembered.state != _apply_state(cached, child):
                return None
            remembered.version = version  # a status update, or a write that changed nothing
        return cached

    def _remember(self, child: Mapping[str, Any], origin: Path | None, applied: AnyResource) -> None:
        fingerprint = self._fingerprint(child, origin)
        if fingerprint is not None and self.memo is not None:
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            state = _apply_state(applied, child)
            version = applied.metadata.resource_version
            self.memo[applied.key] = Remembered(fingerprint, state, version, self.client.client.clock())

    def controlled(self, kind: KindRef) -> list[AnyResource]:
        """The cached objects of ``kind`` the owner controls (an informer of ``kind`` must
        run: the controller owns it, or it is read from the store by :meth:`prune`)."""
        uid = self.owner.metadata.uid
        informer = self.client.cache.synced(kind)
        if informer is None or uid is None:
            return []
        return [o for o in informer.owned_by(uid) if (ref := controller_of(o)) is not None and ref.uid == uid]

    async def _controlled(self, kind: KindRef) -> list[AnyResource]:
        uid = self.owner.metadata.uid
        if self.client.cache.synced(kind) is not None:
            return self.controlled(kind)
        listed = await self.client.client.list(kind, namespace=self.owner.metadata.namespace)
        return [o for o in listed.items if (ref := controller_of(o)) is not None and ref.uid == uid]

    async def _unapplied(self, kind: Kind) -> list[AnyResource]:
        """The children of ``kind`` the owner controls that this pass did not apply (the
        applied ones are left out by key, before their objects are looked at)."""
        uid = self.owner.metadata.uid
        informer = self.client.cache.synced(kind)
        if informer is None or uid is None:
            return [c for c in await self._controlled(kind) if c.key not in self.applied]
        applied = self.applied
        keys = [key for key in informer.owned_keys(uid) if key not in applied]
        if not keys:
            return []  # (every pass of a converged owner: it applied all it controls)
        found = (informer.get(key) for key in keys)
        return [
            o for o in found if o is not None and (ref := controller_of(o)) is not None and ref.uid == uid
        ]

    async def prune(self) -> list[ObjectKey]:
        """Delete the children the owner controls that this pass did not apply; their
        keys. A child already gone is no error."""
        kinds: dict[tuple[str, str], Kind] = dict(self._kinds_seen)
        for owned in self.kinds:
            kinds.setdefault((owned.api_group, owned.kind), owned)
        pruned: list[ObjectKey] = []
        for kind in kinds.values():
            for child in await self._unapplied(kind):
                key = child.key
                if child.metadata.deletion_timestamp is not None:
                    continue
                if self.memo is not None:
                    self.memo.pop(key, None)
                try:
                    await self.client.delete(kind, key.name, namespace=key.namespace, manager=self.manager)
                except NotFoundError:
                    continue
                pruned.append(key)
        return pruned

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.prune()
            await self._cleared()

    async def _refused(self, exc: AlreadyOwnedError) -> None:
        """Say on the owner that a child it declares is another's (Synced=False,
        AlreadyOwned), when its status has conditions."""
        await self._say(ConditionStatus.FALSE, ALREADY_OWNED, str(exc), only_if_refused=False)

    async def _cleared(self) -> None:
        """A pass that declared every child: the refusal said before (only that one)
        becomes ``Synced=True``."""
        answered, owner = self.client.cache.get_now(self.owner.key)
        if answered and (owner is None or type(owner) is not Unconverted):
            # What :meth:`_say` would read, at once: nothing to clear unless it says a
            # refusal (every pass of an owner whose children are all its own).
            status = None if owner is None else owner.status
            if not isinstance(status, Status):
                return
            synced = status.condition("Synced")
            if synced is None or synced.reason != ALREADY_OWNED:
                return
        await self._say(ConditionStatus.TRUE, "ReconcileSuccess", "", only_if_refused=True)

    async def _say(self, state: ConditionStatus, reason: str, message: str, *, only_if_refused: bool) -> None:
        owner = self.owner
        try:
            owner = await self.client.get(owner.key)
        except NotFoundError:
            return
        status = owner.status
        if not isinstance(status, Status):
            return
        synced = status.condition("Synced")
        if only_if_refused and (synced is None or synced.reason != ALREADY_OWNED):
            return
        now = datetime.datetime.fromtimestamp(self.client.client.clock(), datetime.UTC)
        condition = Condition("Synced", state, reason, message, now, owner.metadata.generation)
        new = attrs.evolve(status, conditions=set_condition(status.conditions, condition))
        if new == status:
            return
        try:
            await self.client.update_status(attrs.evolve(owner, status=new), force=True)
        except (ConflictError, NotFoundError):  # pragma: no cover - the retry says it again
            LOG.debug("%s: could not record %s", owner.key, ALREADY_OWNED)
