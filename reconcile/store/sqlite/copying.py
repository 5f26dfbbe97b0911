"""Copying a whole SQLite store out and in (``reconcile migrate``): a snapshot read in one
read transaction, and an import written in one write transaction.

Both run on a connection of their own, so the store's reader and writer go on serving
(the writer's commits wait for the import's lock, as another process's would). The
snapshot is a deferred read transaction: in WAL mode it sees the database as of its first
read, whatever commits later, for as long as it lasts. Rows are read a page at a time by
key (the projection by its unique key, the log by revision), each page one call on the
connection's thread, so a store larger than memory streams through.

The import takes the write lock first (``BEGIN IMMEDIATE``), then checks the store is
empty inside it, so nothing can slip in between the check and the copy. Projection rows
get new ids; each event finds its key's id by the unique index.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from reconcile.errors import StoreError
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import ObjectRecord, RawEvent, StoreHeader
from reconcile.store.sqlite.connections import close_connections, in_thread, open_connection, open_read_only
from reconcile.store.sqlite.maintenance import remember, remembered
from reconcile.store.sqlite.schema import has_event_user
from reconcile.store.sqlite.writing import store_errors

__all__ = ["SQLiteImport", "SQLiteSnapshot", "importing", "snapshot"]

_OBJECT_COLUMNS = "api_group, kind, namespace, name, uid, resource_version, live, identity"
_EVENT_COLUMNS = (
    "e.revision, e.time, e.type, e.uid, e.actor, e.body, e.data, o.api_group, o.kind, o.namespace, o.name"
)


def read_header(conn: sqlite3.Connection) -> StoreHeader:
    """The head, horizon, identity, secret, settings and counts, as this connection's
    transaction sees them."""
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key NOT LIKE 'setting:%'"))
    events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    objects, live = conn.execute("SELECT count(*), coalesce(sum(live), 0) FROM objects").fetchone()
    identity = meta.get("identity")
    return StoreHeader(
        revision=int(meta["revision"]),
        horizon=int(meta["horizon"]),
        identity="" if identity is None else f"{int(identity):016x}",
        mark_key=bytes(meta.get("mark_key") or b""),
        settings=remembered(conn),
        events=int(events),
        objects=int(objects),
        live=int(live),
    )


def _objects_after(
    conn: sqlite3.Connection, after: tuple[str, str, str, str] | None, limit: int
) -> list[ObjectRecord]:
    where, params = "", []
    if after is not None:
        where, params = "WHERE (api_group, kind, namespace, name) > (?, ?, ?, ?)", list(after)
    rows = conn.execute(
        f"SELECT {_OBJECT_COLUMNS} FROM objects {where} ORDER BY api_group, kind, namespace, name LIMIT ?",
        (*params, limit),
    )
    return [
        ObjectRecord(ObjectKey(g, k, n, m), uid, int(rv), bool(live), identity)
        for g, k, n, m, uid, rv, live, identity in rows
    ]


def _events_after(conn: sqlite3.Connection, after: int, limit: int, user: str) -> list[RawEvent]:
    rows = conn.execute(
        f"SELECT {_EVENT_COLUMNS}, {user} FROM events e JOIN objects o ON o.id = e.object_id "
        "WHERE e.revision > ? ORDER BY e.revision LIMIT ?",
        (after, limit),
    )
    return [
        RawEvent(rev, at, type_, ObjectKey(g, k, n, m), uid, actor, text=body, data_text=data, user=who)
        for rev, at, type_, uid, actor, body, data, g, k, n, m, who in rows
    ]


class SQLiteSnapshot:
    """A store as one read transaction sees it (see :class:`~reconcile.store.contract.Snapshot`)."""

    def __init__(self, conn: aiosqlite.Connection, path: Path, header: StoreHeader, user: str) -> None:
        self._conn, self._path, self._user = conn, path, user
        #: What the store held when the snapshot began.
        self.header = header

    async def objects(self, batch: int = 1000) -> AsyncIterator[Sequence[ObjectRecord]]:
        """Every projection row in key order, ``batch`` at a time."""
        after: tuple[str, str, str, str] | None = None
        while True:
            with store_errors(self._path):
                rows = await in_thread(self._conn, _objects_after, after, batch)
            if rows:
                yield rows
            if len(rows) < batch:
                return
            last = rows[-1].key
            after = (last.api_group, last.kind, last.namespace, last.name)

    async def events(self, batch: int = 1000) -> AsyncIterator[Sequence[RawEvent]]:
        """Every retained event in revision order, ``batch`` at a time."""
        after = 0
        while True:
            with store_errors(self._path):
                rows = await in_thread(self._conn, _events_after, after, batch, self._user)
            if rows:
                yield rows
            if len(rows) < batch:
                return
            after = rows[-1].revision


@contextlib.asynccontextmanager
async def snapshot(path: Path, busy_timeout: float) -> AsyncIterator[SQLiteSnapshot]:
    """Open a read-only connection of its own, begin a read transaction, yield the snapshot."""
    with store_errors(path):
        conn = await open_read_only(path, busy_timeout)
    try:
        with store_errors(path):
            await conn.execute("BEGIN")
            header = await in_thread(conn, read_header)  # the first read fixes the snapshot
            user = "e.user" if await in_thread(conn, has_event_user) else "NULL"
        yield SQLiteSnapshot(conn, path, header, user)
    finally:
        with contextlib.suppress(sqlite3.Error):
            await conn.execute("ROLLBACK")
        await close_connections(conn)


def _add_objects(conn: sqlite3.Connection, batch: Sequence[ObjectRecord]) -> None:
    conn.executemany(
        f"INSERT INTO objects ({_OBJECT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.key.api_group,
                r.key.kind,
                r.key.namespace,
                r.key.name,
                r.uid,
                r.resource_version,
                r.live,
                r.identity,
            )
            for r in batch
        ],
    )


def _add_events(conn: sqlite3.Connection, batch: Sequence[RawEvent]) -> None:
    try:
        conn.executemany(
            "INSERT INTO events (revision, time, object_id, uid, type, actor, body, data, user) "
            "VALUES (?, ?, (SELECT id FROM objects WHERE api_group = ? AND kind = ? AND namespace = ? "
            "AND name = ?), ?, ?, ?, ?, ?, ?)",
            [
                (
                    e.revision,
                    e.time,
                    e.key.api_group,
                    e.key.kind,
                    e.key.namespace,
                    e.key.name,
                    e.uid,
                    e.type,
                    e.actor,
                    e.body_text,
                    e.data_text,
                    e.user,
                )
                for e in batch
            ],
        )
    except sqlite3.IntegrityError as exc:
        first = batch[0].revision if batch else 0
        message = f"events from revision {first}: an event's key has no projection row, or a revision repeats"
        raise StoreError(f"{message} ({exc})") from exc


def _finish(conn: sqlite3.Connection, header: StoreHeader) -> None:
    conn.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (header.revision,))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'horizon'", (header.horizon,))
    if header.identity:  # a source too old to have one keeps this store's
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('identity', ?)", (int(header.identity, 16),)
        )
    if header.mark_key:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('mark_key', ?)", (header.mark_key,))
    for name, value in header.settings.items():
        remember(conn, name, value)
    conn.execute("COMMIT")


def _begin(conn: sqlite3.Connection, where: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    held = read_header(conn)
    if not held.empty:
        raise StoreError(f"{where}: not empty: holds {held.holds()}; migrate copies into an empty store only")


class SQLiteImport:
    """A copy being written in one write transaction (see :class:`~reconcile.store.contract.Import`)."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn, self._path = conn, path

    async def objects(self, batch: Sequence[ObjectRecord]) -> None:
        """Insert projection rows."""
        with store_errors(self._path):
            await in_thread(self._conn, _add_objects, batch)

    async def events(self, batch: Sequence[RawEvent]) -> None:
        """Append events as they are."""
        with store_errors(self._path):
            await in_thread(self._conn, _add_events, batch)


@contextlib.asynccontextmanager
async def importing(path: Path, busy_timeout: float, header: StoreHeader) -> AsyncIterator[SQLiteImport]:
    """Take the write lock on a connection of its own, check the store is empty, yield the
    import; commit with ``header``'s meta on a clean exit, roll back on an exception."""
    with store_errors(path):
        conn = await open_connection(path, busy_timeout)
    try:
        with store_errors(path):
            await in_thread(conn, _begin, str(path))
        yield SQLiteImport(conn, path)
        with store_errors(path):
            await in_thread(conn, _finish, header)
    finally:
        with contextlib.suppress(sqlite3.Error):
            await in_thread(conn, _rollback)
        await close_connections(conn)


def _rollback(conn: sqlite3.Connection) -> Any:
    if conn.in_transaction:
        conn.execute("ROLLBACK")
