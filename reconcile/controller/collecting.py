"""The garbage collector: dependents follow their owners, by propagation policy.

Kubernetes' garbage collector, in one asyncio task group. It reads every kind's informer
(the cache the controllers share: a list, then the log from the list's revision), keeps
an index of live uids beside the informers' owner indexes, and acts on three things,
level-triggered, so that a restart catches up on whatever happened while it was down
(the first list shows the state the log left, and the state is all it needs):

* an object whose owner references all name owners that are gone (no live object has
  that uid: deleted in the background, or while the collector was not running) is
  deleted, in the background; one that still has a live owner only loses the
  references to the gone ones. Before acting, the owner is read from the store by key:
  an informer of the owner's kind that lags behind the dependent's must not make a new
  owner look gone;
* an object being deleted with the ``orphan`` finalizer: its dependents lose their
  reference to it, then the finalizer goes (the object with it, unless others remain);
* an object being deleted with the ``foregroundDeletion`` finalizer: its dependents are
  deleted (foreground themselves when they own others, so the wait goes down the
  chain), and once none of those with ``blockOwnerDeletion`` is left the finalizer goes.

Ownership cycles are refused when applied (:func:`reconcile.api.owning.check_cycle`);
one the collector meets all the same (two racing applies) is not followed: a
foreground deletion does not wait for a dependent that is also its owner, so it ends.

Each action is a write under the field manager ``garbage-collector``, so ``history``
tells who deleted a dependent or removed its owner reference, and why is in the data of
the ``GarbageCollected`` / ``Orphaned`` events recorded on it first.

With several runners sharing a store (:attr:`GarbageCollector.gate`, the Runtime's
sharding), the key taken from the queue decides, as for a controller: it is handled
only by the runner holding its shard, every write of it under that shard's fence. A
dependent whose owners are gone is so collected by its own shard's holder; a foreground
or orphan deletion is carried out by the owner's, its writes on the dependents
included. A stale runner's writes are refused (``FencedError``), and the key is
dropped at its retry: it is another runner's now. Keys of the shards a runner gains are
looked at again (:meth:`GarbageCollector.revisit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from reconcile.api.client import Client
from reconcile.api.mutations import FOREGROUND_FINALIZER, ORPHAN_FINALIZER
from reconcile.api.owning import owner_key
from reconcile.controller.caching import Cache, CachedClient
from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.gating import KeyGate
from reconcile.controller.informing import Informer, InformerEvent
from reconcile.controller.queueing import QueueShutDown, WorkQueue
from reconcile.errors import NotFoundError
from reconcile.model.meta import ObjectKey, OwnerReference
from reconcile.model.resource import AnyResource
from reconcile.store.fencing import FENCE

__all__ = ["COLLECTOR_MANAGER", "GarbageCollector"]

LOG = logging.getLogger("reconcile.collector")

#: The field manager (the events' actor) of every write the collector makes.
COLLECTOR_MANAGER = "garbage-collector"
#: Seconds before a key of a shard just gained is looked at again when its kind's cache
#: has not yet reached the former holder's last writes.
_CATCH_UP = 1.0


class GarbageCollector:
    """Deletes dependents whose owners are gone and carries out foreground and orphan
    deletions (see the module docstring). Hosted by the Runtime; ``run`` until
    cancelled."""

    def __init__(self, client: Client, cache: Cache, *, clock: Clock | None = None, workers: int = 4) -> None:
        self.client = client
        self.cache = cache
        self.clock = clock or LoopClock()
        self.workers = workers
        self.queue: WorkQueue[ObjectKey] = WorkQueue(clock=self.clock)
        self._writer = CachedClient(client, cache, manager=COLLECTOR_MANAGER)
        #: uid -> key of every live object the informers hold.
        self._uids: dict[str, ObjectKey] = {}
        self.informers: list[Informer] = [cache.informer(kind) for kind in client.kinds]
        self._by_kind = {(i.kind.api_group, i.kind.kind): i for i in self.informers}
        for informer in self.informers:
            informer.add_handler(self._on_change)
        #: Actions taken (deleted, orphaned, released), for tests and ``statistics``.
        self.actions = 0
        #: With several runners sharing the store: the keys this collector handles (those
        #: of its runner's shards; the others are dropped when taken) and the fence their
        #: writes carry. None: every key, unfenced.
        self.gate: KeyGate | None = None
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after each key the collector handled, and once when every
        informer has its first list: how a host knows it moved (``wait_converged``)."""
        self._listeners.append(listener)

    @property
    def busy(self) -> bool:
        """Whether it has work it may still do: an informer still loading, or keys
        queued or being handled."""
        if not all(i.synced.is_set() for i in self.informers):
            return True
        return bool(len(self.queue) or self.queue.statistics().processing)

    def _moved(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                LOG.exception("garbage collector: a listener failed")

    # -- the index --------------------------------------------------------------------------

    def dependents(self, uid: str) -> list[AnyResource]:
        """Every cached object with an owner reference to ``uid``."""
        return [obj for informer in self.informers for obj in informer.owned_by(uid)]

    def _get(self, key: ObjectKey) -> AnyResource | None:
        informer = self._by_kind.get((key.api_group, key.kind))
        return None if informer is None else informer.get(key)

    def _known(self, key: ObjectKey) -> bool:
        return (key.api_group, key.kind) in self._by_kind

    def _on_change(self, event: InformerEvent) -> None:
        if event.new is None:
            old = event.old
            if old is None:
                return
            uid = old.metadata.uid
            if uid is not None and self._uids.get(uid) == event.key:
                del self._uids[uid]
                self._enqueue(d.key for d in self.dependents(uid))
            # Owners waiting for it in a foreground deletion look again.
            self._enqueue(
                k for r in old.metadata.owner_references if (k := self._uids.get(r.uid)) is not None
            )
            return
        meta = event.new.metadata
        previous = None if event.old is None else event.old.metadata.uid
        if previous is not None and previous != meta.uid and self._uids.get(previous) == event.key:
            # The object was deleted and made again between two looks (a relist): the
            # old one's dependents have lost their owner.
            del self._uids[previous]
            self._enqueue(d.key for d in self.dependents(previous))
        if meta.uid is not None:
            self._uids[meta.uid] = event.key
        if meta.owner_references or (
            meta.deletion_timestamp is not None
            and (FOREGROUND_FINALIZER in meta.finalizers or ORPHAN_FINALIZER in meta.finalizers)
        ):
            self.queue.add(event.key)

    def _enqueue(self, keys: Iterable[ObjectKey]) -> None:
        for key in keys:
            self.queue.add(key)

    def revisit(self, wanted: Callable[[ObjectKey], bool]) -> None:
        """Look again at every cached object ``wanted(key)`` picks that may call for an
        action (owner references, or a foreground or orphan deletion): the keys of shards
        just gained, which the former holder may have left undone."""
        for informer in self.informers:
            for obj in informer.list():
                meta = obj.metadata
                if (meta.owner_references or meta.deletion_timestamp is not None) and wanted(obj.key):
                    self.queue.add(obj.key)

    def _admitted(self, key: ObjectKey) -> bool:
        """Whether this worker handles ``key`` now (the gate, if any, set its fence in
        this worker's context); False: the key was given back."""
        gate = self.gate
        if gate is None:
            return True
        if not gate.owns(key):
            self.queue.done(key, forget=True)  # another runner's: its collector has it
            return False
        informer = self._by_kind.get((key.api_group, key.kind))
        if informer is not None and gate.minimum(key) > informer.revision:
            # The shard's former holder's last writes are not cached yet: acting on an
            # older view could contradict them.
            self.queue.done(key)
            self.queue.add_after(key, _CATCH_UP)
            return False
        # Until this worker's next key: every write of it carries the shard's fence.
        FENCE.set(gate.fence(key))
        return True

    # -- acting --------------------------------------------------------------------------------

    async def process(self, key: ObjectKey) -> None:
        """Do what ``key``'s object calls for now (nothing, most of the time)."""
        obj = self._get(key)
        if obj is None:
            return
        meta = obj.metadata
        if meta.deletion_timestamp is not None:
            if ORPHAN_FINALIZER in meta.finalizers:
                await self._orphan(obj)
            if FOREGROUND_FINALIZER in meta.finalizers:
                await self._foreground(obj)
        if meta.owner_references and meta.deletion_timestamp is None:
            await self._collect_if_orphaned(obj)

    async def _orphan(self, obj: AnyResource) -> None:
        uid = obj.metadata.uid
        assert uid is not None
        for dependent in self.dependents(uid):
            await self._record(dependent.key, "Orphaned", obj)
            await self.client.engine.remove_owner_references(dependent.key, [uid], manager=COLLECTOR_MANAGER)
            self.actions += 1
        await self._release(obj, ORPHAN_FINALIZER)

    async def _foreground(self, obj: AnyResource) -> None:
        uid = obj.metadata.uid
        assert uid is not None
        above = self._owner_uids(obj)
        waiting = False
        for dependent in self.dependents(uid):
            if dependent.metadata.uid in above:
                LOG.warning("%s: %s owns it too (an ownership cycle): not waited for", obj.key, dependent.key)
                continue
            reference = next(r for r in dependent.metadata.owner_references if r.uid == uid)
            waiting = waiting or reference.block_owner_deletion
            if dependent.metadata.deletion_timestamp is None:
                owns_others = dependent.metadata.uid is not None and bool(
                    self.dependents(dependent.metadata.uid)
                )
                await self._delete(dependent, obj, "Foreground" if owns_others else "Background")
        if not waiting:
            await self._release(obj, FOREGROUND_FINALIZER)

    async def _collect_if_orphaned(self, obj: AnyResource) -> None:
        gone = [
            r for r in obj.metadata.owner_references if r.uid not in self._uids and await self._gone(obj, r)
        ]
        if not gone:
            return
        if len(gone) < len(obj.metadata.owner_references):
            await self.client.engine.remove_owner_references(
                obj.key, [r.uid for r in gone], manager=COLLECTOR_MANAGER
            )
            self.actions += 1
            return
        await self._delete(obj, None, "Background", gone=gone)

    async def _gone(self, obj: AnyResource, reference: OwnerReference) -> bool:
        """Whether the owner ``reference`` names is gone, asked of the store (by key,
        then uid); an owner of a kind this runtime does not know is never gone."""
        key = owner_key(reference, obj.metadata.namespace)
        if not self._known(key):
            return False
        stored = await self.client.store.read(key)
        return stored is None or stored.body["metadata"].get("uid") != reference.uid

    def _owner_uids(self, obj: AnyResource) -> set[str]:
        """The uids up ``obj``'s owner chains, as far as the cache knows them."""
        found: set[str] = set()
        frontier = [r.uid for r in obj.metadata.owner_references]
        while frontier:
            uid = frontier.pop()
            if uid in found:
                continue
            found.add(uid)
            key = self._uids.get(uid)
            owner = None if key is None else self._get(key)
            if owner is not None:
                frontier.extend(r.uid for r in owner.metadata.owner_references)
        return found

    async def _delete(
        self,
        obj: AnyResource,
        owner: AnyResource | None,
        policy: str,
        gone: list[OwnerReference] | None = None,
    ) -> None:
        key = obj.key
        await self._record(key, "GarbageCollected", owner, gone)
        with contextlib.suppress(NotFoundError):
            kind = self._by_kind[key.api_group, key.kind].kind
            await self._writer.delete(kind, key.name, namespace=key.namespace, propagation_policy=policy)
        self.actions += 1

    async def _release(self, obj: AnyResource, finalizer: str) -> None:
        key = obj.key
        with contextlib.suppress(NotFoundError):
            kind = self._by_kind[key.api_group, key.kind].kind
            await self._writer.remove_finalizer(kind, key.name, finalizer, namespace=key.namespace)
        self.actions += 1

    async def _record(
        self,
        key: ObjectKey,
        event_type: str,
        owner: AnyResource | None,
        gone: list[OwnerReference] | None = None,
    ) -> None:
        if owner is not None:
            owner_name = f"{owner.kind} {owner.metadata.name!r} (uid {owner.metadata.uid})"
            how = "orphaning its dependents" if event_type == "Orphaned" else "in the foreground"
            data = {"message": f"owner {owner_name} is being deleted {how}"}
        else:
            names = ", ".join(f"{r.kind} {r.name!r} (uid {r.uid})" for r in gone or ())
            data = {"message": f"every owner is gone: {names}"}
        with contextlib.suppress(NotFoundError):
            kind = self._by_kind[key.api_group, key.kind].kind
            await self.client.record(
                kind, key.name, event_type, namespace=key.namespace, data=data, manager=COLLECTOR_MANAGER
            )

    # -- running --------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            if not self._admitted(key):
                self._moved()
                continue
            try:
                await self.process(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried with backoff, and said
                LOG.warning("garbage collector: %s: %s; retrying", key, exc)
                self.queue.add_rate_limited(key)
                self.queue.done(key)
            else:
                self.queue.done(key, forget=True)
            self._moved()

    async def run(self) -> None:
        """Run every kind's informer and the workers until cancelled."""
        loop = asyncio.get_running_loop()
        watching = [loop.create_task(i.run(), name=f"collector-{i.kind.kind}") for i in self.informers]
        workers: list[asyncio.Task[None]] = []
        try:
            await asyncio.gather(*(i.synced.wait() for i in self.informers))
            self._moved()
            workers = [loop.create_task(self._worker(), name=f"collector-{n}") for n in range(self.workers)]
            await asyncio.gather(*workers, *watching)
        finally:
            for task in (*watching, *workers):
                task.cancel()
            for task in (*watching, *workers):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def wait_idle(self) -> None:
        """Wait until every informer has its first list and the queue is empty."""
        await asyncio.gather(*(i.synced.wait() for i in self.informers))
        await self.queue.wait_idle()

    def shut_down(self) -> None:
        """Stop taking keys."""
        self.queue.shut_down()
