"""The store contract every backend implements (SQLite now, PostgreSQL later).

The store knows objects only as JSON bodies keyed by :class:`ObjectKey`; what a change
*means* (a new generation, a finalizer removed) is decided by a **mutation**: a pure,
synchronous function from the current object (or None) to a change. The backend runs
mutations inside its write transaction, in the order writes were submitted, so checks
such as "the resource_version still matches" are atomic with the write without any lock
held across an ``await``, and many concurrent writers share one transaction and one
fsync (group commit). A mutation must not block, must not mutate its argument and must
be deterministic: a backend may run it again if a transaction is retried.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import attrs

from reconcile.model.events import Bookmark
from reconcile.model.meta import ObjectKey
from reconcile.store.encoding import dumps, load_body
from reconcile.store.fencing import Fence, Leases, ShardTable
from reconcile.store.records import ObjectRecord, StoreHeader, VerifyReport

__all__ = [
    "ADMISSION_HEADROOM",
    "MAX_OBJECT_BYTES",
    "Change",
    "Claim",
    "EventStore",
    "Import",
    "ListPage",
    "Mutation",
    "Note",
    "ObjectRecord",
    "Put",
    "RawEvent",
    "Remove",
    "Snapshot",
    "StoreHeader",
    "StoreLocation",
    "StoredObject",
    "VerifyReport",
    "WriteResult",
]

#: The largest serialized object the store accepts (etcd's default request limit).
MAX_OBJECT_BYTES = 1536 * 1024
#: Of MAX_OBJECT_BYTES, what admission keeps free for what the engine adds later
#: (status, finalizers, annotations, managed fields), so an admitted object can always
#: converge and be deleted.
ADMISSION_HEADROOM = 64 * 1024

Body = dict[str, Any]


@attrs.frozen
class StoredObject:
    """An object as stored: its key, uid, revision and JSON body."""

    key: ObjectKey
    uid: str
    resource_version: int
    body: Body


@attrs.frozen
class Put:
    """Create or replace the object with ``body``, recording ``event_type``."""

    event_type: str
    body: Body
    data: Mapping[str, Any] | None = None
    #: The external resource the object declares (``Kind.identity_of``): the write is
    #: refused (InvalidError) when another live object of the kind declares it. None:
    #: unchanged (a status write), or the kind declares none.
    identity: str | None = None


@attrs.frozen
class Remove:
    """Remove the object; ``body`` is its last state, kept in the log."""

    body: Body
    event_type: str = "Deleted"
    data: Mapping[str, Any] | None = None


@attrs.frozen
class Note:
    """Record an event about the object without changing it (a controller action)."""

    event_type: str
    data: Mapping[str, Any] | None = None


Change = Put | Remove | Note
#: A mutation returns one change, several (appended in order, as one atomic write, each
#: with its own revision), or None for "nothing to do".
Mutation = Callable[[StoredObject | None], Change | Sequence[Change] | None]


@attrs.frozen
class WriteResult:
    """What a write did: the revision of its event (or of the unchanged object) and
    the object after it (None when absent)."""

    revision: int
    object: StoredObject | None
    written: bool


class RawEvent:
    """An event as stored: its revision, time, type, key, uid and actor (the field
    manager that wrote it), the user who asked for it (None unless the writer said), the
    snapshot body after it (None for a note) and its data.

    The body and the data are parsed from their stored JSON text on first access, not
    before: a watcher that already holds the object at this revision (its own write, put
    in its cache) drops the event having parsed nothing. :attr:`has_body` says whether
    there is a body without parsing it."""

    __slots__ = (
        "_body",
        "_data",
        "_data_text",
        "_text",
        "actor",
        "key",
        "revision",
        "time",
        "type",
        "uid",
        "user",
    )

    def __init__(  # noqa: PLR0917 - the columns of a stored event, in their order
        self,
        revision: int,
        time: float,
        type: str,  # noqa: A002 - the event's type, as the store calls it
        key: ObjectKey,
        uid: str,
        actor: str,
        *,
        text: str | bytes | None = None,
        data_text: str | bytes | None = None,
        body: Body | None = None,
        data: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> None:
        self.user = user
        self.revision, self.time, self.type, self.key, self.uid, self.actor = (
            revision,
            time,
            type,
            key,
            uid,
            actor,
        )
        self._text: str | bytes | None = None if body is not None else text
        self._body: Body | None = body
        self._data_text: str | bytes | None = None if data is not None else data_text
        self._data: Mapping[str, Any] | None = data

    @property
    def has_body(self) -> bool:
        """Whether the event carries a snapshot (False for a note), without parsing it."""
        return self._body is not None or self._text is not None

    @property
    def body(self) -> Body | None:
        """The snapshot after the event, parsed now if it was not yet (CorruptError when
        the stored text is not JSON)."""
        if self._body is None and self._text is not None:
            self._body, self._text = load_body(self._text, self.revision, self.key), None
        return self._body

    @property
    def body_text(self) -> str | None:
        """The snapshot as its stored JSON text (None for a note), without parsing it:
        what a copy of the store writes, byte for byte."""
        if self._text is not None:
            return self._text.decode() if isinstance(self._text, bytes) else self._text
        return None if self._body is None else dumps(self._body)

    @property
    def data_text(self) -> str | None:
        """The data as its stored JSON text (None when there is none), without parsing it."""
        if self._data_text is not None:
            return self._data_text.decode() if isinstance(self._data_text, bytes) else self._data_text
        return None if self._data is None else dumps(self._data)

    @property
    def data(self) -> Mapping[str, Any] | None:
        """The event's data (an action's message and generation), parsed on first access."""
        if self._data is None and self._data_text is not None:
            self._data, self._data_text = load_body(self._data_text, self.revision, self.key), None
        return self._data

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.revision,
            self.time,
            self.type,
            self.key,
            self.uid,
            self.actor,
            self.user,
            self.body,
            self.data,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawEvent) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"RawEvent(revision={self.revision}, type={self.type!r}, key={self.key!r}, actor={self.actor!r})"
        )


@attrs.frozen
class ListPage:
    """One page of a list: the items, the revision they reflect, and where to go on."""

    items: tuple[StoredObject, ...]
    revision: int
    next_after: tuple[str, str] | None


class Snapshot(Protocol):
    """A whole store as of one instant, read for copying it (:meth:`EventStore.snapshot`):
    what commits after that instant is not in it. Rows stream in batches, so a store
    larger than memory can be copied."""

    @property
    def header(self) -> StoreHeader:
        """The head, horizon, identity, secret, settings and counts of the snapshot."""

    def objects(self, batch: int = 1000) -> AsyncIterator[Sequence[ObjectRecord]]:
        """Every projection row, tombstones included, in key order (api_group, kind,
        namespace, name, compared by code point), ``batch`` at a time."""

    def events(self, batch: int = 1000) -> AsyncIterator[Sequence[RawEvent]]:
        """Every retained event in revision order, ``batch`` at a time (bodies unparsed:
        :attr:`RawEvent.body_text`)."""


class Import(Protocol):
    """A copy being written into an empty store, in one transaction
    (:meth:`EventStore.importing`)."""

    async def objects(self, batch: Sequence[ObjectRecord]) -> None:
        """Add projection rows (every one before the events that name its key)."""

    async def events(self, batch: Sequence[RawEvent]) -> None:
        """Append events as they are, revision, time, actor, user and texts kept; each
        names a key whose projection row was added (StoreError otherwise)."""


class Claim(Protocol):
    """An exclusive claim on a store, held until released or until the process ends."""

    def release(self) -> None:
        """Give the claim up (idempotent)."""

    @property
    def lost(self) -> str | None:
        """Who holds the claim now, if this process lost it without releasing it (a
        connection lost and another process took it meanwhile); None while it is held.
        A claim that cannot be lost (SQLite's lock file) is never lost."""

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(holder)`` once the claim is found lost (see :attr:`lost`)."""

    async def fence(self) -> Fence | None:
        """Fence the writes made under this claim: the fence they carry (set as
        :data:`~reconcile.store.fencing.FENCE`), refused by the store once another process
        took the claim after this one. None where the claim cannot be lost (SQLite): its
        writes need no fence."""


class StoreLocation(Protocol):
    """A store as its URL names it, not opened: what a program asks of a store it does not
    hold open, answered at once, synchronously, and without creating or writing anything.
    The command line uses it where opening a store would cost too much or do too much:
    ``reconcile version`` (the schema versions, without an event loop), shell completion
    (live names on each TAB), and the commands that must not create a database that does
    not exist. A backend provides one for its URLs (:func:`reconcile.store.locate_store`);
    errors are StoreError."""

    @property
    def url(self) -> str:
        """The URL (or path) as given, which :func:`reconcile.store.open_store` opens."""

    @property
    def where(self) -> str:
        """Where the store lives, as messages name it: a file's path as given, a server's
        URL without credentials."""

    @property
    def schema_version(self) -> int:
        """The schema version this reconcile writes (and migrates older stores to)."""

    def exists(self) -> bool:
        """Whether there is a store here: a command that only reads refuses to create one."""

    def stored_schema(self) -> int:
        """The schema version the existing store holds, read without writing (it may be
        newer than :attr:`schema_version`); StoreError when it cannot be read (not a
        reconcile store)."""

    def size(self) -> int:
        """The bytes the store takes where it lives (0 when it does not exist)."""

    def live_names(
        self, api_group: str, kind: str, namespace: str, *, prefix: str = "", limit: int = 200
    ) -> builtins.list[str]:
        """The names of the live objects of a kind in a namespace that start with
        ``prefix``, in order, at most ``limit``, read without writing (for completion:
        no bodies are read); StoreError when the store cannot be read."""


class EventStore(Protocol):
    """An append-only event log with a projection of current objects, and a watch."""

    @property
    def url(self) -> str:
        """Where the store lives (no credentials)."""

    async def close(self) -> None:
        """Finish pending writes, end watches and release the database."""

    async def write(
        self, key: ObjectKey, mutation: Mutation, *, actor: str, user: str | None = None
    ) -> WriteResult:
        """Run ``mutation`` on the current object inside a write transaction, and commit.
        Its events record ``actor`` (the field manager: a controller's name, the CLI's
        ``--field-manager``) and ``user``, who asked for it, when the writer knows (the
        CLI's ``--as``); both come back on :class:`RawEvent`."""

    def submit_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> list[asyncio.Future[WriteResult]]:
        """Queue many writes at once for the next group commits (in order, so of two
        writes of one key the later wins): one future per write, done once that write is
        durable, with its WriteResult or the exception it raised (one write's refusal
        does not affect the others). Callbacks added to a future run before the write's
        watch events are delivered."""

    async def write_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> builtins.list[WriteResult]:
        """Run every write's mutation in order (of two writes of one key, the second sees
        the first) and commit them in one transaction: all are stored or none is. One
        WriteResult per write, once all are durable; the first mutation that raises
        rolls every write back and its exception is raised. A crash or a kill at any
        point leaves none or all of them."""

    async def read(self, key: ObjectKey) -> StoredObject | None:
        """The current object, or None."""

    async def list(
        self,
        api_group: str,
        kind: str,
        *,
        namespace: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
        predicate: Callable[[StoredObject], bool] | None = None,
    ) -> ListPage:
        """Objects of one kind in (namespace, name) order, after a key, up to a limit.
        A page reads about as many rows as it holds, not every row after the key: one
        that ``predicate`` picks from may come back short, even empty, with a key to go
        on from (as a Kubernetes list may); a caller goes on while there is a key."""

    async def revision(self) -> int:
        """The revision of the latest committed event."""

    async def horizon(self) -> int:
        """The compaction horizon: events before it may be gone."""

    async def identity(self) -> str:
        """The store's identity, made once with it (providers mark what they create with
        it, so that stores sharing an external system can tell their resources apart)."""

    async def mark_key(self) -> bytes:
        """The store's secret, made once with it and kept only in it (never in the log):
        what providers sign their ownership marks with, so that a mark somebody else
        wrote, knowing the identity, is not this store's."""

    async def uids_with_event(self, uids: Sequence[str], event_type: str) -> set[str]:
        """Those of ``uids`` with an event of ``event_type`` in the retained log."""

    async def remembered(self) -> dict[str, Any]:
        """Every setting :meth:`remember` keeps, by name (empty when none)."""

    async def remember(self, name: str, value: Any) -> None:
        """Keep ``value`` (anything JSON holds; None forgets the name) under ``name`` for
        the store's life, beside the log, not in it: compaction keeps it, a copy of the
        store has it. For what a program wants the next one on this store to find (the
        command line: each provider's config, as applied). StoreError when opened
        read-only."""

    async def events(self, key: ObjectKey) -> builtins.list[RawEvent]:
        """Every retained event of one object key, oldest first."""

    def watch(
        self,
        *,
        since: int = 0,
        api_group: str | None = None,
        kind: str | None = None,
        namespace: str | None = None,
    ) -> AsyncIterator[RawEvent | Bookmark]:
        """Events with revision > ``since`` in order, then live; a bookmark whenever
        caught up. Raises ExpiredError when ``since`` is before the compaction horizon.
        Bodies are parsed only when a watcher reads them (see :class:`RawEvent`)."""

    async def compact(self, before: int) -> int:
        """Drop history before ``before`` (keeping each live object's latest snapshot);
        return how many events were dropped."""

    async def kinds(self) -> Sequence[tuple[str, str, int]]:
        """Every (api_group, kind) that has live objects, with how many."""

    async def compactable(self, before: int) -> int:
        """How many events ``compact(before)`` would drop."""

    async def claimant(self, api_group: str, kind: str, identity: str) -> ObjectKey | None:
        """The live object of the kind that declares ``identity``, if any."""

    async def vacuum(self) -> None:
        """Return the space that compaction freed to the filesystem."""

    async def verify(
        self, *, deep: bool = False, check: Callable[[Any], object] | None = None
    ) -> VerifyReport:
        """Rebuild the projection from the log and report every difference, and every
        current body that cannot be decoded (with ``deep``: every event's body);
        ``check`` is called with each decoded body and raises CorruptError for one that
        does not structure."""

    def snapshot(self) -> AbstractAsyncContextManager[Snapshot]:
        """Read the whole store in one consistent snapshot, for copying it (``reconcile
        migrate``): a write committed meanwhile is wholly in it or wholly out. Works on a
        store opened read-only."""

    def importing(self, header: StoreHeader) -> AbstractAsyncContextManager[Import]:
        """Write a copy of another store into this one, which must be empty (StoreError
        naming what it holds otherwise), in one transaction: rows are added through the
        :class:`Import`; a clean exit sets the head revision, horizon, identity, mark key
        and settings of ``header`` (so revisions continue from the copied head) and
        commits; an exception rolls everything back. Other writers wait meanwhile."""

    async def claim(self, name: str) -> Claim:
        """Claim ``name`` on this store for this process alone (the Runtime claims
        ``runner``: one process reconciles a store at a time). Raises LockedError, naming
        the holder, when another process (or another claim in this one) has it. A claim
        dies with its process, however that ends, so a killed runner never blocks the
        next one."""

    # -- shard leases: several runners on one store (see reconcile.store.fencing) ----------
    # A backend that does not share its store between runners (SQLite) answers None and
    # ignores fences: its one runner owns every key.

    async def lease_shards(
        self,
        holder: str,
        *,
        about: str,
        duration: float,
        shards: int | None = None,
        release: Collection[int] = (),
    ) -> Leases | None:
        """One renewal for runner ``holder`` (``about``: its pid and host, for status):
        say it is live for ``duration`` seconds, release the shards of ``release``, renew
        the other leases it holds and, below its fair share (ceil(shards / live
        runners)), take free or expired ones up to it, in one transaction on the store's
        clock. Shards held beyond the fair share are the caller's to release (at its
        next renewal, once its work on them is done). ``shards`` is the shard count when
        this call makes the lease table (fixed from then on; None: the default, 64).
        None when the store does not share (every key is the caller's)."""

    async def release_shards(self, holder: str) -> None:
        """Give up every lease ``holder`` holds and its membership (a clean shutdown: the
        others take its shards at their next renewal, not after the lease duration)."""

    async def shard_table(self) -> ShardTable | None:
        """The lease table (every shard's holder, epoch and expiry, the live runners, the
        fenced writes refused so far), read without writing; None when the store does not
        share."""

    async def write_refusal(self) -> str | None:
        """Why the store's database takes no writes now, in words naming it (a read-only
        server: a standby, ``default_transaction_read_only``), read without writing;
        None when it takes them."""
