"""Copying a whole PostgreSQL store out and in (``reconcile migrate``), as on SQLite (see
:mod:`reconcile.store.sqlite.copying`): a snapshot read in one REPEATABLE READ, read-only
transaction, and an import written in one transaction, each on a connection of its own.

The snapshot holds what had committed when it began, no more: a transaction still
running then is wholly out of it, even one whose revisions are below others in it (the
copy then has that gap, and its head is its highest revision). Rows stream through
server-side cursors, a batch at a time.

The import locks the store's tables (EXCLUSIVE: readers go on, writers of any process
wait) before it checks the store is empty, so nothing slips in between; projection rows
get new ids, each event finds its key's by the unique key; at the end the revision
sequence is set to the copied head, so the next commit continues from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson

from reconcile.errors import StoreError
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import ObjectRecord, RawEvent, StoreHeader
from reconcile.store.postgres.addressing import connect, errors, masked
from reconcile.store.postgres.maintenance import remember, remembered

__all__ = ["PostgresImport", "PostgresSnapshot", "importing", "snapshot"]

_OBJECT_COLUMNS = ("api_group", "kind", "namespace", "name", "uid", "resource_version", "live", "identity")
#: The head of what the transaction sees: its highest revision, or the horizon's
#: predecessor when compaction left no event at or above it.
_VISIBLE_HEAD = (
    "SELECT greatest(coalesce((SELECT max(revision) FROM reconcile_events), 0), "
    "(SELECT value::bigint FROM reconcile_meta WHERE key = 'horizon') - 1)"
)


async def read_header(conn: Any) -> StoreHeader:
    """The head, horizon, identity, secret, settings and counts, as the connection's
    transaction sees them."""
    meta = {
        str(key): orjson.loads(value)
        for key, value in await conn.fetch(
            "SELECT key, value FROM reconcile_meta WHERE key IN ('horizon', 'identity', 'mark_key')"
        )
    }
    counts = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM reconcile_events), count(*), count(*) FILTER (WHERE live) "
        "FROM reconcile_objects"
    )
    return StoreHeader(
        revision=int(await conn.fetchval(_VISIBLE_HEAD)),
        horizon=int(meta.get("horizon", 0)),
        identity=str(meta.get("identity") or ""),
        mark_key=bytes.fromhex(str(meta.get("mark_key") or "")),
        settings=await remembered(conn),
        events=int(counts[0]),
        objects=int(counts[1]),
        live=int(counts[2]),
    )


class PostgresSnapshot:
    """A store as one transaction sees it (see :class:`~reconcile.store.contract.Snapshot`)."""

    def __init__(self, conn: Any, dsn: str, header: StoreHeader) -> None:
        self._conn, self._dsn = conn, dsn
        #: What the store held when the snapshot began.
        self.header = header

    async def objects(self, batch: int = 1000) -> AsyncIterator[Sequence[ObjectRecord]]:
        """Every projection row in key order, ``batch`` at a time."""
        query = (
            f"SELECT {', '.join(_OBJECT_COLUMNS)} FROM reconcile_objects "
            "ORDER BY api_group, kind, namespace, name"
        )
        with errors(self._dsn):
            cursor = await self._conn.cursor(query)
        while True:
            with errors(self._dsn):
                rows = await cursor.fetch(batch)
            if rows:
                yield [
                    ObjectRecord(ObjectKey(g, k, n, m), uid, int(rv), bool(live), identity)
                    for g, k, n, m, uid, rv, live, identity in rows
                ]
            if len(rows) < batch:
                return

    async def events(self, batch: int = 1000) -> AsyncIterator[Sequence[RawEvent]]:
        """Every retained event in revision order, ``batch`` at a time."""
        query = (
            'SELECT e.revision, e.time, e.type, e.uid, e.actor, e.body, e.data, e."user", '
            "o.api_group, o.kind, o.namespace, o.name FROM reconcile_events e "
            "JOIN reconcile_objects o ON o.id = e.object_id ORDER BY e.revision"
        )
        with errors(self._dsn):
            cursor = await self._conn.cursor(query)
        while True:
            with errors(self._dsn):
                rows = await cursor.fetch(batch)
            if rows:
                yield [
                    RawEvent(
                        rev, at, type_, ObjectKey(g, k, n, m), uid, actor, text=body, data_text=data, user=who
                    )
                    for rev, at, type_, uid, actor, body, data, who, g, k, n, m in rows
                ]
            if len(rows) < batch:
                return


@contextlib.asynccontextmanager
async def snapshot(dsn: str) -> AsyncIterator[PostgresSnapshot]:
    """A connection of its own in one REPEATABLE READ, read-only transaction."""
    conn = await connect(dsn)
    try:
        with errors(dsn):
            transaction = conn.transaction(isolation="repeatable_read", readonly=True)
            await transaction.start()
            header = await read_header(conn)
        try:
            yield PostgresSnapshot(conn, dsn, header)
        finally:
            with contextlib.suppress(Exception):
                await transaction.rollback()
    finally:
        await conn.close()


class PostgresImport:
    """A copy being written in one transaction (see :class:`~reconcile.store.contract.Import`)."""

    def __init__(self, conn: Any, dsn: str) -> None:
        self._conn, self._dsn = conn, dsn

    async def objects(self, batch: Sequence[ObjectRecord]) -> None:
        """Insert projection rows (COPY)."""
        with errors(self._dsn):
            await self._conn.copy_records_to_table(
                "reconcile_objects",
                columns=_OBJECT_COLUMNS,
                records=[
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

    async def events(self, batch: Sequence[RawEvent]) -> None:
        """Append events as they are, each joined to its key's projection row."""
        columns: list[list[Any]] = [[] for _ in range(12)]
        for e in batch:
            row = (
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
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        with errors(self._dsn):
            status = await self._conn.execute(
                "INSERT INTO reconcile_events "
                '(revision, time, object_id, uid, type, actor, body, data, "user") '
                "SELECT e.r, e.t, o.id, e.u, e.ty, e.a, e.b, e.d, e.us "
                "FROM unnest($1::bigint[], $2::float8[], $3::text[], $4::text[], $5::text[], $6::text[], "
                "$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[]) "
                "AS e(r, t, g, k, n, m, u, ty, a, b, d, us) "
                "JOIN reconcile_objects o ON o.api_group = e.g AND o.kind = e.k AND o.namespace = e.n "
                "AND o.name = e.m",
                *columns,
            )
        if int(status.split()[-1]) != len(batch):
            first = batch[0].revision if batch else 0
            raise StoreError(
                f"{masked(self._dsn)}: events from revision {first}: an event's key has no projection row"
            )


async def _finish(conn: Any, header: StoreHeader) -> None:
    rows = [("horizon", orjson.dumps(header.horizon).decode())]
    if header.identity:
        rows.append(("identity", orjson.dumps(header.identity).decode()))
    if header.mark_key:
        rows.append(("mark_key", orjson.dumps(header.mark_key.hex()).decode()))
    await conn.executemany(
        "INSERT INTO reconcile_meta (key, value) VALUES ($1, $2::jsonb) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        rows,
    )
    for name, value in header.settings.items():
        await remember(conn, name, value)
    if header.revision > 0:
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('reconcile_events', 'revision'), $1)", header.revision
        )


async def _lock_empty(conn: Any, dsn: str) -> None:
    """Lock the store's tables against writers, and check there is nothing in them."""
    with errors(dsn):
        await conn.execute("LOCK TABLE reconcile_objects, reconcile_events, reconcile_meta IN EXCLUSIVE MODE")
        held = await read_header(conn)
    if not held.empty:
        message = f"{masked(dsn)}: not empty: holds {held.holds()}; migrate copies into an empty store only"
        raise StoreError(message)


@contextlib.asynccontextmanager
async def importing(dsn: str, header: StoreHeader) -> AsyncIterator[PostgresImport]:
    """Lock the tables, check the store is empty, yield the import; commit with
    ``header``'s meta on a clean exit, roll back on an exception."""
    conn = await connect(dsn)
    try:
        with errors(dsn):
            transaction = conn.transaction()
            await transaction.start()
        try:
            await _lock_empty(conn, dsn)
            yield PostgresImport(conn, dsn)
            with errors(dsn):
                await _finish(conn, header)
                await transaction.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                await transaction.rollback()
            raise
    finally:
        await conn.close()
