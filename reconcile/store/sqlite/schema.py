"""The SQLite schema, how a file is checked before we touch it, and how it migrates.

Tables:

* ``events`` -- the append-only log. ``revision`` is the integer primary key (no index on
  random text: that cut batched appends 4-6x in a prototype); a trigger forbids UPDATE.
* ``objects`` -- the projection: one row per object key ever seen, pointing at the event
  that holds the object's current snapshot (``resource_version``); ``live`` is 0 once the
  object is deleted (a tombstone keeps the key's history reachable by integer id). The
  body is stored once, in the event, not copied into the projection: that halves the
  bytes every commit writes and fsyncs, and a read is one primary-key lookup away.
* ``meta`` -- the head ``revision``, the compaction ``horizon``, the store's
  ``identity`` (random, made once) and its ``mark_key`` (a random secret, made once:
  what providers sign their ownership marks with; in no event, never printed).
* ``reconcile_schema`` -- the schema version; a newer one than we know is refused.

The schema is the list of numbered steps :data:`STEPS`, run by the mechanism every
backend shares (:mod:`reconcile.store.schemas`): step 1 makes a new database's tables,
each later one upgrades the version before it.

Opening never writes to a file until it is known to be ours: a file that is not SQLite,
is corrupt, belongs to another application or was written by a newer schema is refused
with an error naming it, and left as it was.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from reconcile.errors import StoreError
from reconcile.store.schemas import Step, check_steps, check_version, latest, pending
from reconcile.store.sqlite.space import disk_full

__all__ = ["SCHEMA_VERSION", "STEPS", "check_current", "check_file", "has_event_user", "prepare"]

_MAGIC = b"SQLite format 3\x00"

_SCHEMA_V1 = """
CREATE TABLE reconcile_schema (version INTEGER NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE objects (
    id INTEGER PRIMARY KEY,
    api_group TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    resource_version INTEGER NOT NULL,
    live INTEGER NOT NULL,
    UNIQUE (api_group, kind, namespace, name)
);
CREATE TABLE events (
    revision INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    object_id INTEGER NOT NULL,
    uid TEXT NOT NULL,
    type TEXT NOT NULL,
    actor TEXT NOT NULL,
    body TEXT,
    data TEXT
);
CREATE INDEX events_by_object ON events (object_id, revision);
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
INSERT INTO meta (key, value) VALUES ('revision', 0), ('horizon', 0);
"""


def _create(conn: sqlite3.Connection) -> None:
    """Version 1: the log, the projection, ``meta`` and the schema version."""
    for statement in _SCHEMA_V1.split(";\n"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO reconcile_schema (version) VALUES (1)")


def _add_identity(conn: sqlite3.Connection) -> None:
    """Version 2: ``objects.identity``, the external resource each object declares
    (``Kind.identity``), indexed so a second claim on it is found in one seek. Rows
    written before it have none until they are applied again."""
    conn.execute("ALTER TABLE objects ADD COLUMN identity TEXT")
    conn.execute(
        "CREATE INDEX objects_by_identity ON objects (api_group, kind, identity) WHERE identity IS NOT NULL"
    )


def _add_store_identity(conn: sqlite3.Connection) -> None:
    """Version 3: the store's own identity, ``meta.identity``: 63 random bits made once,
    when the database is created (or migrated), and kept for its life (a copy restored
    from a backup keeps it too: it is the same store). Providers write it into their
    ownership marks (see ``StoreBound.bind_store``)."""
    conn.execute("INSERT INTO meta (key, value) VALUES ('identity', ?)", (secrets.randbits(63),))


def _add_mark_key(conn: sqlite3.Connection) -> None:
    """Version 4: the store's secret, ``meta.mark_key``: 32 random bytes (a BLOB, which
    the column's integer affinity keeps as it is) made once, when the database is
    created (or migrated), kept for its life and by a copy, like the identity. Providers
    sign their ownership marks with it (``StoreBound.bind_store``), so that a mark
    somebody else wrote or copied, knowing the identity, is not this store's. It lives
    only here: never in the event log, never printed."""
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('mark_key', ?)", (secrets.token_bytes(32),))


def _add_event_user(conn: sqlite3.Connection) -> None:
    """Version 5: ``events.user``, who asked for the write when the writer said so (the
    CLI's ``--as``, by default the OS user and host); ``actor`` stays the field manager.
    Events written before it have none. A read-only open of an older file reads NULL in
    its place (see ``has_event_user``). Idempotent, as the mark key's is."""
    if not has_event_user(conn):
        conn.execute("ALTER TABLE events ADD COLUMN user TEXT")


#: The schema, step by step: STEPS[n - 1] brings a database to version n, run on the
#: connection's thread inside the one transaction that records the new version.
STEPS: Sequence[Step[Callable[[sqlite3.Connection], None]]] = check_steps(
    [
        Step(1, "the log, the projection, meta", _create),
        Step(2, "objects.identity: the external resource each object declares", _add_identity),
        Step(3, "meta.identity: the store's own identity", _add_store_identity),
        Step(4, "meta.mark_key: the store's secret", _add_mark_key),
        Step(5, "events.user: who asked for each write", _add_event_user),
    ]
)
#: The version this reconcile writes: the last step's.
SCHEMA_VERSION = latest(STEPS)


def has_event_user(conn: sqlite3.Connection) -> bool:
    """Whether the events table has the ``user`` column (schema version 5 and later): a
    file opened read-only is not migrated."""
    return any(row[1] == "user" for row in conn.execute("PRAGMA table_info(events)"))


def check_file(path: Path) -> None:
    """Refuse, without writing, a path that cannot hold our database."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a SQLite database")
    if path.exists() and not path.is_file():
        # /dev/null would get a /dev/null-journal beside it; a FIFO would hang the open.
        raise StoreError(f"{path}: is not a regular file (a device, FIFO or socket cannot hold a database)")
    if not path.parent.is_dir():
        raise StoreError(f"{path}: directory {path.parent} does not exist")
    if path.exists() and path.stat().st_size > 0:
        try:
            with path.open("rb") as handle:
                header = handle.read(len(_MAGIC))
        except OSError as exc:
            raise StoreError(f"{path}: cannot read ({exc.strerror})") from None
        if header != _MAGIC:
            raise StoreError(f"{path}: not a SQLite database")


def check_current(conn: sqlite3.Connection, path: str) -> None:
    """For a read-only open: the database is a reconcile store this version can read."""
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: corrupt or not a SQLite database ({exc})") from exc
    if "reconcile_schema" not in tables:
        raise StoreError(f"{path}: not a reconcile store")
    _check_version(conn, path)  # an older version reads the same: reads use no later column


def prepare(conn: sqlite3.Connection, path: str, synchronous: str) -> None:
    """Check the database is ours and current; create or migrate it. Runs in the
    connection's thread, with the connection in autocommit mode."""
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc) or "unable to open" in str(exc):
            reason = "cannot be written (a read-only file, folder or mount?); get and history still read it"
            raise StoreError(f"{path}: {reason} ({exc})") from exc
        if disk_full(exc, path):
            raise StoreError(f"{path}: disk full: free some space and start again ({exc})") from exc
        raise StoreError(f"{path}: corrupt or not a SQLite database ({exc})") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: corrupt or not a SQLite database ({exc})") from exc
    if tables and "reconcile_schema" not in tables:
        raise StoreError(f"{path}: a SQLite database, but not a reconcile store")
    if tables:
        _check_version(conn, path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = _check_version(conn, path) if "reconcile_schema" in tables else 0
        steps = pending(version, STEPS, path)
        for step in steps:
            try:
                step.run(conn)
            except sqlite3.Error as exc:
                raise StoreError(
                    f"{path}: migration to schema version {step.version} failed ({exc})"
                ) from exc
        if steps:
            conn.execute("UPDATE reconcile_schema SET version = ?", (steps[-1].version,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_version(conn: sqlite3.Connection, path: str) -> int:
    row = conn.execute("SELECT max(version) FROM reconcile_schema").fetchone()
    version = int(row[0]) if row and row[0] is not None else 0
    if version < 1:
        raise StoreError(f"{path}: reconcile_schema table holds no version")
    return check_version(version, STEPS, path)
