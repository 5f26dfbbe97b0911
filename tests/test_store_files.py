"""Opening database files: what is not ours, or not current, is refused and left untouched."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

import pytest

from reconcile import Bookmark, CorruptError, ObjectKey, SchemaVersionError, StoreError, connect
from reconcile.store import Put, SQLiteStore, open_store
from reconcile.store.sqlite import schema
from reconcile.testing import example_kinds


def digest(path: Path) -> str:
    """The file's content hash."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestRefusedFiles:
    """Each refusal names the file and changes nothing in it."""

    async def test_not_sqlite(self, tmp_path: Path) -> None:
        """A text file is refused as not a SQLite database."""
        path = tmp_path / "notes.db"
        path.write_text("hello, I am not a database\n" * 100)
        before = digest(path)
        with pytest.raises(StoreError, match=r"notes\.db: not a SQLite database"):
            await open_store(path)
        assert digest(path) == before

    async def test_corrupt(self, tmp_path: Path) -> None:
        """A file with a SQLite header and garbage after it is refused as corrupt."""
        path = tmp_path / "corrupt.db"
        path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)
        before = digest(path)
        with pytest.raises(StoreError, match=r"corrupt\.db: corrupt or not a SQLite database"):
            await open_store(path)
        assert digest(path) == before

    async def test_other_application(self, tmp_path: Path) -> None:
        """A SQLite database of another application is refused, not adopted."""
        path = tmp_path / "other.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
        conn.close()
        before = digest(path)
        with pytest.raises(StoreError, match="not a reconcile store"):
            await open_store(path)
        assert digest(path) == before

    async def test_newer_schema(self, tmp_path: Path) -> None:
        """A database written by a newer schema version is refused and left as it was."""
        path = tmp_path / "future.db"
        store = await open_store(path)
        await store.close()
        conn = sqlite3.connect(path)
        conn.execute("UPDATE reconcile_schema SET version = ?", (schema.SCHEMA_VERSION + 1,))
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        before = digest(path)
        with pytest.raises(SchemaVersionError, match=r"future\.db: written by a newer reconcile"):
            await open_store(path)
        assert digest(path) == before

    async def test_directory_and_missing_parent(self, tmp_path: Path) -> None:
        """A directory, or a path in a missing directory, is refused with the path."""
        with pytest.raises(StoreError, match="is a directory"):
            await open_store(tmp_path)
        with pytest.raises(StoreError, match="does not exist"):
            await open_store(tmp_path / "nope" / "state.db")

    @pytest.mark.parametrize(
        ("url", "message"),
        [
            ("mysql://localhost/x", "unsupported store URL scheme"),
            ("sqlite://host/x.db", "no host"),
            ("sqlite:///x.db?fsync=1", "unknown option 'fsync'"),
            ("sqlite:///x.db?busy_timeout=soon", "invalid value"),
            ("sqlite:///x.db?cache_mib=lots", "invalid value"),
            ("sqlite:///x.db?cache_mib=0", "cache_mib must be a whole number of MiB, at least 1"),
        ],
    )
    async def test_bad_urls(self, url: str, message: str) -> None:
        """A URL the store cannot use says why."""
        with pytest.raises(StoreError, match=message):
            await open_store(url)

    def test_bad_synchronous(self, tmp_path: Path) -> None:
        """An unknown synchronous level is refused."""
        with pytest.raises(StoreError, match="synchronous"):
            SQLiteStore(tmp_path / "x.db", synchronous="SOMETIMES")


class TestOpening:
    """Opening and reopening."""

    async def test_cache_size_from_the_url(self, tmp_path: Path) -> None:
        """cache_mib sets SQLite's page cache of both connections (64 MiB by default)."""
        store = await open_store(f"sqlite:///{tmp_path}/c.db?cache_mib=16")
        try:
            assert isinstance(store, SQLiteStore)
            for conn in (store._writer, store._reader):
                assert conn is not None
                rows = await conn.execute_fetchall("PRAGMA cache_size")
                assert list(rows) == [(-16 * 1024,)]
        finally:
            await store.close()
        async with SQLiteStore(tmp_path / "d.db") as default:
            assert default.cache_mib == 64

    async def test_reopen_keeps_everything(self, tmp_path: Path) -> None:
        """Objects and history survive closing and reopening the file."""
        url = f"sqlite:///{tmp_path}/state.db?synchronous=NORMAL"
        manifest = {
            "apiVersion": "example.reconcile.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        }
        async with connect(url, kinds=example_kinds()) as client:
            await client.apply(manifest)
        async with connect(url, kinds=example_kinds()) as client:
            assert (await client.get("widget", "w")).spec.size == 1
            assert await client.revision() == 1
            assert (await client.verify()).ok

    async def test_url_forms(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """sqlite:///relative, sqlite:////absolute and plain paths all name files."""
        monkeypatch.chdir(tmp_path)
        for url in ("sqlite:///rel.db", f"sqlite:///{tmp_path}/abs.db", "plain.db"):
            store = await open_store(url)
            await store.close()
        assert {p.name for p in tmp_path.glob("*.db")} == {"rel.db", "abs.db", "plain.db"}

    async def test_closed_store_refuses_writes(self, tmp_path: Path) -> None:
        """Writing to a closed store is a StoreError, not a hang."""
        store = await open_store(tmp_path / "s.db")
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await store.write(None, lambda _: None, actor="x")  # type: ignore[arg-type]


class TestMigration:
    """The schema-version table drives migrations."""

    async def test_older_schema_is_migrated(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A database at version N is upgraded to N+1 in one transaction, data intact."""
        path = tmp_path / "old.db"
        async with connect(path, kinds=example_kinds()) as client:
            await client.apply(
                {
                    "apiVersion": "example.reconcile.dev/v1",
                    "kind": "Widget",
                    "metadata": {"name": "w"},
                    "spec": {"size": 1},
                }
            )

        def add_column(conn: sqlite3.Connection) -> None:
            conn.execute("ALTER TABLE objects ADD COLUMN note TEXT")

        monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1)
        monkeypatch.setitem(schema.MIGRATIONS, schema.SCHEMA_VERSION - 1, add_column)
        async with connect(path, kinds=example_kinds()) as client:
            assert (await client.get("widget", "w")).spec.size == 1
            assert (await client.verify()).ok
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == schema.SCHEMA_VERSION
        assert "note" in [row[1] for row in conn.execute("PRAGMA table_info(objects)")]
        conn.close()

    async def test_the_store_identity_is_made_once_and_kept(self, tmp_path: Path) -> None:
        """A new store has an identity (16 hex digits) that stays across reopens; a store
        of schema version 2 gets one when first opened read-write; opened read-only, an
        old one reads as empty and nothing is written."""
        path = tmp_path / "new.db"
        async with connect(path, kinds=example_kinds()) as client:
            first = await client.engine.store_identity()
        async with connect(path, kinds=example_kinds()) as client:
            assert await client.engine.store_identity() == first
        assert len(first) == 16
        int(first, 16)
        with contextlib.closing(sqlite3.connect(path)) as conn:  # back to version 2
            conn.execute("DELETE FROM meta WHERE key = 'identity'")
            conn.execute("UPDATE reconcile_schema SET version = 2")
            conn.commit()
        async with connect(path, kinds=example_kinds(), read_only=True) as client:
            assert await client.engine.store_identity() == ""
        with contextlib.closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == 2
        async with connect(path, kinds=example_kinds()) as client:
            migrated = await client.engine.store_identity()
        assert len(migrated) == 16
        assert migrated != first, "a new identity: the old one was gone"
        with contextlib.closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == schema.SCHEMA_VERSION

    async def test_the_mark_key_is_made_once_kept_and_never_in_the_log(self, tmp_path: Path) -> None:
        """A new store has a secret of 32 random bytes that stays across reopens, is in no
        event and no other store's; a store of schema version 3 gets one when first opened
        read-write, and reads as empty opened read-only, nothing written."""
        path, other = tmp_path / "new.db", tmp_path / "other.db"
        async with connect(path, kinds=example_kinds()) as client:
            first = await client.engine.store_mark_key()
            await client.apply(
                {
                    "apiVersion": "example.reconcile.dev/v1",
                    "kind": "Widget",
                    "metadata": {"name": "w"},
                    "spec": {"size": 1},
                }
            )
        async with connect(path, kinds=example_kinds()) as client:
            assert await client.engine.store_mark_key() == first
        async with connect(other, kinds=example_kinds()) as client:
            assert await client.engine.store_mark_key() != first
        assert len(first) == 32
        with contextlib.closing(sqlite3.connect(path)) as conn:
            for row in conn.execute("SELECT body, data FROM events"):
                assert first.hex() not in str(row)
                assert first not in str(row).encode()
            conn.execute("DELETE FROM meta WHERE key = 'mark_key'")  # back to version 3
            conn.execute("UPDATE reconcile_schema SET version = 3")
            conn.commit()
        async with connect(path, kinds=example_kinds(), read_only=True) as client:
            assert await client.engine.store_mark_key() == b""
        async with connect(path, kinds=example_kinds()) as client:
            migrated = await client.engine.store_mark_key()
        assert len(migrated) == 32
        assert migrated != first

    async def test_events_record_the_user_from_version_5(self, tmp_path: Path) -> None:
        """Events carry who asked for the write beside the field manager (version 5): a
        store of version 4 reads them as None opened read-only, nothing written, and is
        migrated when opened read-write; watches served from memory carry the user too."""
        path = tmp_path / "old.db"
        widget = {
            "apiVersion": "example.reconcile.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        }
        async with connect(path, kinds=example_kinds()) as client:
            await client.apply(widget)
        with contextlib.closing(sqlite3.connect(path)) as conn:  # back to version 4
            conn.execute("ALTER TABLE events DROP COLUMN user")
            conn.execute("UPDATE reconcile_schema SET version = 4")
            conn.commit()
        async with connect(path, kinds=example_kinds(), read_only=True) as client:
            [event] = await client.history("widget", "w")
            assert (event.actor, event.user) == ("reconcile", None)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == 4
        async with connect(path, kinds=example_kinds(), manager="deployer", user="alice@laptop") as client:
            await client.apply({**widget, "spec": {"size": 2}}, force=True)  # the size "reconcile" set
            events = await client.history("widget", "w")
            assert [(e.actor, e.user) for e in events] == [("reconcile", None), ("deployer", "alice@laptop")]
            async with contextlib.aclosing(client.store.watch(since=1)) as watch:
                raw = await anext(watch)
            assert (raw.actor, raw.user) == ("deployer", "alice@laptop")  # type: ignore[union-attr]

    async def test_failed_migration_leaves_the_database(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A migration that fails rolls back: the version and tables stay as they were."""
        path = tmp_path / "old.db"
        store = await open_store(path)
        await store.close()

        def broken(conn: sqlite3.Connection) -> None:
            conn.execute("ALTER TABLE objects ADD COLUMN note TEXT")
            conn.execute("SELECT no_such_function()")

        monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1)
        monkeypatch.setitem(schema.MIGRATIONS, schema.SCHEMA_VERSION - 1, broken)
        with pytest.raises(StoreError, match=r"old\.db: migration to schema version"):
            await open_store(path)
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == schema.SCHEMA_VERSION - 1
        assert "note" not in [row[1] for row in conn.execute("PRAGMA table_info(objects)")]
        conn.close()


async def test_watch_parses_a_body_only_when_it_is_read(tmp_path: Path) -> None:
    """Another process's store reads the events from the file: a body is parsed when it
    is read, not before, so a watcher that drops an event it holds already never parses
    it (here: an event whose stored body was damaged is streamed without an error, and
    reading its body is the CorruptError naming it)."""
    path = tmp_path / "shared.db"
    key = ObjectKey("example.reconcile.dev", "Widget", "default", "w")
    async with SQLiteStore(path) as writer:
        for size in (1, 2):
            body = {"apiVersion": "example.reconcile.dev/v1", "kind": "Widget"}
            body |= {"metadata": {"name": "w", "uid": "u1"}, "spec": {"size": size}}
            await writer.write(key, lambda _current, body=body: Put("Created", body), actor="t")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        # Damage on disk, as a flipped byte would do (the log refuses updates otherwise).
        conn.execute("DROP TRIGGER events_append_only")
        conn.execute("UPDATE events SET body = '{\"metadata\": ' WHERE revision = 1")
    async with SQLiteStore(path) as reader:
        events = []
        async for item in reader.watch():
            if isinstance(item, Bookmark):
                break
            events.append(item)
    assert [(e.revision, e.has_body) for e in events] == [(1, True), (2, True)]
    assert events[1].body is not None
    assert events[1].body["spec"] == {"size": 2}
    with pytest.raises(CorruptError, match="event 1 "):
        _ = events[0].body
