"""The PostgreSQL backend: the same event log, projection and watch as SQLite's, shared by
any number of processes on any number of machines.

Connections (asyncpg): one for the writer task, which commits every queued write in
batches (:mod:`.writing`, :mod:`.committing`); a small pool for reads, lists, history
and watches; one that only LISTENs on the store's channel, so a commit in any process
wakes every watch at once (:mod:`.listening`); and one per claim (:mod:`.claims`).

A watch reads, in revision order, up to the *safe head*: the highest revision below which
no running transaction can still commit anything (:mod:`.heading`). So it
never skips an event that commits out of sequence order, and the resource version stays
an integer. A list reports the safe head as its revision: the rows may already show a
later commit of another process, which a watch from that revision then delivers once
more (a repeat, never a gap).

Faults (:mod:`.retrying`): every call tries a lost server again, with backoff, for up to
``patience`` seconds on a connection made anew; the listening connection comes back on
its own after a restart (the poll covers the gap). Past that, and at once for a
read-only server, a call raises StoreUnavailableError naming the server.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any, Self, TypeVar

import asyncpg

from reconcile.errors import StoreError
from reconcile.model.events import Bookmark
from reconcile.model.meta import ObjectKey
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
from reconcile.store.paging import page_of, rows_for
from reconcile.store.postgres import copying, leasing, maintenance, schema
from reconcile.store.postgres.addressing import check_url, connect_raw, errors, masked, transient
from reconcile.store.postgres.claims import AdvisoryClaim, claim_advisory
from reconcile.store.postgres.heading import SAFE_HEAD
from reconcile.store.postgres.listening import Listener
from reconcile.store.postgres.pages import (
    EVENT_COLUMNS,
    event_of,
    filled,
    paged_event,
    watch_page,
    with_horizon,
)
from reconcile.store.postgres.retrying import PATIENCE, after_failure, retrying
from reconcile.store.postgres.writing import Writer
from reconcile.store.recent import RecentEvents
from reconcile.store.watching import Tail

__all__ = ["PostgresStore", "watch_page"]

T = TypeVar("T")


async def _unchanged(_connection: object) -> None:
    """A read connection goes back to the pool as it is: reads change nothing of the
    session (no settings, locks, cursors or LISTEN), and asyncpg's default reset would
    cost a round trip per read."""


class PostgresStore:
    """A store in a PostgreSQL database (its current schema). Open with :meth:`open`;
    close with :meth:`close`."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        poll_interval: tuple[float, float] = (0.05, 0.5),
        read_only: bool = False,
        readers: int = 4,
        patience: float = PATIENCE,
    ) -> None:
        check_url(url)
        self._dsn = url
        self.read_only = read_only
        self._clock = clock
        self._readers = readers
        #: Seconds a call tries a lost server again before StoreUnavailableError.
        self.patience = patience
        self._where = masked(url)
        self._pool: Any = None
        self._layout: schema.Layout | None = None
        self._tail = Tail(
            self.revision, fast=poll_interval[0], slow=poll_interval[1], capped=True, fill=self._fill
        )
        self._recent = RecentEvents(filled=True)
        self._writes = Writer(url, self._where, clock, self._tail, self._recent, patience=patience)
        self._listening = Listener(
            url, self._where, self._tail, lambda: self._writes.link.pid, patience=patience
        )
        self._close_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The URL, its password masked."""
        return self._where

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    async def open(self) -> Self:
        """Connect, check the schema (creating or upgrading it unless read-only), start
        listening and the writer. A server that is down, restarting or lost mid-way is
        tried again with backoff for up to ``patience`` seconds, each attempt from a new
        connection (the schema steps are one transaction: a retry after an unknown outcome
        finds them done or not begun); bad input (credentials, an unknown database, another
        application's tables, a newer schema) fails at once."""
        try:
            with errors(self._dsn):
                first = await retrying(
                    self._first, url=self._dsn, where=f"{self._where}: opening", patience=self.patience
                )
                if self.read_only:
                    await first.close()
                else:
                    self._writes.link.connection = first
                self._pool = await asyncpg.create_pool(
                    self._dsn, min_size=0, max_size=self._readers, reset=_unchanged
                )
                assert self._layout is not None
                await self._listening.start(self._layout.channel)
                self._tail.head = await self.revision()
        except BaseException:
            await self._close_connections()
            raise
        if not self.read_only:
            assert self._layout is not None
            self._writes.start(first, self._layout.channel)
        return self

    async def _first(self) -> Any:
        """One attempt of :meth:`open`: a connection, its schema checked (and prepared
        unless read-only); the connection ended on any failure."""
        first = await connect_raw(self._dsn)
        try:
            if self.read_only:
                self._layout = await schema.read_layout(first, self._where)
                await schema.check_exists(first, self._where)
            else:
                self._layout = await schema.prepare(first, self._where)
        except BaseException as exc:
            instead = after_failure(first, exc) if isinstance(exc, Exception) else None
            if not first.is_closed():
                first.terminate()
            if instead is not None:
                raise instead from exc
            raise
        return first

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit what is queued, end every watch, and close the connections: once, to
        the end even if the caller is cancelled."""
        if self._close_task is None:
            self._writes.shut()
            self._close_task = asyncio.get_running_loop().create_task(
                self._close(), name=f"close {self._where}"
            )
        await finish(self._close_task)

    async def _close(self) -> None:
        try:
            await self._writes.stop()
            await self._tail.close()
        finally:
            await self._close_connections()

    async def _close_connections(self) -> None:
        await self._listening.stop()
        pool, writer = self._pool, self._writes.link.connection
        self._pool = self._writes.link.connection = None
        if writer is not None:
            try:
                await asyncio.wait_for(writer.close(), 5)
            except Exception:  # noqa: BLE001 - a broken connection is ended the hard way
                writer.terminate()
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), 5)
            except Exception:  # noqa: BLE001
                pool.terminate()

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
        """Queue every write at once for the next group commits; one future per write."""
        self._check_writable()
        return self._writes.submit_many(writes, actor, user)

    async def write_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> builtins.list[WriteResult]:
        """Commit every write in one transaction of its own, all or nothing."""
        self._check_writable()
        if not writes:
            return []
        return await self._writes.submit_group(writes, actor, user)

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self._where}: opened read-only")
        self._writes.check()

    # -- reading -----------------------------------------------------------------------

    def _reading(self) -> Any:
        if self._pool is None:
            raise StoreError(f"{self._where}: store is closed")
        return self._pool

    async def _fetch(self, sql: str, *params: Any) -> builtins.list[Any]:
        return list(await self._pooled(lambda conn: conn.fetch(sql, *params)))

    async def _value(self, sql: str, *params: Any) -> Any:
        return await self._pooled(lambda conn: conn.fetchval(sql, *params))

    async def revision(self) -> int:
        """The safe head: the latest revision below which every transaction has ended."""
        return int(await self._value(f"SELECT {SAFE_HEAD}"))

    async def horizon(self) -> int:
        """The compaction horizon: history before it is gone."""
        return int(await self._value("SELECT value::bigint FROM reconcile_meta WHERE key = 'horizon'"))

    async def identity(self) -> str:
        """The store's identity: 16 hexadecimal digits, made once with the store."""
        value = await self._value("SELECT value #>> '{}' FROM reconcile_meta WHERE key = 'identity'")
        return str(value or "")

    async def mark_key(self) -> bytes:
        """The store's secret: 32 random bytes, made once with the store."""
        value = await self._value("SELECT value #>> '{}' FROM reconcile_meta WHERE key = 'mark_key'")
        return bytes.fromhex(value) if value else b""

    async def uids_with_event(self, uids: Sequence[str], event_type: str) -> set[str]:
        """Those of ``uids`` with an event of ``event_type`` in the retained log."""
        return await self._pooled(maintenance.uids_with_event, uids, event_type)

    async def remembered(self) -> dict[str, Any]:
        """Every remembered setting, by name."""
        return await self._pooled(maintenance.remembered)

    async def remember(self, name: str, value: Any) -> None:
        """Keep ``value`` under ``name`` (None: forget it), one statement of its own."""
        self._check_writable()
        await self._pooled(maintenance.remember, name, value)

    async def read(self, key: ObjectKey) -> StoredObject | None:
        """The current object, or None."""
        rows = await self._fetch(
            "SELECT o.uid, o.resource_version, e.body FROM reconcile_objects o JOIN reconcile_events e "
            "ON e.revision = o.resource_version WHERE o.api_group = $1 AND o.kind = $2 "
            "AND o.namespace = $3 AND o.name = $4 AND o.live",
            key.api_group,
            key.kind,
            key.namespace,
            key.name,
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
        where = "o.api_group = $1 AND o.kind = $2 AND o.live"
        params: builtins.list[Any] = [api_group, kind]
        if namespace is not None:
            params.append(namespace)
            where += f" AND o.namespace = ${len(params)}"
        if after is not None:
            params.extend(after)
            where += f" AND (o.namespace, o.name) > (${len(params) - 1}, ${len(params)})"
        read, limited = rows_for(limit, predicate), ""
        if read is not None:
            params.append(read)
            limited = f" LIMIT ${len(params)}"

        async def listing(conn: Any) -> tuple[int, builtins.list[Any]]:
            # The head first, the rows in a later snapshot: they show at least every
            # commit up to the head (perhaps later ones: a repeat, never a gap). Not
            # one REPEATABLE READ snapshot: the head needs fresh ones (see .heading).
            revision = int(await conn.fetchval(f"SELECT {SAFE_HEAD}"))
            rows = await conn.fetch(
                "SELECT 0, o.namespace, o.name, o.uid, o.resource_version, e.body "
                "FROM reconcile_objects o JOIN reconcile_events e ON e.revision = o.resource_version "
                f"WHERE {where} ORDER BY o.namespace, o.name{limited}",
                *params,
            )
            return revision, rows

        revision, rows = await self._pooled(listing)
        return page_of(rows, api_group, kind, revision=revision, limit=limit, predicate=predicate)

    async def events(self, key: ObjectKey) -> builtins.list[RawEvent]:
        """Every retained event of one object key, oldest first."""
        rows = await self._fetch(
            f"SELECT {EVENT_COLUMNS} FROM reconcile_objects o JOIN reconcile_events e ON e.object_id = o.id "
            "WHERE o.api_group = $1 AND o.kind = $2 AND o.namespace = $3 AND o.name = $4 ORDER BY e.revision",
            key.api_group,
            key.kind,
            key.namespace,
            key.name,
        )
        return [event_of(row) for row in rows]

    # -- watching ----------------------------------------------------------------------

    async def _fill(self, head: int) -> None:
        """Other processes' commits up to ``head``, read once into the recent window for
        every watch here (:func:`.pages.filled`)."""
        await filled(self._fetch, self._recent, self._tail.head, head)

    def watch(
        self,
        *,
        since: int = 0,
        api_group: str | None = None,
        kind: str | None = None,
        namespace: str | None = None,
    ) -> AsyncIterator[RawEvent | Bookmark]:
        """Events with revision > ``since`` in order, then live; a bookmark whenever
        caught up. Reads only up to the safe head. Ends when the store closes."""
        query, params = watch_page(api_group, kind, namespace)
        paged = with_horizon(query)
        tail = self._tail
        seen: list[int] = []  # the horizon the last page was read with
        known: list[int] = []  # the head this watch was last given

        async def fetch(cursor: int, head: int, limit: int) -> Sequence[Any]:
            rows = await self._fetch(paged, cursor, head, limit, *params)
            seen[:] = [int(rows[0][-1])]
            return [] if rows[0][0] is None else rows

        async def horizon() -> int:
            # After a page: the horizon in the page's own snapshot (a compaction that
            # committed before it shows there, one after it took nothing from it);
            # before the first, read now.
            return seen.pop() if seen else await self.horizon()

        async def revision() -> int:
            # The tail moved since this watch last asked (a notification's read of the
            # safe head, or a commit of ours): that head is safe, and read already.
            head = tail.head
            if not known or head <= known[0]:
                head = await self.revision()
            known[:] = [head]
            return head

        return follow(
            since=since,
            matches=matcher(api_group, kind, namespace),
            tail=tail,
            recent=self._recent,
            revision=revision,
            horizon=horizon,
            fetch=fetch,
            event=paged_event,
        )

    # -- copying -----------------------------------------------------------------------

    def snapshot(self) -> contextlib.AbstractAsyncContextManager[copying.PostgresSnapshot]:
        """The whole store as one REPEATABLE READ transaction sees it (see :mod:`.copying`)."""
        self._reading()
        return copying.snapshot(self._dsn)

    @contextlib.asynccontextmanager
    async def importing(self, header: StoreHeader) -> AsyncIterator[copying.PostgresImport]:
        """Write a copy into this empty store in one transaction (see :mod:`.copying`)."""
        self._check_writable()
        async with copying.importing(self._dsn, header) as target:
            yield target
        self._tail.head = await self.revision()

    async def claim(self, name: str) -> AdvisoryClaim:
        """An exclusive claim on this store: a session advisory lock on a connection of
        its own; LockedError naming the holder when it is taken."""
        assert self._layout is not None
        return await claim_advisory(self._dsn, self._layout.claim_key(name), name)

    # -- maintenance -------------------------------------------------------------------

    async def compact(self, before: int) -> int:
        """Drop events before ``before`` except each live object's latest snapshot."""
        self._check_writable()
        dropped = await self._pooled(maintenance.compact, before)
        self._recent.clear()
        return dropped

    async def claimant(self, api_group: str, kind: str, identity: str) -> ObjectKey | None:
        """The live object of the kind that declares ``identity``, if any."""
        rows = await self._fetch(
            "SELECT namespace, name FROM reconcile_objects WHERE api_group = $1 AND kind = $2 "
            "AND identity = $3 AND live LIMIT 1",
            api_group,
            kind,
            identity,
        )
        return ObjectKey(api_group, kind, rows[0][0], rows[0][1]) if rows else None

    async def kinds(self) -> builtins.list[tuple[str, str, int]]:
        """Every (api_group, kind) that has live objects, with how many."""
        rows = await self._fetch(
            "SELECT api_group, kind, count(*) FROM reconcile_objects WHERE live GROUP BY 1, 2 ORDER BY 1, 2"
        )
        return [(str(g), str(k), int(n)) for g, k, n in rows]

    async def compactable(self, before: int) -> int:
        """How many events ``compact(before)`` would drop."""
        return await self._pooled(maintenance.compactable, before)

    async def vacuum(self) -> None:
        """``VACUUM`` the log and the projection (PostgreSQL reuses the space compaction
        freed; ``VACUUM FULL``, which returns it to the filesystem, is the operator's call:
        it locks the tables)."""
        self._check_writable()
        await self._pooled(lambda conn: conn.execute("VACUUM reconcile_events, reconcile_objects"))

    async def verify(
        self, *, deep: bool = False, check: Callable[[Any], object] | None = None
    ) -> VerifyReport:
        """Replay the log into a projection and compare it with the stored one."""
        return await self._pooled(maintenance.verify, deep, check)

    # -- shard leases (see reconcile.store.postgres.leasing) -----------------------------

    async def lease_shards(
        self,
        holder: str,
        *,
        about: str,
        duration: float,
        shards: int | None = None,
        release: Collection[int] = (),
    ) -> Leases | None:
        """One renewal of ``holder``'s leases: live for ``duration`` s, ``release`` given
        up, the rest renewed, taken up to its fair share; what it holds now."""
        self._check_writable()
        assert self._layout is not None
        key = self._layout.create_key
        return await self._pooled(
            leasing.renew, key, holder, about=about, duration=duration, shards=shards, release=release
        )

    async def release_shards(self, holder: str) -> None:
        """Give up every lease of ``holder``, and its membership."""
        await self._pooled(leasing.release, holder)

    async def shard_table(self) -> ShardTable | None:
        """The lease table, read without writing (None: never sharded)."""
        return await self._pooled(leasing.shard_table)

    async def write_refusal(self) -> str | None:
        """Why the server takes no writes now (a standby in recovery, or
        ``default_transaction_read_only`` on), None when it takes them."""
        recovery, read_only = await self._pooled(
            lambda conn: conn.fetchrow(
                "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only') = 'on'"
            )
        )
        if recovery:
            return f"{self._where}: the server is read-only (a standby, in recovery)"
        if read_only:
            return f"{self._where}: the server is read-only (default_transaction_read_only is on)"
        return None

    async def _pooled(self, call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``call(connection, *args, **kwargs)`` on a pooled connection, tried again on
        a new one after a transient fault (every call made here is safe to repeat: a
        read, or one statement that converges: an upsert, a renewal, a compaction)."""
        pool = self._reading()

        async def attempt() -> T:
            async with pool.acquire() as conn:
                try:
                    return await call(conn, *args, **kwargs)
                except Exception as exc:
                    instead = after_failure(conn, exc)
                    if transient(instead or exc):
                        await pool.expire_connections()  # the others are likely as dead
                    if instead is None:
                        raise
                    raise instead from exc

        with errors(self._dsn):
            return await retrying(attempt, url=self._dsn, where=self._where, patience=self.patience)
