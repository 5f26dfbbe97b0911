"""Schema versions go through one mechanism on both backends: a list of numbered steps
per backend, the pending ones run in one transaction, a newer store refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from postgres_server import execute

from reconcile import SchemaVersionError, StoreError
from reconcile.store import open_store
from reconcile.store.postgres import schema as postgres_schema
from reconcile.store.schemas import Step, check_steps, check_version, latest, pending
from reconcile.store.sqlite import schema as sqlite_schema


def steps(n: int) -> list[Step[str]]:
    """Steps 1..n that do nothing."""
    return [Step(i, f"step {i}", f"run {i}") for i in range(1, n + 1)]


class TestSteps:
    """What runs, and what is refused, decided once for every backend."""

    def test_a_new_store_runs_every_step(self) -> None:
        """Version 0 (nothing there) needs every step, in order."""
        assert [s.version for s in pending(0, steps(3), "db")] == [1, 2, 3]

    def test_an_older_store_runs_the_steps_above_its_version(self) -> None:
        """A store at version 1 needs 2 and 3; at the latest, nothing."""
        assert [s.version for s in pending(1, steps(3), "db")] == [2, 3]
        assert pending(3, steps(3), "db") == []
        assert latest(steps(3)) == 3

    def test_a_newer_store_is_refused_by_name(self) -> None:
        """A version above the last step: SchemaVersionError naming the store and both versions."""
        with pytest.raises(
            SchemaVersionError, match=r"db: written by a newer reconcile \(schema version 4; "
        ):
            pending(4, steps(3), "db")
        with pytest.raises(StoreError, match="not a version"):
            check_version(-1, steps(3), "db")

    @pytest.mark.parametrize("numbers", [[1, 3], [2], [1, 1], [2, 1]])
    def test_steps_are_numbered_without_gaps(self, numbers: list[int]) -> None:
        """A list with a gap, a repeat or out of order is a programming error."""
        with pytest.raises(ValueError, match="numbered"):
            check_steps([Step(n, "", None) for n in numbers])

    def test_both_backends_declare_their_schema_as_steps(self) -> None:
        """Each backend's version is its last step's."""
        for module in (sqlite_schema, postgres_schema):
            assert latest(module.STEPS) == module.SCHEMA_VERSION
            check_steps(module.STEPS)


class TestPostgresUpgrade:
    """The PostgreSQL store is upgraded by the same mechanism as SQLite's."""

    async def test_a_store_at_an_older_version_is_upgraded_once(
        self, postgres_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A step 2 added: an existing version 1 store runs it on its next open, records
        version 2, keeps its data; the open after runs nothing."""
        store = await open_store(postgres_url)
        await store.remember("kept", {"a": 1})
        await store.close()
        runs: list[int] = []

        async def add_note(conn: Any, _layout: Any) -> None:
            runs.append(1)
            await conn.execute("ALTER TABLE reconcile_objects ADD COLUMN note text")

        step = Step(postgres_schema.SCHEMA_VERSION + 1, "reconcile_objects.note", add_note)
        monkeypatch.setattr(postgres_schema, "STEPS", [*postgres_schema.STEPS, step])
        for _ in range(2):
            store = await open_store(postgres_url)
            assert await store.remembered() == {"kept": {"a": 1}}
            await store.close()
        assert runs == [1]
        monkeypatch.setattr(postgres_schema, "STEPS", postgres_schema.STEPS[:-1])
        with pytest.raises(SchemaVersionError, match=f"schema version {step.version};"):
            await open_store(postgres_url)

    async def test_a_failed_step_leaves_the_store_as_it_was(
        self, postgres_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A step that fails rolls back with the others: the version stays, and the
        next open (the step fixed) runs it again."""
        store = await open_store(postgres_url)
        await store.close()

        async def broken(conn: Any, _layout: Any) -> None:
            await conn.execute("ALTER TABLE reconcile_objects ADD COLUMN note text")
            await conn.execute("SELECT no_such_function()")

        step = Step(postgres_schema.SCHEMA_VERSION + 1, "broken", broken)
        monkeypatch.setattr(postgres_schema, "STEPS", [*postgres_schema.STEPS, step])
        with pytest.raises(StoreError, match="no_such_function"):
            await open_store(postgres_url)
        location_version = await _stored(postgres_url)
        assert location_version == postgres_schema.SCHEMA_VERSION


#: The lease tables as reconcile made them, before schema version 4, at a store's first
#: renewal (and the shard rows and count it filled them with).
_OLD_STYLE_LEASES = (
    """CREATE TABLE IF NOT EXISTS reconcile_shards (
        shard integer PRIMARY KEY, holder text,
        epoch bigint NOT NULL DEFAULT 0, expires timestamptz NOT NULL DEFAULT '-infinity')""",
    """CREATE TABLE IF NOT EXISTS reconcile_runners (
        holder text PRIMARY KEY, about text NOT NULL, expires timestamptz NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS reconcile_fenced (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        time timestamptz NOT NULL DEFAULT clock_timestamp(),
        shard integer NOT NULL, epoch bigint NOT NULL, holder text NOT NULL,
        api_group text NOT NULL, kind text NOT NULL, namespace text NOT NULL,
        name text NOT NULL, actor text NOT NULL)""",
    "INSERT INTO reconcile_shards (shard) SELECT generate_series(0, 3)",
    "UPDATE reconcile_shards SET holder = 'old-runner', epoch = 7 WHERE shard = 2",
    """INSERT INTO reconcile_fenced (shard, epoch, holder, api_group, kind, namespace, name, actor)
    VALUES (1, 3, 'old-runner', 'g', 'K', 'ns', 'n', 'm')""",
    "INSERT INTO reconcile_meta (key, value) VALUES ('shards', '4')",
)
_LEASE_TABLES = {"reconcile_fenced", "reconcile_runners", "reconcile_shards"}


class TestPostgresLeaseTables:
    """The shard lease tables are schema step 4, as every other table."""

    async def test_a_new_store_has_them_empty(self, postgres_url: str) -> None:
        """A new store is at the last version and holds the lease tables; no runner
        asked for leases yet, so there is no shard table to show."""
        store = await open_store(postgres_url)
        try:
            assert await store.shard_table() is None
        finally:
            await store.close()
        assert await _stored(postgres_url) == postgres_schema.SCHEMA_VERSION >= 4
        assert set(await _tables(postgres_url)) >= _LEASE_TABLES

    @pytest.mark.parametrize("old_style", [False, True], ids=["without", "made-at-first-renewal"])
    async def test_a_version_3_store_is_upgraded(
        self, postgres_url: str, monkeypatch: pytest.MonkeyPatch, old_style: bool
    ) -> None:
        """A version 3 store gets the tables on its next open; one whose tables a runner
        made the old way keeps them, its shard count, leases and refusals included."""
        with monkeypatch.context() as patched:
            patched.setattr(postgres_schema, "STEPS", postgres_schema.STEPS[:3])
            store = await open_store(postgres_url)
            await store.close()
        assert await _stored(postgres_url) == 3
        assert not _LEASE_TABLES & set(await _tables(postgres_url))
        if old_style:
            await execute(postgres_url, *_OLD_STYLE_LEASES)
        store = await open_store(postgres_url)
        try:
            assert await _stored(postgres_url) == postgres_schema.SCHEMA_VERSION
            if old_style:
                table = await store.shard_table()
                assert table is not None
                assert [(s.shard, s.holder, s.epoch) for s in table.leases][2] == (2, "old-runner", 7)
                assert table.refused == 1
            leases = await store.lease_shards("new-runner", about="test", duration=30, shards=8)
            assert leases is not None
            assert leases.shards == (4 if old_style else 8)
        finally:
            await store.close()

    async def test_another_applications_tables_are_refused_and_nothing_made(self, postgres_url: str) -> None:
        """A schema holding one lease table by the same name, but no store: refused by
        name, nothing created (step 4 never runs there)."""
        await execute(postgres_url, "CREATE TABLE reconcile_shards (id int)")
        with pytest.raises(StoreError, match=r"holds tables that are not reconcile's \(reconcile_shards\)"):
            await open_store(postgres_url)
        assert await _tables(postgres_url) == ["reconcile_shards"]


async def _tables(url: str) -> list[str]:
    import asyncpg  # noqa: PLC0415

    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        )
        return [str(row[0]) for row in rows]
    finally:
        await connection.close()


async def _stored(url: str) -> int:
    """The schema version the store records."""
    import asyncpg  # noqa: PLC0415

    connection = await asyncpg.connect(url)
    try:
        return int(
            await connection.fetchval("SELECT value::int FROM reconcile_meta WHERE key = 'schema_version'")
        )
    finally:
        await connection.close()


def test_sqlite_new_store_is_at_the_last_step(tmp_path: Path) -> None:
    """A new SQLite store records the last step's version."""
    import asyncio  # noqa: PLC0415
    import sqlite3  # noqa: PLC0415

    async def make() -> None:
        store = await open_store(tmp_path / "s.db")
        await store.close()

    asyncio.run(make())
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == latest(
            sqlite_schema.STEPS
        )
