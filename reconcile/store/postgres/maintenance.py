"""Compaction, verification and remembered settings on PostgreSQL, as on SQLite (see
:mod:`reconcile.store.sqlite.maintenance` for what each guarantees).

Compaction never drops what a running transaction could still need: it drops only below
the safe head (every revision there has committed or never will), and only events no
live object points at. Verification reads the log and the projection in one REPEATABLE
READ snapshot, so a commit landing meanwhile is either wholly in it or wholly out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from reconcile.errors import CorruptError
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import VerifyReport
from reconcile.store.encoding import load_body
from reconcile.store.postgres.heading import SAFE_HEAD

__all__ = ["compact", "compactable", "remember", "remembered", "uids_with_event", "verify"]

_DROPPED = "revision < $1 AND revision NOT IN (SELECT resource_version FROM reconcile_objects WHERE live)"
_SETTING = "setting:"


async def uids_with_event(conn: Any, uids: Sequence[str], event_type: str) -> set[str]:
    """Those of ``uids`` with an event of ``event_type`` in the retained log (a scan)."""
    rows = await conn.fetch(
        "SELECT DISTINCT uid FROM reconcile_events WHERE type = $1 AND uid = ANY($2::text[])",
        event_type,
        list(uids),
    )
    return {str(row[0]) for row in rows}


async def remembered(conn: Any) -> dict[str, Any]:
    """Every remembered setting, by name."""
    rows = await conn.fetch(
        "SELECT key, value FROM reconcile_meta WHERE starts_with(key, $1) ORDER BY key", _SETTING
    )
    return {str(key).removeprefix(_SETTING): orjson.loads(value) for key, value in rows}


async def remember(conn: Any, name: str, value: Any) -> None:
    """Keep ``value`` under ``name`` (None: forget it), in one statement."""
    if value is None:
        await conn.execute("DELETE FROM reconcile_meta WHERE key = $1", _SETTING + name)
        return
    await conn.execute(
        "INSERT INTO reconcile_meta (key, value) VALUES ($1, $2) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        _SETTING + name,
        orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode(),
    )


async def compactable(conn: Any, before: int) -> int:
    """How many events :func:`compact` would drop (reads only)."""
    # The head, then the count in a later snapshot (not one REPEATABLE READ: see .heading).
    head = await conn.fetchval(f"SELECT {SAFE_HEAD}")
    return int(
        await conn.fetchval(f"SELECT count(*) FROM reconcile_events WHERE {_DROPPED}", min(before, head + 1))
    )


async def compact(conn: Any, before: int) -> int:
    """Drop events before ``before`` (at most the safe head's successor) except each live
    object's latest snapshot, forget tombstones left without events, raise the horizon
    (and drop idempotency keys a day old: see :mod:`.retrying`)."""
    async with conn.transaction():
        head = await conn.fetchval(f"SELECT {SAFE_HEAD}")
        before = min(before, head + 1)
        status = await conn.execute(f"DELETE FROM reconcile_events WHERE {_DROPPED}", before)
        await conn.execute(
            "DELETE FROM reconcile_objects o WHERE NOT live AND NOT EXISTS "
            "(SELECT 1 FROM reconcile_events e WHERE e.object_id = o.id)"
        )
        await conn.execute(
            "UPDATE reconcile_meta SET value = to_jsonb(greatest(value::bigint, $1::bigint)) "
            "WHERE key = 'horizon'",
            before,
        )
        # The idempotency keys of writers that stopped for good (a live one keeps only
        # its latest, its answer long known after a day).
        await conn.execute("DELETE FROM reconcile_commits WHERE time < clock_timestamp() - interval '1 day'")
    return int(status.split()[-1])


async def _undecodable(conn: Any, *, deep: bool, check: Callable[[Any], object] | None) -> list[str]:
    columns = "e.revision, o.api_group, o.kind, o.namespace, o.name, e.body, e.data"
    query = (
        f"SELECT {columns} FROM reconcile_events e JOIN reconcile_objects o ON o.id = e.object_id "
        "ORDER BY e.revision"
        if deep
        else f"SELECT {columns} FROM reconcile_objects o JOIN reconcile_events e "
        "ON e.revision = o.resource_version WHERE o.live"
    )
    lines: list[str] = []
    async for revision, group, kind, namespace, name, body, data in conn.cursor(query, prefetch=1000):
        key = ObjectKey(group, kind, namespace, name)
        try:
            if data is not None:
                load_body(data, revision, key)
            if body is not None:
                parsed = load_body(body, revision, key)
                if check is not None:
                    check(parsed)
        except CorruptError as exc:
            lines.append(f"event {exc.revision} ({key}): cannot be decoded: {exc.reason}")
    return lines


async def verify(conn: Any, deep: bool = False, check: Callable[[Any], object] | None = None) -> VerifyReport:
    """Replay the log into the projection it implies and compare with the stored one."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        expected: dict[int, tuple[int, bool, str]] = {}
        count, differences = 0, []
        async for revision, object_id, type_, has_body, uid in conn.cursor(
            "SELECT revision, object_id, type, body IS NOT NULL, uid FROM reconcile_events ORDER BY revision",
            prefetch=5000,
        ):
            count += 1
            if has_body:
                expected[object_id] = (revision, type_ != EventType.DELETED, uid)
        objects = 0
        async for object_id, group, kind, namespace, name, uid, revision, live in conn.cursor(
            "SELECT id, api_group, kind, namespace, name, uid, resource_version, live FROM reconcile_objects",
            prefetch=5000,
        ):
            key = ObjectKey(group, kind, namespace, name)
            objects += bool(live)
            want = expected.pop(object_id, None)
            if want is None:
                if live:
                    differences.append(f"{key}: in the projection but not in the log")
                continue
            if want[0] != revision:
                differences.append(f"{key}: projection at revision {revision}, log at {want[0]}")
            if want[1] != bool(live):
                state = "live" if live else "deleted"
                differences.append(f"{key}: projection says {state}, the log disagrees")
            if want[2] != uid:
                differences.append(f"{key}: projection uid {uid}, log {want[2]}")
        differences.extend(f"object id {i}: in the log but not in the projection" for i in expected)
        differences.extend(await _undecodable(conn, deep=deep, check=check))
    return VerifyReport(count, objects, tuple(differences))
