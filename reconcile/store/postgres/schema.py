"""The PostgreSQL schema, how a database is checked before we touch it, and how it is made.

The store's tables live in the connection's current schema (the first of its
``search_path`` that exists: ``public`` unless the URL says ``?search_path=NAME``), so one
database can hold one store per schema. Every name starts with ``reconcile_``:

* ``reconcile_events`` -- the append-only log. ``revision`` (a bigserial) orders it;
  ``xid`` is the writing transaction's id (``pg_current_xact_id()``, an ``xid8``), what
  watches use to read only what no running transaction can still add to (see
  :mod:`.committing`). A trigger forbids UPDATE.
* ``reconcile_objects`` -- the projection, as in SQLite: one row per key ever seen,
  pointing at the event holding its current snapshot. A deferred exclusion constraint
  keeps one live declarer per external resource (identity) across processes.
* ``reconcile_meta`` -- ``application`` (the marker: ``"reconcile"``), ``schema_version``,
  the compaction ``horizon``, the store's ``identity`` and ``mark_key`` (never printed),
  and remembered settings (``setting:NAME``).
* ``reconcile_reserve(n)`` -- hands a commit its block of revisions (see :mod:`.committing`)
  and, from version 2, marks the transaction as one of the store's writers.
* ``reconcile_safe_head()`` (version 2) -- the revision a watch may read up to (see
  :mod:`.heading`).
* ``reconcile_commits`` (version 3) -- each writer's latest commit's idempotency key (``token``) and
  revisions, written in the commit's transaction: how a commit whose answer was lost
  with the connection is found out (see :mod:`.retrying`). Keys of writers that died
  are dropped by compaction after a day.
* ``reconcile_shards``, ``reconcile_runners``, ``reconcile_fenced`` and
  ``reconcile_renew(...)`` (version 4) -- the shard leases of runners sharing the store
  (see :mod:`.leasing`); empty until a runner first asks for leases. Before version 4
  they were made at that first request: step 4 keeps such tables as they are.

The schema is the list of numbered steps :data:`STEPS`, run by the mechanism every
backend shares (:mod:`reconcile.store.schemas`): step 1 makes a new store's tables, each
later one upgrades the version before it, all pending ones in one transaction with the
version they reach (``schema_version``).

Opening never creates anything in a schema that is not ours: one that holds other
tables (another application's) or a newer schema version is refused by name, untouched.
Two processes creating the same store at once are serialized by a transaction-scoped
advisory lock: the second finds the first one's tables.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from reconcile.errors import StoreError
from reconcile.store.postgres import heading, leasing
from reconcile.store.schemas import Step, check_steps, check_version, latest, pending

__all__ = [
    "APPLICATION",
    "SCHEMA_VERSION",
    "STEPS",
    "Layout",
    "check_current",
    "check_exists",
    "prepare",
    "read_layout",
]

#: How many of another application's tables a refusal names.
_SHOWN = 5
APPLICATION = "reconcile"


class Layout:
    """Where a store's tables are: the schema, and what is derived from its name (the
    advisory lock keys, the notification channel)."""

    __slots__ = ("channel", "create_key", "reserve_key", "schema", "writer_key")

    def __init__(self, schema: str) -> None:
        self.schema = schema
        digest = hashlib.blake2b(f"reconcile:{schema}".encode(), digest_size=8).digest()
        #: The advisory lock the revision reservation holds for an instant.
        self.reserve_key = int.from_bytes(digest, "big", signed=True)
        #: The advisory lock schema creation holds for its transaction.
        self.create_key = self.reserve_key ^ 1
        #: The advisory lock every writing transaction holds, shared, from its reservation
        #: to its end: what the safe head reads the store's running writers from.
        self.writer_key = self.reserve_key ^ 2
        #: The LISTEN/NOTIFY channel commits announce themselves on.
        self.channel = f"reconcile_{digest.hex()}"

    def claim_key(self, name: str) -> int:
        """The advisory lock key of claim ``name`` (``runner``)."""
        digest = hashlib.blake2b(f"reconcile:{self.schema}:claim:{name}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ddl(layout: Layout) -> list[str]:
    schema = _quote(layout.schema)
    return [
        """CREATE TABLE reconcile_meta (key text PRIMARY KEY, value jsonb NOT NULL)""",
        """CREATE TABLE reconcile_objects (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            api_group text COLLATE "C" NOT NULL,
            kind text COLLATE "C" NOT NULL,
            namespace text COLLATE "C" NOT NULL,
            name text COLLATE "C" NOT NULL,
            uid text NOT NULL,
            resource_version bigint NOT NULL,
            live boolean NOT NULL,
            identity text,
            UNIQUE (api_group, kind, namespace, name),
            CONSTRAINT reconcile_one_declarer EXCLUDE USING btree
                (api_group WITH =, kind WITH =, identity WITH =)
                WHERE (live AND identity IS NOT NULL) DEFERRABLE INITIALLY DEFERRED
        )""",
        """CREATE TABLE reconcile_events (
            revision bigserial PRIMARY KEY,
            xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
            time double precision NOT NULL,
            object_id bigint NOT NULL,
            uid text NOT NULL,
            type text NOT NULL,
            actor text NOT NULL,
            body text,
            data text,
            "user" text
        )""",
        # Text compares by code point, as Python's strings (and SQLite's) do, whatever the
        # database's collation: lists page in the same order on both backends.
        "CREATE INDEX reconcile_events_by_object ON reconcile_events (object_id, revision)",
        """CREATE FUNCTION reconcile_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'events are append-only'; END $$""",
        """CREATE TRIGGER reconcile_events_append_only BEFORE UPDATE ON reconcile_events
        FOR EACH STATEMENT EXECUTE FUNCTION reconcile_append_only()""",
        # The transaction's id is assigned here, inside the lock, together with its
        # revisions: so a transaction with a lower id always holds lower revisions, which
        # is what lets a reader trust everything below its snapshot's xmin. The lock is a
        # session lock held for an instant, released even when something fails.
        f"""CREATE FUNCTION reconcile_reserve(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
        DECLARE first bigint;
        BEGIN
            PERFORM pg_advisory_lock({layout.reserve_key});
            BEGIN
                PERFORM pg_current_xact_id();
                first := nextval('{schema}.reconcile_events_revision_seq');
                IF n > 1 THEN
                    PERFORM setval('{schema}.reconcile_events_revision_seq', first + n - 1);
                END IF;
            EXCEPTION WHEN OTHERS THEN
                PERFORM pg_advisory_unlock({layout.reserve_key});
                RAISE;
            END;
            PERFORM pg_advisory_unlock({layout.reserve_key});
            RETURN first;
        END $$""",
    ]


async def read_layout(conn: Any, where: str) -> Layout:
    """The layout of the connection's current schema; StoreError when its search_path
    names no schema that exists."""
    schema = await conn.fetchval("SELECT current_schema()")
    if schema is None:
        raise StoreError(f"{where}: no schema of the search_path exists (create it, or drop ?search_path=)")
    return Layout(str(schema))


async def _tables(conn: Any) -> list[str]:
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1"
    )
    return [str(row[0]) for row in rows]


async def _meta(conn: Any, key: str) -> Any:
    value = await conn.fetchval("SELECT value FROM reconcile_meta WHERE key = $1", key)
    return None if value is None else orjson.loads(value)


async def _create(conn: Any, layout: Layout) -> None:
    """Version 1: the log, the projection, meta (the marker, the horizon, the store's
    identity and secret) and the revision reservation."""
    for statement in _ddl(layout):
        await conn.execute(statement)
    await conn.executemany(
        "INSERT INTO reconcile_meta (key, value) VALUES ($1, $2)",
        [
            ("application", orjson.dumps(APPLICATION).decode()),
            ("schema_version", "1"),
            ("horizon", "0"),
            ("identity", orjson.dumps(f"{secrets.randbits(63):016x}").decode()),
            ("mark_key", orjson.dumps(secrets.token_hex(32)).decode()),
        ],
    )


def _writers(layout: Layout) -> list[str]:
    """The statements of version 2 (see :mod:`.heading`)."""
    schema = _quote(layout.schema)
    key = layout.writer_key
    return [
        # As version 1's, and the transaction takes the shared writer lock before it has
        # an id: whoever can see its id can see the lock too.
        f"""CREATE OR REPLACE FUNCTION reconcile_reserve(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
        DECLARE first bigint;
        BEGIN
            PERFORM pg_advisory_lock({layout.reserve_key});
            BEGIN
                PERFORM pg_advisory_xact_lock_shared({key});
                PERFORM pg_current_xact_id();
                first := nextval('{schema}.reconcile_events_revision_seq');
                IF n > 1 THEN
                    PERFORM setval('{schema}.reconcile_events_revision_seq', first + n - 1);
                END IF;
            EXCEPTION WHEN OTHERS THEN
                PERFORM pg_advisory_unlock({layout.reserve_key});
                RAISE;
            END;
            PERFORM pg_advisory_unlock({layout.reserve_key});
            RETURN first;
        END $$""",
        f"""CREATE FUNCTION reconcile_safe_head() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
        DECLARE bound xid8;
        BEGIN
            {heading.bound_sql(key)}
            {heading.HEAD_SQL}
        END $$""",
    ]


async def _heading(conn: Any, layout: Layout) -> None:
    """Version 2: the safe head depends on this store's writers only, not on every
    transaction of the server (see :mod:`.heading`)."""
    for statement in _writers(layout):
        await conn.execute(statement)


async def _commits(conn: Any, _layout: Layout) -> None:
    """Version 3: ``reconcile_commits``, the idempotency key of each writer's latest
    commit, what finds out a commit whose answer was lost (see :mod:`.retrying`)."""
    await conn.execute(
        """CREATE TABLE reconcile_commits (
            token text PRIMARY KEY,
            first_revision bigint NOT NULL,
            last_revision bigint NOT NULL,
            time timestamptz NOT NULL DEFAULT clock_timestamp()
        )"""
    )


async def _leases(conn: Any, _layout: Layout) -> None:
    """Version 4: the shard lease tables (see :mod:`.leasing`), or those a runner of an
    earlier reconcile made, kept."""
    await leasing.create_tables(conn)


#: The schema, step by step: STEPS[n - 1] brings a store to version n, inside the one
#: transaction (holding the creation lock) that records the new version.
STEPS: Sequence[Step[Callable[[Any, Layout], Awaitable[None]]]] = check_steps(
    [
        Step(1, "the log, the projection, meta, the revision reservation", _create),
        Step(2, "the safe head from this store's writers (reconcile_safe_head)", _heading),
        Step(3, "reconcile_commits: each writer's latest idempotency key", _commits),
        Step(4, "the shard leases: reconcile_shards, reconcile_runners, reconcile_fenced", _leases),
    ]
)
#: The version this reconcile writes: the last step's.
SCHEMA_VERSION = latest(STEPS)


async def stored_version(conn: Any, where: str) -> int:
    """The schema version of the store in the connection's schema (0: no store there
    yet); StoreError, creating nothing, when the schema holds another application's
    tables or a store newer than this reconcile."""
    tables = await _tables(conn)
    if "reconcile_meta" not in tables:
        if tables:
            shown = ", ".join(tables[:_SHOWN]) + (", ..." if len(tables) > _SHOWN else "")
            raise StoreError(
                f"{where}: holds tables that are not reconcile's ({shown}); give reconcile an empty "
                "database, or a schema of its own (?search_path=NAME, the schema created first)"
            )
        return 0
    application = await _meta(conn, "application")
    if application != APPLICATION:
        raise StoreError(
            f"{where}: a reconcile_meta table, but not a reconcile store (application {application!r})"
        )
    version = await _meta(conn, "schema_version")
    if not isinstance(version, int) or version < 1:
        raise StoreError(f"{where}: reconcile_meta holds no schema version")
    return check_version(version, STEPS, where)


async def check_current(conn: Any, where: str) -> bool:
    """Whether the schema holds a reconcile store this version can use (False: nothing
    there yet); StoreError as :func:`stored_version` says."""
    return await stored_version(conn, where) > 0


async def check_exists(conn: Any, where: str) -> None:
    """For a read-only open: the schema holds a reconcile store this version can read."""
    if not await check_current(conn, where):
        raise StoreError(f"{where}: not a reconcile store (no reconcile_meta table)")


async def prepare(conn: Any, where: str) -> Layout:
    """Check the schema is ours, and create or upgrade the store in it (the pending
    steps, in one transaction); the layout."""
    layout = await read_layout(conn, where)
    if not pending(await stored_version(conn, where), STEPS, where):
        return layout
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", layout.create_key)
        # Read again under the lock: another process may have made or upgraded it meanwhile.
        steps = pending(await stored_version(conn, where), STEPS, where)
        for step in steps:
            await step.run(conn, layout)
        if steps:
            await conn.execute(
                "UPDATE reconcile_meta SET value = $1::jsonb WHERE key = 'schema_version'",
                str(steps[-1].version),
            )
    return layout
