"""The informer: list, then watch from the list's revision, into an indexed cache.

Controllers read objects from here, never from the store, and write through the Client.
The informer turns the log into "this key changed" notifications for its handlers (the
controller's work queue), keeps indexes by label and by owner, and knows the revision it
has caught up to, so a controller can wait until its own write is visible
(read-your-writes).

Failure is never silent: a watch that breaks is logged, counted and restarted with
backoff; a watch from a compacted revision (:class:`~reconcile.ExpiredError`) relists at
once, and the relist tells the handlers about every difference it finds.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Literal

import attrs

from reconcile.api.client import Client
from reconcile.controller.clocks import Clock, LoopClock
from reconcile.errors import CorruptError, ExpiredError
from reconcile.model.events import Bookmark, EventType
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.model.selectors import LabelSelector
from reconcile.store.contract import RawEvent

__all__ = ["Informer", "InformerEvent", "InformerStatistics"]

LOG = logging.getLogger("reconcile.informer")
#: Cache updates, at the least, between two calls of the growth hook after the list (and
#: a tenth of the cache, when that is more).
_GROWTH_EVERY = 4096

Change = Literal["added", "modified", "deleted"]


@attrs.frozen
class InformerEvent:
    """What a handler hears: which key changed, how, and the object before and after."""

    type: Change
    key: ObjectKey
    old: AnyResource | None
    new: AnyResource | None
    #: Who made the change (the field manager), or None when a relist found it.
    actor: str | None = None


@attrs.frozen
class InformerStatistics:
    """A snapshot of the informer."""

    objects: int
    revision: int
    lists: int
    watch_failures: int


Handler = Callable[[InformerEvent], None]
#: Called with the informer at the end of each list (its first and every relist) and
#: whenever a tenth of its cache (at least :data:`_GROWTH_EVERY` objects) was put in since
#: the last call: when a process-wide policy may act on a cache that grew (the Runtime's
#: collector tuning, :mod:`reconcile.runtime.collecting`).
GrowthHook = Callable[["Informer"], None]
#: What each list's reading and decoding run inside (its first and every relist): a context manager
#: made per list, for a process-wide policy over a burst of allocations (the Runtime's
#: collector tuning, :func:`reconcile.runtime.collecting.collecting_less`).
ListingHook = Callable[[], contextlib.AbstractContextManager[object]]


class Informer:
    """A list+watch cache of one kind, with indexes by label and by owner."""

    def __init__(
        self,
        client: Client,
        kind: Kind,
        *,
        namespace: str | None = None,
        clock: Clock | None = None,
        max_backoff: float = 30.0,
        on_growth: GrowthHook | None = None,
        listing: ListingHook | None = None,
    ) -> None:
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self._clock = clock or LoopClock()
        self._max_backoff = max_backoff
        self._objects: dict[ObjectKey, AnyResource] = {}
        self._by_label: dict[tuple[str, str], set[ObjectKey]] = {}
        self._by_owner: dict[str, set[ObjectKey]] = {}
        self._handlers: list[Handler] = []
        self._error_handlers: list[Callable[[BaseException], None]] = []
        self.revision = 0
        self._moved = asyncio.Event()
        #: Readers in wait_for_revision: only then does a new revision swap and set the
        #: event (three watch events per created object would make three events each).
        self._revision_waiters = 0
        self.synced = asyncio.Event()
        self._lists = 0
        self._failures = 0
        #: True from a list or watch failure until the next list succeeds.
        self.failing = False
        #: The CorruptError that broke the last list or watch, until a list succeeds:
        #: retrying will not help, so a one-shot caller may give up at once.
        self.corrupt: CorruptError | None = None
        self._reported: str | None = None
        self._on_growth = on_growth
        self._listing = listing
        self._runner: asyncio.Task[None] | None = None
        self._users = 0
        self._puts_since_growth = 0
        #: key -> (revision, actor) of an object put by written(), whose watch event is
        #: not due yet
        self._remembered: dict[ObjectKey, tuple[int, str | None]] = {}
        #: key -> the revisions the handlers heard of while the key had a remembered
        #: write: the watch delivering one of them later is not news (a user's apply,
        #: remembered, then overtaken by the engine's own write before its event came).
        self._heard: dict[ObjectKey, set[int]] = {}

    # -- wiring --------------------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler`` for every change (synchronously: it should only enqueue)."""
        self._handlers.append(handler)

    def add_error_handler(self, handler: Callable[[BaseException], None]) -> None:
        """Call ``handler`` with every watch failure (besides logging it)."""
        self._error_handlers.append(handler)

    # -- reading -------------------------------------------------------------------------

    def get(self, key: ObjectKey) -> AnyResource | None:
        """The cached object, or None."""
        return self._objects.get(key)

    def cached_keys(self) -> builtins.list[ObjectKey]:
        """Every cached key."""
        return list(self._objects)

    def list(self, label_selector: str | LabelSelector | None = None) -> list[AnyResource]:
        """Cached objects matching a label selector (equality clauses use the index)."""
        selector = LabelSelector.parse(label_selector)
        if not selector.requirements:
            return builtins.list(self._objects.values())
        candidates: Iterable[ObjectKey] = self._objects
        for requirement in selector.requirements:
            if requirement.operator == "=":
                value = next(iter(requirement.values))
                candidates = self._by_label.get((requirement.key, value), set())
                break
        found = (self._objects[k] for k in candidates)
        return [o for o in found if selector.matches(o.metadata.labels)]

    def owned_by(self, uid: str) -> builtins.list[AnyResource]:
        """Cached objects with an owner reference to ``uid``."""
        return [self._objects[k] for k in self._by_owner.get(uid, ())]

    def owned_keys(self, uid: str) -> builtins.list[ObjectKey]:
        """The keys of the cached objects with an owner reference to ``uid`` (a copy)."""
        return builtins.list(self._by_owner.get(uid, ()))

    def written(self, obj: AnyResource, actor: str | None = None) -> None:
        """Cache an object this process has just written (the result of its write), as
        client-go's mutation cache does. Called by the layer's cache
        (:class:`~reconcile.controller.caching.Cache`) after each write through its
        client, nowhere else: readers see the object at once, handlers hear of it now
        (with ``actor``), and when its watch event comes it is recognized by its revision
        and dropped with its body unparsed (as are older events of the key that arrive
        meanwhile: the cached object is newer than they are).

        Only the exact object a write returned belongs here. A version older than the
        one cached is ignored, as the watch would ignore it; the cache's revision (what
        :meth:`wait_for_revision` waits on) still moves only with the watch."""
        key = obj.key
        revision = obj.metadata.resource_version
        if (
            revision is None
            or key.kind != self.kind.kind
            or key.api_group != self.kind.api_group
            or (self.namespace is not None and key.namespace != self.namespace)
        ):
            return
        if revision <= self.revision or self.holds(key, revision):
            return  # the watch delivered it, or something newer, already
        # Its event is still to come; anything the watch delivers before it is older.
        self._remembered[key] = (revision, actor)
        self._put(key, obj, actor)

    def holds(self, key: ObjectKey, revision: int) -> bool:
        """Whether the cache holds ``key`` at ``revision`` or newer (a remembered write is
        there before the watch brings it)."""
        cached = self._objects.get(key)
        return cached is not None and (cached.metadata.resource_version or 0) >= revision

    async def wait_for_revision(self, revision: int) -> None:
        """Wait until the cache has caught up to ``revision`` (bound it with
        ``asyncio.timeout``)."""
        self._revision_waiters += 1
        try:
            while self.revision < revision:
                await self._moved.wait()
        finally:
            self._revision_waiters -= 1

    def statistics(self) -> InformerStatistics:
        """Objects cached, revision reached, lists made, watch failures seen."""
        return InformerStatistics(len(self._objects), self.revision, self._lists, self._failures)

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled or the store closes; restart a broken watch.

        Several controllers of one kind share its informer: each runs it, it lists and
        watches once, and it stops when the last of them stops."""
        runner = self._runner
        if runner is None or runner.done():
            runner = asyncio.get_running_loop().create_task(self._run(), name=f"{self.kind.kind}-informer")
            self._runner = runner
        self._users += 1
        try:
            await asyncio.shield(runner)
        finally:
            self._users -= 1
            if not self._users and not runner.done():
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                await self._list()
                self.failing, self.corrupt, self._reported = False, None, None
                backoff = 0.1
                async for item in self.client.engine.raw_watch(
                    self.kind, namespace=self.namespace, since=self.revision
                ):
                    if isinstance(item, Bookmark):
                        self._advance(item.revision)
                    else:
                        self._apply(item)
            except ExpiredError as exc:
                LOG.info("%s informer: %s; relisting", self.kind.kind, exc)
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported once, and retried with backoff
                self._failures += 1
                self.failing = True
                self._report(exc, backoff)
                for handler in self._error_handlers:
                    with contextlib.suppress(Exception):
                        handler(exc)
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
                continue
            LOG.warning("%s informer: the store closed; informer stopped", self.kind.kind)
            return

    def _report(self, exc: Exception, backoff: float) -> None:
        """Say what broke the watch once per streak of the same failure (a corrupt body
        once per revision, naming it), not at every retry; the traceback only at DEBUG."""
        if isinstance(exc, CorruptError):
            self.corrupt = exc
        message = str(exc) or type(exc).__name__
        if message != self._reported:
            self._reported = message
            LOG.error("%s informer: %s; retrying with backoff", self.kind.kind, message)
        LOG.debug("%s informer: watch failed; restarting in %.1fs", self.kind.kind, backoff, exc_info=exc)

    async def _list(self) -> None:
        # Reading a list (every body parsed) and decoding it are a burst of allocations
        # that all live on (the cache): with the collector's default thresholds, a first
        # list of 10,000 Files spent a tenth of a fresh runner's no-change pass in
        # collections that found nothing, and the read alone of 100,000 Buckets from
        # PostgreSQL took 1.4 s of CPU instead of 0.5 s.
        with contextlib.nullcontext() if self._listing is None else self._listing():
            page = await self.client.engine.raw_list(self.kind, namespace=self.namespace)
            self._lists += 1
            self._remembered.clear()  # the list supersedes every remembered write
            self._heard.clear()
            listed = {item.key: item for item in page.items}
            # What the cache holds at the listed revision or newer (its own writes, put in
            # as they landed: a bulk apply racing the first list) is kept, neither decoded
            # again nor deleted; the watch from the list's revision brings what is newer.
            after = page.revision + 1
            for key in [k for k in self._objects if k not in listed and not self.holds(k, after)]:
                self._delete(key)
            for key, item in listed.items():
                if not self.holds(key, item.resource_version):
                    self._put(key, self.client.decoder.cached(item.body))
        self._advance(page.revision)
        self.synced.set()
        if self._on_growth is not None:
            self._puts_since_growth = 0
            self._on_growth(self)

    def _grown(self, on_growth: GrowthHook) -> None:
        """One more object put in after the list: the growth hook is called when a tenth
        of the cache (at least :data:`_GROWTH_EVERY` objects) is new since its last call."""
        self._puts_since_growth += 1
        if self._puts_since_growth >= max(_GROWTH_EVERY, len(self._objects) // 10):
            self._puts_since_growth = 0
            on_growth(self)

    def _apply(self, event: RawEvent) -> None:
        key, revision = event.key, event.revision
        if event.type == EventType.DELETED:
            if not self.holds(key, revision):
                self._delete(key, event.actor)
            else:  # a written, newer object
                self._superseded(key, self._objects[key], event.actor, revision)
        elif event.has_body:
            if self.holds(key, revision):
                # The cache holds this revision or a newer one (our own write, put in at
                # once): the body is never parsed, let alone decoded.
                self._superseded(key, self._objects[key], event.actor, revision)
            else:
                cached = self.client.decoder.cached(event.body or {}, self._objects.get(key))
                self._put(key, cached, event.actor)
        remembered = self._remembered.get(key)
        if remembered is not None and revision >= remembered[0]:
            del self._remembered[key]  # the watch has caught up with our write
            self._heard.pop(key, None)
        self._advance(revision)

    def _put(self, key: ObjectKey, obj: AnyResource, actor: str | None = None) -> None:
        old = self._objects.get(key)
        if old is not None:
            new_version = obj.metadata.resource_version or 0
            if new_version <= (old.metadata.resource_version or 0) and (
                old.metadata.uid == obj.metadata.uid or key in self._remembered
            ):
                # A replay of what the cache holds, or older than a remembered write of
                # ours (even of an earlier incarnation: the cache never goes back).
                self._superseded(key, old, actor, new_version)
                return
            self._unindex(key, old)
        self._objects[key] = obj
        self._index(key, obj)
        if self._on_growth is not None and self.synced.is_set():  # a list calls it once, at its end
            self._grown(self._on_growth)
        if key in self._remembered:
            self._heard.setdefault(key, set()).add(obj.metadata.resource_version or 0)
        self._notify(InformerEvent("added" if old is None else "modified", key, old, obj, actor))

    def _superseded(self, key: ObjectKey, cached: AnyResource, actor: str | None, revision: int) -> None:
        # A change the watch delivers after a remembered write of ours that contains it
        # (somebody wrote between our read and our write): the handlers heard of the
        # newer object as ours, so they hear now who else changed it, or a controller
        # that ignores its own writes would miss this one. Earlier writes by the same
        # actor as the remembered one are its own: nothing new to tell.
        remembered = self._remembered.get(key)
        if actor is None or remembered is None or revision >= remembered[0] or actor == remembered[1]:
            return
        if revision in self._heard.get(key, ()):
            return  # the handlers heard of this very revision when it was remembered
        self._notify(InformerEvent("modified", key, cached, cached, actor))

    def _delete(self, key: ObjectKey, actor: str | None = None) -> None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
            self._notify(InformerEvent("deleted", key, old, None, actor))

    def _index(self, key: ObjectKey, obj: AnyResource) -> None:
        for pair in obj.metadata.labels.items():
            self._by_label.setdefault(pair, set()).add(key)
        for owner in obj.metadata.owner_references:
            self._by_owner.setdefault(owner.uid, set()).add(key)

    def _unindex(self, key: ObjectKey, obj: AnyResource) -> None:
        for pair in obj.metadata.labels.items():
            keys = self._by_label.get(pair)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_label[pair]
        for owner in obj.metadata.owner_references:
            owned = self._by_owner.get(owner.uid)
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self._by_owner[owner.uid]

    def _advance(self, revision: int) -> None:
        if revision > self.revision:
            self.revision = revision
            if self._revision_waiters:
                moved, self._moved = self._moved, asyncio.Event()
                moved.set()

    def _notify(self, event: InformerEvent) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:
                LOG.exception("%s informer: a handler failed on %s", self.kind.kind, event.key)
