"""Compaction and verification, run on a connection's thread in one transaction each.

Compaction keeps what the projection points at (each live object's latest snapshot), so
the log can always rebuild the projection; verification does exactly that rebuild and
reports every difference: a revision out of order, a head behind the log, an object the
log and the projection disagree about (revision, uid, live or deleted), and a body that
cannot be decoded (every current object's always; with ``deep``, every event's).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from reconcile.errors import CorruptError
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import VerifyReport
from reconcile.store.encoding import load_body

__all__ = [
    "compact",
    "compactable",
    "live_kinds",
    "remember",
    "remembered",
    "uids_with_event",
    "vacuum",
    "verify",
]


#: The events a compaction before a revision (the parameter) drops: all but each live
#: object's latest snapshot.
_DROPPED = "revision < ? AND revision NOT IN (SELECT resource_version FROM objects WHERE live)"


def live_kinds(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """Every (api_group, kind) that has live objects, with how many."""
    rows = conn.execute(
        "SELECT api_group, kind, count(*) FROM objects WHERE live GROUP BY api_group, kind ORDER BY 1, 2"
    )
    return [(str(group), str(kind), int(count)) for group, kind, count in rows]


def uids_with_event(conn: sqlite3.Connection, uids: Sequence[str], event_type: str) -> set[str]:
    """Those of ``uids`` with an event of ``event_type`` in the retained log (a scan)."""
    found: set[str] = set()
    for start in range(0, len(uids), 500):
        chunk = list(uids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT DISTINCT uid FROM events WHERE type = ? AND uid IN ({marks})", (event_type, *chunk)
        )
        found.update(str(uid) for (uid,) in rows)
    return found


#: Remembered settings are ``meta`` rows keyed ``setting:NAME``, their value JSON in a BLOB
#: (which the column's integer affinity keeps as it is): no table of their own, so a
#: store of any schema version holds them, and an older reconcile ignores them.
_SETTING = "setting:"


def remembered(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every remembered setting, by name."""
    rows = conn.execute(
        "SELECT key, value FROM meta WHERE key >= ? AND key < ? ORDER BY key",
        (_SETTING, _SETTING[:-1] + chr(ord(_SETTING[-1]) + 1)),
    )
    return {str(key).removeprefix(_SETTING): json.loads(bytes(value)) for key, value in rows}


def remember(conn: sqlite3.Connection, name: str, value: Any) -> None:
    """Keep ``value`` under ``name`` (None: forget it), in one statement (autocommit)."""
    if value is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (_SETTING + name,))
        return
    text = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_SETTING + name, text),
    )


def compactable(conn: sqlite3.Connection, before: int) -> int:
    """How many events :func:`compact` would drop (reads only)."""
    return int(conn.execute(f"SELECT count(*) FROM events WHERE {_DROPPED}", (before,)).fetchone()[0])


def compact(conn: sqlite3.Connection, before: int) -> int:
    """Drop events before ``before`` except each live object's latest snapshot, forget
    tombstones left without events, and raise the horizon; then checkpoint the write-ahead
    log. Returns the events dropped."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        head = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0]
        before = min(before, head + 1)
        dropped = conn.execute(f"DELETE FROM events WHERE {_DROPPED}", (before,)).rowcount
        conn.execute(
            "DELETE FROM objects WHERE NOT live AND NOT EXISTS "
            "(SELECT 1 FROM events WHERE events.object_id = objects.id)"
        )
        conn.execute("UPDATE meta SET value = max(value, ?) WHERE key = 'horizon'", (before,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    # The deletions went to the write-ahead log: every page they touched, about as large
    # as what they dropped. SQLite folds the log back only when its last connection
    # closes, so with another process on the file (a running ``reconcile run``) the log
    # stayed, and compacting made the database and its log larger than before. Fold it
    # in now and truncate it (a reader still in a transaction only makes this partial).
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return int(dropped)


def vacuum(conn: sqlite3.Connection) -> None:
    """Rewrite the file without its free pages (what compaction dropped stays in the file
    as free pages, reused by later writes but never returned to the filesystem), then
    truncate the write-ahead log."""
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _undecodable(
    conn: sqlite3.Connection, *, deep: bool, check: Callable[[Any], object] | None
) -> Iterator[str]:
    """A line per body that does not parse (or, given ``check``, does not structure):
    the current objects', or with ``deep`` every event's."""
    columns = "e.revision, o.api_group, o.kind, o.namespace, o.name, e.body, e.data"
    query = (
        f"SELECT {columns} FROM events e JOIN objects o ON o.id = e.object_id ORDER BY e.revision"
        if deep
        else f"SELECT {columns} FROM objects o JOIN events e ON e.revision = o.resource_version WHERE o.live"
    )
    for revision, group, kind, namespace, name, body, data in conn.execute(query):
        key = ObjectKey(group, kind, namespace, name)
        try:
            if data is not None:
                load_body(data, revision, key)
            if body is not None:
                parsed = load_body(body, revision, key)
                if check is not None:
                    check(parsed)
        except CorruptError as exc:
            yield f"event {exc.revision} ({key}): cannot be decoded: {exc.reason}"


def verify(
    conn: sqlite3.Connection, deep: bool = False, check: Callable[[Any], object] | None = None
) -> VerifyReport:
    """Replay the log into the projection it implies and compare with the stored one;
    decode the current bodies (every body with ``deep``), structuring each with
    ``check`` when given."""
    conn.execute("BEGIN")
    try:
        expected: dict[int, tuple[int, bool, str]] = {}
        count, last, differences = 0, 0, []
        for revision, object_id, type_, has_body, uid in conn.execute(
            "SELECT revision, object_id, type, body IS NOT NULL, uid FROM events ORDER BY revision"
        ):
            count += 1
            if revision <= last:  # pragma: no cover - the primary key forbids it
                differences.append(f"revision {revision} does not increase")
            last = revision
            if has_body:
                expected[object_id] = (revision, type_ != EventType.DELETED, uid)
        head = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0]
        if head < last:
            differences.append(f"head revision {head} is behind the log ({last})")
        objects = 0
        for object_id, group, kind, namespace, name, uid, revision, live in conn.execute(
            "SELECT id, api_group, kind, namespace, name, uid, resource_version, live FROM objects"
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
        differences.extend(_undecodable(conn, deep=deep, check=check))
    finally:
        conn.execute("COMMIT")
    return VerifyReport(count, objects, tuple(differences))
