"""The SQLite backend: an event log and its projection in one file, WAL mode.

Two aiosqlite connections: a writer, whose thread runs each group-commit batch in one
call (:mod:`.committing`), fed by one task that queues and batches the writes
(:mod:`.writing`), and a reader for gets, lists, history and watches, which in WAL
mode never waits for the writer. Several processes may open the same file: SQLite's
write lock and busy timeout serialize their transactions, and watches learn of the other
processes' commits by polling the head revision (:mod:`reconcile.store.watching`).

Durability defaults to ``synchronous=FULL``: a write is acknowledged only after its
batch's commit reached the disk.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar

import aiosqlite

from reconcile.errors import StoreError
from reconcile.model.events import Bookmark
from reconcile.model.meta import ObjectKey
from reconcile.store import paging
from reconcile.store.contract import (
    ListPage,
    Mutation,
    RawEvent,
    StoredObject,
    StoreHeader,
    VerifyReport,
    WriteResult,
)
from reconcile.store.encoding import load_body
from reconcile.store.fencing import Leases, ShardTable
from reconcile.store.finishing import finish
from reconcile.store.following import follow, matcher
from reconcile.store.paging import Pager, key_conditions
from reconcile.store.recent import RecentEvents
from reconcile.store.sqlite import copying, schema
from reconcile.store.sqlite.claims import FileClaim, claim_file
from reconcile.store.sqlite.connections import close_connections, in_thread, open_connection, open_read_only
from reconcile.store.sqlite.maintenance import (
    compact,
    compactable,
    live_kinds,
    remember,
    remembered,
    uids_with_event,
    vacuum,
    verify,
)
from reconcile.store.sqlite.writing import Writer, store_errors
from reconcile.store.watching import Tail

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_EVENT_COLUMNS = (
    "e.revision, e.time, e.type, e.uid, e.actor, e.body, e.data, o.api_group, o.kind, o.namespace, o.name, "
    "e.user"
)
#: The same, for a file opened read-only at a schema older than ``events.user``.
_EVENT_COLUMNS_BEFORE_USER = _EVENT_COLUMNS.replace("e.user", "NULL")


def _event(row: tuple[Any, ...]) -> RawEvent:
    revision, at, type_, uid, actor, body, data, group, kind, namespace, name, user = row
    key = ObjectKey(group, kind, namespace, name)
    return RawEvent(revision, at, type_, key, uid, actor, text=body, data_text=data, user=user)


def listing(
    api_group: str, kind: str, namespace: str | None, after: tuple[str, str] | None, read: int | None
) -> tuple[str, list[Any]]:
    """The statement of a page of objects (:meth:`SQLiteStore.list`) and its values: at
    most ``read`` rows (None: all) after the key ``after``, in (namespace, name) order.
    One statement, one snapshot: the head read in the same statement is exactly the
    revision the rows reflect, so a watch from it neither skips nor repeats."""
    bounds, values = key_conditions(namespace, after, lambda: "?")
    limited = "" if read is None else " LIMIT ?"
    sql = (
        "SELECT (SELECT value FROM meta WHERE key = 'revision'), o.namespace, o.name, o.uid, "
        "o.resource_version, e.body FROM objects o JOIN events e ON e.revision = o.resource_version "
        f"WHERE o.api_group = ? AND o.kind = ? AND o.live{bounds} ORDER BY o.namespace, o.name{limited}"
    )
    return sql, [api_group, kind, *values, *(() if read is None else (read,))]


def _picked(
    conn: sqlite3.Connection,
    statement: Callable[[tuple[str, str] | None, int | None], tuple[str, list[Any]]],
    after: tuple[str, str] | None,
    pager: Pager,
) -> int | None:
    """A page a predicate picks from, on the reader's thread, in one read transaction (one
    snapshot, as one statement would be): statements of growing size until the page is
    full or the rows run out. The head they read (None: no rows)."""
    conn.execute("BEGIN")
    try:
        head, start = None, after
        while True:
            rows = conn.execute(*statement(start, pager.read)).fetchall()
            if head is None and rows:
                head = int(rows[0][0])
            start = pager.take(rows)
            if start is None:
                return head
    finally:
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            # A reader left in its transaction would pin every later read to this
            # snapshot: the watches would stop, silently.
            conn.execute("ROLLBACK")


class SQLiteStore:
    """The embedded default store. Open with :meth:`open`; close with :meth:`close`."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        busy_timeout: float = 30.0,
        cache_mib: int = 64,
        clock: Callable[[], float] = time.time,
        poll_interval: tuple[float, float] = (0.0005, 0.01),
        read_only: bool = False,
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise StoreError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, not {synchronous!r}")
        if isinstance(cache_mib, bool) or not isinstance(cache_mib, int) or cache_mib < 1:
            raise StoreError(f"cache_mib must be a whole number of MiB, at least 1, not {cache_mib!r}")
        #: SQLite's page cache per connection (its default is 2 MiB): past some tens of
        #: thousands of objects, a small cache sends every batch's lookups to the OS.
        self.cache_mib = cache_mib
        self.path = Path(path)
        self.synchronous = synchronous.upper()
        #: Opened for reading only (``get``, ``history``, ``verify``): a database the
        #: process may not write (a read-only file, folder or mount) can still be read;
        #: every write raises StoreError.
        self.read_only = read_only
        self._busy_timeout = busy_timeout
        self._clock = clock
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._tail = Tail(self.revision, fast=poll_interval[0], slow=poll_interval[1])
        self._recent = RecentEvents()
        self._writes = Writer(self.path, clock, self._tail, self._recent, busy_timeout)
        self._close_task: asyncio.Task[None] | None = None
        self._event_columns = _EVENT_COLUMNS

    @property
    def url(self) -> str:
        """``sqlite:///`` and the absolute path."""
        return f"sqlite:///{self.path.resolve()}"

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    async def open(self) -> Self:
        """Check the file, create or migrate the schema, and start the writer."""
        schema.check_file(self.path)
        if self.read_only:
            return await self._open_read_only()
        try:
            self._writer = await open_connection(self.path, self._busy_timeout, shared=True)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open ({exc})") from exc
        try:
            await in_thread(self._writer, schema.prepare, str(self.path), self.synchronous)
            self._reader = await open_connection(self.path, self._busy_timeout)
            await self._reader.execute("PRAGMA query_only = ON")
            for conn in (self._writer, self._reader):
                await conn.execute(f"PRAGMA cache_size = -{self.cache_mib * 1024}")
            self._tail.head = await self.revision()
        except sqlite3.Error as exc:
            await self._close_connections()
            raise StoreError(f"{self.path}: {exc}") from exc
        except BaseException:
            await self._close_connections()
            raise
        self._writes.start(self._writer)
        return self

    async def _open_read_only(self) -> Self:
        try:
            self._reader = await open_read_only(self.path, self._busy_timeout)
            await in_thread(self._reader, schema.check_current, str(self.path))
            if not await in_thread(self._reader, schema.has_event_user):
                self._event_columns = _EVENT_COLUMNS_BEFORE_USER
            await self._reader.execute(f"PRAGMA cache_size = -{self.cache_mib * 1024}")
            self._tail.head = await self.revision()
        except sqlite3.Error as exc:
            await self._close_connections()
            raise StoreError(f"{self.path}: cannot open for reading ({exc})") from exc
        except BaseException:
            await self._close_connections()
            raise
        return self

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit what is queued, end every watch, and close the connections: once, to
        the end even if the caller is cancelled (a second call waits for the first)."""
        if self._close_task is None:
            self._writes.shut()
            self._close_task = asyncio.get_running_loop().create_task(
                self._close(), name=f"close {self.path}"
            )
        await finish(self._close_task)

    async def _close(self) -> None:
        # Cancelled anywhere (asyncio.run cancels what is left at its end), the connections
        # are still closed: their threads would keep the process from exiting.
        try:
            # A writer that died already failed every waiting write; closing still closes.
            await self._writes.stop()
            await self._tail.close()
        finally:
            await self._close_connections()

    async def _close_connections(self) -> None:
        reader, writer = self._reader, self._writer
        self._reader = self._writer = None
        await close_connections(reader, writer)

    # -- writing -----------------------------------------------------------------------

    async def write(
        self, key: ObjectKey, mutation: Mutation, *, actor: str, user: str | None = None
    ) -> WriteResult:
        """Queue a write for the next group commit and wait until it is durable."""
        self._check_writable()
        return await self._writes.submit(key, mutation, actor, user)

    def submit_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> list[asyncio.Future[WriteResult]]:
        """Queue every write at once for the next group commits (no task per write); one
        future per write, resolved when the commit holding it ends, before the tail
        wakes the watches."""
        self._check_writable()
        return self._writes.submit_many(writes, actor, user)

    async def write_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> builtins.list[WriteResult]:
        """Commit every write in one transaction of its own, all or nothing: the first
        mutation that raises rolls them all back and its exception is raised. It holds
        the database's write lock for the whole batch (other writers, other processes',
        wait for it), so it is for batches a user asked to be atomic (``apply --atomic``)."""
        self._check_writable()
        if not writes:
            return []
        return await self._writes.submit_group(writes, actor, user)

    @property
    def _writer_task(self) -> asyncio.Task[None] | None:
        return self._writes.task

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        self._writes.check()

    def _store_errors(self) -> contextlib.AbstractContextManager[None]:
        return store_errors(self.path)

    # -- reading -----------------------------------------------------------------------

    async def _fetch(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
        if self._reader is None:
            raise StoreError(f"{self.path}: store is closed")
        return list(await self._guarded(self._reader.execute_fetchall(sql, params)))

    async def revision(self) -> int:
        """The revision of the latest committed event."""
        rows = await self._fetch("SELECT value FROM meta WHERE key = 'revision'")
        return int(rows[0][0])

    async def horizon(self) -> int:
        """The compaction horizon: history before it is gone."""
        rows = await self._fetch("SELECT value FROM meta WHERE key = 'horizon'")
        return int(rows[0][0])

    async def identity(self) -> str:
        """The store's identity: 16 hexadecimal digits, made once with the database
        (empty for a store of an older schema opened read-only, which has none yet)."""
        rows = await self._fetch("SELECT value FROM meta WHERE key = 'identity'")
        return f"{int(rows[0][0]):016x}" if rows else ""

    async def mark_key(self) -> bytes:
        """The store's secret: 32 random bytes, made once with the database (empty for a
        store of an older schema opened read-only, which has none yet)."""
        rows = await self._fetch("SELECT value FROM meta WHERE key = 'mark_key'")
        return bytes(rows[0][0]) if rows else b""

    async def uids_with_event(self, uids: Sequence[str], event_type: str) -> set[str]:
        """Those of ``uids`` with an event of ``event_type`` in the retained log (a scan
        of the log: for maintenance commands, not for a reconcile)."""
        assert self._reader is not None
        return await self._guarded(in_thread(self._reader, uids_with_event, uids, event_type))

    async def remembered(self) -> dict[str, Any]:
        """Every remembered setting, by name (``meta`` rows of their own)."""
        assert self._reader is not None
        return await self._guarded(in_thread(self._reader, remembered))

    async def remember(self, name: str, value: Any) -> None:
        """Keep ``value`` under ``name`` (None: forget it); one statement on the writer's
        connection, between two group commits."""
        if self._writer is None:
            raise StoreError(f"{self.path}: opened read-only")
        self._writes.check()
        await self._guarded(self._writes.call(remember, name, value))

    async def read(self, key: ObjectKey) -> StoredObject | None:
        """The current object, or None."""
        rows = await self._fetch(
            "SELECT o.uid, o.resource_version, e.body FROM objects o JOIN events e "
            "ON e.revision = o.resource_version WHERE o.api_group = ? AND o.kind = ? "
            "AND o.namespace = ? AND o.name = ? AND o.live",
            (key.api_group, key.kind, key.namespace, key.name),
        )
        if not rows:
            return None
        uid, revision, body = rows[0]
        return StoredObject(key, uid, revision, load_body(body, revision, key))

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
        """Objects of one kind in (namespace, name) order, after a key, up to a limit."""
        before = await self.revision()
        pager = Pager(api_group, kind, limit, predicate, budget=paging.BUDGET)
        if predicate is None or limit is None:  # one statement: the page's rows and one more
            rows = await self._fetch(*listing(api_group, kind, namespace, after, pager.read))
            pager.take(rows)
            return pager.page(rows[0][0] if rows else before)
        assert self._reader is not None
        statement = functools.partial(listing, api_group, kind, namespace)
        head = await self._guarded(in_thread(self._reader, _picked, statement, after, pager))
        return pager.page(before if head is None else head)

    async def events(self, key: ObjectKey) -> builtins.list[RawEvent]:
        """Every retained event of one object key, oldest first."""
        rows = await self._fetch(
            f"SELECT {self._event_columns} FROM objects o JOIN events e ON e.object_id = o.id "
            "WHERE o.api_group = ? AND o.kind = ? AND o.namespace = ? AND o.name = ? "
            "ORDER BY e.revision",
            (key.api_group, key.kind, key.namespace, key.name),
        )
        return [_event(row) for row in rows]

    # -- watching ----------------------------------------------------------------------

    def watch(
        self,
        *,
        since: int = 0,
        api_group: str | None = None,
        kind: str | None = None,
        namespace: str | None = None,
    ) -> AsyncIterator[RawEvent | Bookmark]:
        """Events with revision > ``since`` in order, then live; a bookmark whenever
        caught up. Ends when the store closes. Bodies are parsed when read."""
        where, params = "", []
        for column, value in (("o.api_group", api_group), ("o.kind", kind), ("o.namespace", namespace)):
            if value is not None:
                where += f" AND {column} = ?"
                params.append(value)
        query = (
            f"SELECT {self._event_columns} FROM events e JOIN objects o ON o.id = e.object_id "
            f"WHERE e.revision > ? AND e.revision <= ?{where} ORDER BY e.revision LIMIT ?"
        )

        def fetch(cursor: int, head: int, limit: int) -> Awaitable[Sequence[Any]]:
            return self._fetch(query, [cursor, head, *params, limit])

        return follow(
            since=since,
            matches=matcher(api_group, kind, namespace),
            tail=self._tail,
            recent=self._recent,
            revision=self.revision,
            horizon=self.horizon,
            fetch=fetch,
            event=_event,
        )

    # -- copying -----------------------------------------------------------------------

    def snapshot(self) -> contextlib.AbstractAsyncContextManager[copying.SQLiteSnapshot]:
        """The whole store as one read transaction sees it, on a connection of its own."""
        if self._reader is None:
            raise StoreError(f"{self.path}: store is closed")
        return copying.snapshot(self.path, self._busy_timeout)

    @contextlib.asynccontextmanager
    async def importing(self, header: StoreHeader) -> AsyncIterator[copying.SQLiteImport]:
        """Write a copy into this empty store in one transaction (see :mod:`.copying`)."""
        if self._writer is None:
            raise StoreError(f"{self.path}: opened read-only")
        self._writes.check()
        async with copying.importing(self.path, self._busy_timeout, header) as target:
            yield target
        self._tail.head = await self.revision()

    async def claim(self, name: str) -> FileClaim:
        """An exclusive claim on this database (a ``flock`` on ``<database>.<name>.lock``);
        LockedError naming the holder when it is taken."""
        return claim_file(self.path, name)

    # -- maintenance -------------------------------------------------------------------

    async def compact(self, before: int) -> int:
        """Drop events before ``before`` except each live object's latest snapshot."""
        if self._writer is None:
            raise StoreError(f"{self.path}: opened read-only")
        return await self._guarded(self._writes.call(compact, before))

    async def claimant(self, api_group: str, kind: str, identity: str) -> ObjectKey | None:
        """The live object of the kind that declares ``identity``, if any."""
        rows = await self._fetch(
            "SELECT namespace, name FROM objects WHERE api_group = ? AND kind = ? AND identity = ? AND live "
            "LIMIT 1",
            (api_group, kind, identity),
        )
        return ObjectKey(api_group, kind, rows[0][0], rows[0][1]) if rows else None

    async def kinds(self) -> builtins.list[tuple[str, str, int]]:
        """Every (api_group, kind) that has live objects, with how many."""
        assert self._reader is not None
        return await self._guarded(in_thread(self._reader, live_kinds))

    async def compactable(self, before: int) -> int:
        """How many events ``compact(before)`` would drop."""
        assert self._reader is not None
        return await self._guarded(in_thread(self._reader, compactable, before))

    async def vacuum(self) -> None:
        """Give the space compaction freed back to the filesystem (rewrites the file: it
        takes as long as copying the database, and as much free space again)."""
        if self._writer is None:
            raise StoreError(f"{self.path}: opened read-only")
        await self._guarded(self._writes.call(vacuum))

    async def verify(
        self, *, deep: bool = False, check: Callable[[Any], object] | None = None
    ) -> VerifyReport:
        """Replay the log into a projection and compare it with the stored one; decode
        the current bodies (all of them with ``deep``), structuring each with ``check``."""
        assert self._reader is not None
        return await self._guarded(in_thread(self._reader, verify, deep, check))

    async def _guarded(self, call: Awaitable[T]) -> T:
        """Await ``call``, translating sqlite3 errors into StoreError (cause kept)."""
        with self._store_errors():
            return await call

    # -- shard leases: not here (one runner, by the runner lock) ---------------------------

    async def lease_shards(
        self,
        holder: str,
        *,
        about: str,
        duration: float,
        shards: int | None = None,
        release: Collection[int] = (),
    ) -> Leases | None:
        """None: a SQLite store has one runner (the runner lock), which owns every key."""
        del holder, about, duration, shards, release
        return None

    async def release_shards(self, holder: str) -> None:
        """Nothing to release (no leases here)."""
        del holder

    async def shard_table(self) -> ShardTable | None:
        """None: no lease table here."""
        return None

    async def write_refusal(self) -> str | None:
        """None: a file this process opened takes writes (one it cannot write to fails
        at open)."""
        return None
