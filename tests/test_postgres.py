"""What the PostgreSQL backend adds to the store contract (which tests/test_store_contract.py
runs on both backends): a watch that never skips an event committed out of sequence
order, notifications across processes, the URL and its password, and bad input refused
by name with nothing created."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from helpers import settle
from postgres_cluster import cluster
from postgres_server import SERVER, Database, execute
from servers import free_port

from reconcile import Bookmark, LockedError, ObjectKey, Runtime, SchemaVersionError, StoreError
from reconcile.cli import main
from reconcile.store import Note, Put, RawEvent, StoredObject, locate_store, open_store
from reconcile.store.postgres import schema
from reconcile.store.postgres.addressing import masked
from reconcile.store.postgres.committing import PROVISIONAL
from reconcile.store.postgres.schema import SCHEMA_VERSION
from reconcile.store.watching import Tail
from reconcile.testing import FakeClock, MemoryCloud, MemoryProvider

ROOT = Path(__file__).parents[1]
KEY = ObjectKey("example.reconcile.dev", "Widget", "default", "w")


def body(name: str = "w", step: int = 0) -> dict[str, object]:
    """A minimal object body."""
    return {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {"step": step}}


async def tables(url: str) -> list[str]:
    """The tables in the URL's schema (what a refusal must leave as it was)."""
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        )
    finally:
        await connection.close()
    return [row[0] for row in rows]


class TestGapFreeWatch:
    """Sequence values commit out of order; a watch still sees every event once, in order."""

    def test_concurrent_writer_processes_and_watchers(self, postgres: Database) -> None:
        """4 writer processes, 3 watcher processes, 2,000 events: every watcher sees every
        event of the log exactly once and in revision order (the naive reader beside them,
        ``revision > cursor``, usually loses some: that is what is being prevented)."""
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "watch_gaps.py"),
                "--db",
                postgres.url,
                "--events",
                "2000",
                "--writers",
                "4",
                "--watchers",
                "3",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "providers")])},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads(result.stdout)
        assert report["events"] == 2000
        assert report["every_watcher_saw_every_event_once_in_order"]

    async def test_a_watch_waits_for_a_lower_revision_still_uncommitted(self, postgres_url: str) -> None:
        """A transaction holding revision 2 is still open when revision 3 commits: the
        watch stops at 1 and delivers 2 then 3 once the first commits."""
        store = await open_store(postgres_url)
        try:
            await store.write(KEY, lambda _c: Put("Created", body()), actor="t")
            # A transaction of another process that reserved revision 2 and has not committed.
            other = await asyncpg.connect(postgres_url)
            transaction = other.transaction()
            await transaction.start()
            assert await other.fetchval("SELECT reconcile_reserve(1)") == 2
            later = ObjectKey(KEY.api_group, KEY.kind, KEY.namespace, "later")
            result = await store.write(later, lambda _c: Put("Created", body("later")), actor="t")
            assert result.revision == 3
            assert await store.revision() == 1, "3 is committed, but 2 may still come"
            seen: list[int] = []

            async def watching() -> None:
                async for item in store.watch(since=0):
                    if isinstance(item, RawEvent):
                        seen.append(item.revision)
                    if len(seen) == 3:
                        return

            watch = asyncio.create_task(watching())
            await settle(lambda: bool(seen))
            assert seen == [1]
            object_id = await other.fetchval("SELECT id FROM reconcile_objects WHERE name = 'w'")
            await other.execute(
                "INSERT INTO reconcile_events (revision, time, object_id, uid, type, actor) "
                "VALUES (2, 0, $1, 'u-w', 'Noted', 'other')",
                object_id,
            )
            await other.execute("SELECT pg_notify($1, '2')", store._layout.channel)  # type: ignore[attr-defined]
            await transaction.commit()
            await other.close()
            async with asyncio.timeout(10):
                await watch
            assert seen == [1, 2, 3]
        finally:
            await store.close()

    async def test_another_process_commit_wakes_a_watch_by_notification(self, postgres_url: str) -> None:
        """A write through a second store (another process's, as far as the database
        knows) reaches a waiting watch long before the slow poll would."""
        watcher = await open_store(postgres_url, poll_interval=(60.0, 60.0))
        writer = await open_store(postgres_url)
        try:
            stream = aiter(watcher.watch(since=0))
            assert await anext(stream) == Bookmark(0)
            await writer.write(KEY, lambda _c: Put("Created", body()), actor="t")
            async with asyncio.timeout(10):  # the poll would take 60 s
                event = await anext(stream)
            assert isinstance(event, RawEvent)
            assert event.revision == 1
        finally:
            await writer.close()
            await watcher.close()


@contextlib.asynccontextmanager
async def foreign_transactions(postgres_url: str) -> AsyncIterator[list[int]]:
    """Two long transactions of other applications, open until the block ends, each
    holding a transaction id: one in another database (``postgres``), one in this store's
    database that creates a table of its own in another schema. Yields their ids."""
    elsewhere = await asyncpg.connect(f"{SERVER}/postgres")
    here = await asyncpg.connect(postgres_url.split("?", maxsplit=1)[0])
    try:
        ids = []
        for connection, statement in (
            (elsewhere, "SELECT 1"),
            (here, "CREATE TABLE public.another_application (x int)"),
        ):
            await connection.execute("BEGIN")
            await connection.execute(statement)
            ids.append(int(await connection.fetchval("SELECT pg_current_xact_id()::text")))
        yield ids
    finally:
        for connection in (elsewhere, here):
            await connection.execute("ROLLBACK")
            await connection.close()


class TestSafeHead:
    """The safe head depends on this store's writers only, never on the server's other
    transactions."""

    async def test_an_unrelated_long_transaction_holds_no_watch_back(self, postgres_url: str) -> None:
        """Transactions of other applications (another database; the same database,
        another schema) open and holding ids below our commits: ``revision()``, a list
        and a watch in another store instance (another process, as far as the database
        knows) still reach every commit at once."""
        store = await open_store(postgres_url)
        watcher = await open_store(postgres_url, poll_interval=(60.0, 60.0))
        try:
            async with foreign_transactions(postgres_url) as ids:
                stream = aiter(watcher.watch(since=0))
                assert await anext(stream) == Bookmark(0)
                result = await store.write(KEY, lambda _c: Put("Created", body()), actor="t")
                ours = await store._writes.link.connection.fetchval(  # type: ignore[attr-defined]
                    "SELECT xid::text::bigint FROM reconcile_events WHERE revision = $1", result.revision
                )
                assert max(ids) < ours, "the foreign transactions are older than our commit"
                assert await store.revision() == result.revision
                assert await watcher.revision() == result.revision
                assert (await watcher.list(KEY.api_group, KEY.kind)).revision == result.revision
                async with asyncio.timeout(10):  # the poll would take 60 s
                    event = await anext(stream)
                assert isinstance(event, RawEvent)
                assert event.revision == result.revision
        finally:
            await watcher.close()
            await store.close()

    async def test_a_stalled_writer_of_the_store_still_holds_readers_below_it(
        self, postgres_url: str
    ) -> None:
        """With a foreign transaction open too: a transaction of another process that
        reserved revision 2 and has not ended holds ``revision()`` and a list at 1 while 3
        has committed; once it ends, the head is 3 though the foreign one is still open."""
        store = await open_store(postgres_url)
        other = await asyncpg.connect(postgres_url)
        try:
            async with foreign_transactions(postgres_url):
                await store.write(KEY, lambda _c: Put("Created", body()), actor="t")
                transaction = other.transaction()
                await transaction.start()
                assert await other.fetchval("SELECT reconcile_reserve(1)") == 2
                later = ObjectKey(KEY.api_group, KEY.kind, KEY.namespace, "later")
                result = await store.write(later, lambda _c: Put("Created", body("later")), actor="t")
                assert result.revision == 3
                assert await store.revision() == 1, "3 is committed, but 2 may still come"
                assert (await store.list(KEY.api_group, KEY.kind)).revision == 1
                await transaction.rollback()
                assert await store.revision() == 3
        finally:
            await other.close()
            await store.close()

    async def test_a_version_1_store_is_upgraded_to_the_writers_head(
        self, postgres_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A store made at schema version 1 (the cluster-wide head) opens at the current
        version with its events, and a foreign transaction no longer holds it back."""
        monkeypatch.setattr(schema, "STEPS", schema.STEPS[:1])
        connection = await asyncpg.connect(postgres_url)
        try:
            await schema.prepare(connection, "old")
            assert await connection.fetchval("SELECT reconcile_reserve(1)") == 1
            await connection.execute("INSERT INTO reconcile_meta VALUES ('setting:kept', '1')")
        finally:
            await connection.close()
        monkeypatch.undo()
        store = await open_store(postgres_url)
        try:
            assert await store.remembered() == {"kept": 1}
            async with foreign_transactions(postgres_url):
                result = await store.write(KEY, lambda _c: Put("Created", body()), actor="t")
                assert result.revision == 2
                assert await store.revision() == 2
        finally:
            await store.close()


async def test_the_capped_tail_reads_below_our_reserved_revisions() -> None:
    """While our commit holds revisions from 5 on, a head read is cut to 4; once it ends,
    the head read stands."""
    heads = {"head": 7}

    async def read_head() -> int:
        return heads["head"]

    tail = Tail(read_head, fast=60, slow=60, capped=True)
    with tail.local_commit():
        tail.reserved(5)
        await tail.refresh()
        assert tail.head == 4
        assert tail.readable(7) == 4
    await tail.refresh()
    assert tail.head == 7
    await tail.close()


class TestCommit:
    """What one commit writes on PostgreSQL."""

    async def test_a_body_holding_the_provisional_revision_keeps_it(self, postgres_url: str) -> None:
        """A body whose spec holds ``resourceVersion`` with the very number the commit
        numbers it with before its revision is known keeps that value; only the
        metadata's becomes the real revision (stored, returned and read back)."""
        store = await open_store(postgres_url)
        try:
            value = {"metadata": {"name": "w", "uid": "u-w"}, "spec": {"resourceVersion": PROVISIONAL}}
            result = await store.write(KEY, lambda _c: Put("Created", value), actor="t")
            assert result.object is not None
            for stored in (result.object, await store.read(KEY)):
                assert stored is not None
                assert stored.body["metadata"]["resourceVersion"] == result.revision == 1
                assert stored.body["spec"] == {"resourceVersion": PROVISIONAL}
        finally:
            await store.close()

    async def test_creates_updates_and_notes_in_one_commit(self, postgres_url: str) -> None:
        """One batch that creates two keys, updates a third and notes on a fourth: each
        event points at its own object's row, and every row at its latest event."""
        store = await open_store(postgres_url)
        try:
            keys = [ObjectKey(KEY.api_group, KEY.kind, KEY.namespace, f"k{i}") for i in range(4)]
            for key in keys[2:]:
                await store.write(key, lambda _c, k=key: Put("Created", body(k.name)), actor="t")
            futures = store.submit_many(
                [
                    (keys[0], lambda _c: Put("Created", body("k0"))),
                    (keys[2], lambda _c: Put("Changed", body("k2", step=1))),
                    (keys[1], lambda _c: Put("Created", body("k1"))),
                    (keys[3], lambda _c: Note("Noted", {"n": 1})),
                ],
                actor="t",
            )
            results = await asyncio.gather(*futures)
            assert [r.revision for r in results] == [3, 4, 5, 6]
            for key, types in zip(
                keys, (["Created"], ["Created"], ["Created", "Changed"], ["Created", "Noted"]), strict=True
            ):
                assert [e.type for e in await store.events(key)] == types
            current = await store.read(keys[2])
            assert current is not None
            assert (current.resource_version, current.body["spec"]) == (4, {"step": 1})
            assert (await store.verify()).ok
        finally:
            await store.close()


class TestSeveralProcesses:
    """Two stores on one database stand for two processes: their writes meet in the
    database, and the mutations stay atomic."""

    async def test_concurrent_increments_of_one_key_are_never_lost(self, postgres_url: str) -> None:
        """Each store increments one counter 40 times, concurrently: every increment
        lands (a batch that met the other's write runs again on the current row)."""
        first, second = await open_store(postgres_url), await open_store(postgres_url)

        def increment(current: StoredObject | None) -> Put:
            count = 0 if current is None else current.body["spec"]["count"]
            return Put("SpecChanged", {"metadata": {"name": "w", "uid": "u-w"}, "spec": {"count": count + 1}})

        try:
            await asyncio.gather(
                *(s.write(KEY, increment, actor="t") for _ in range(40) for s in (first, second))
            )
            stored = await first.read(KEY)
            assert stored is not None
            assert stored.body["spec"]["count"] == 80
            assert (await first.verify()).ok
        finally:
            await first.close()
            await second.close()

    async def test_one_identity_one_declarer_across_processes(self, postgres_url: str) -> None:
        """Two stores declare the same external resource from two keys at once: one
        wins, the other is refused naming it."""
        stores = [await open_store(postgres_url) for _ in range(2)]
        try:
            keys = [ObjectKey(KEY.api_group, KEY.kind, "default", f"k{i}") for i in range(2)]
            outcomes = await asyncio.gather(
                *(
                    s.write(k, lambda _c, k=k: Put("Created", body(k.name), identity="bucket/x"), actor="t")
                    for s, k in zip(stores, keys, strict=True)
                ),
                return_exceptions=True,
            )
            refused = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(refused) == 1
            assert "bucket/x is already declared by" in str(refused[0])
        finally:
            for store in stores:
                await store.close()

    async def test_a_second_runtime_fails_naming_the_first(self, postgres_url: str) -> None:
        """The Runtime's runner lock on PostgreSQL: LockedError naming the holder; once
        the first closes, another starts."""
        clock = FakeClock()

        def runtime() -> Runtime:
            return Runtime(
                postgres_url,
                providers=[MemoryProvider(MemoryCloud(clock=clock))],
                clock=clock,
                wall_clock=clock,
            )

        async with runtime():
            second = runtime()
            with pytest.raises(LockedError, match=r"pid \d+ on .* holds the runner lock"):
                await second.start()
        async with runtime() as third:
            assert third.controllers


class TestClaims:
    """The runner lock is a session advisory lock."""

    async def test_a_second_claim_names_the_holder_and_a_release_frees_it(self, postgres_url: str) -> None:
        """LockedError with the holder's pid and host; released (or its process gone),
        the next claim succeeds."""
        store = await open_store(postgres_url)
        try:
            held = await store.claim("runner")
            with pytest.raises(LockedError, match=rf"pid {os.getpid()} on .* holds the runner lock"):
                await store.claim("runner")
            held.release()
            held.release()
            again = await store.claim("runner")
            again.release()
        finally:
            await store.close()


class TestURLs:
    """The URL picks the backend; the password is never shown."""

    def test_the_password_is_masked(self) -> None:
        """In the URL as shown, and in a query-string password too."""
        assert (
            masked("postgresql://postgres:s3cret@127.0.0.1:5432/db")
            == "postgresql://postgres:***@127.0.0.1:5432/db"
        )
        assert masked("postgres://u@h/db?password=s3cret&sslmode=require") == (
            "postgres://u@h/db?password=***&sslmode=require"
        )

    async def test_the_store_url_masks_the_password(self, postgres: Database) -> None:
        """``store.url`` and ``locate_store(...).where`` never hold the password."""
        url = postgres.new_url().replace("postgres@", "postgres:s3cret@")
        store = await open_store(url)
        try:
            assert "s3cret" not in store.url
            assert ":***@" in store.url
        finally:
            await store.close()
        location = locate_store(url)
        assert "s3cret" not in location.where
        assert location.exists()
        assert location.stored_schema() == SCHEMA_VERSION
        assert location.size() > 0

    async def test_asyncpg_options_pass_through(self, postgres_url: str) -> None:
        """Several hosts and asyncpg's own options in the query string reach asyncpg."""
        url = postgres_url.replace("@127.0.0.1:5432/", "@127.0.0.1:5432,127.0.0.1:5432/")
        store = await open_store(f"{url}&target_session_attrs=any&sslmode=disable")
        try:
            assert await store.revision() == 0
        finally:
            await store.close()

    @pytest.mark.usefixtures("postgres")  # skipped with the others when there is no server
    def test_a_missing_database_is_no_store(self) -> None:
        """locate_store on a database that does not exist: nothing there, nothing made."""
        location = locate_store(f"{SERVER}/reconcile_no_such_database")
        assert not location.exists()
        assert location.live_names("g", "K", "default") == []


class TestBadInput:
    """Refused with the reason and the password masked; nothing created."""

    async def test_unreachable(self) -> None:
        """A port nobody listens on."""
        url = f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/db"
        with pytest.raises(StoreError, match=r"cannot reach the server") as caught:
            await open_store(url)
        assert "s3cret" not in str(caught.value)
        assert ":***@127.0.0.1" in str(caught.value)

    @pytest.mark.parametrize(
        ("url", "message"),
        [
            ("postgresql://postgres:s3cret@127.0.0.1:notaport/db", "malformed URL"),
            ("postgresql://postgres:s3cret@127.0.0.1:99999/db", "malformed URL"),
            ("postgresql://postgres:s3cret@127.0.0.1/db?sslmode=sometimes", "sslmode"),
            ("postgresql:///db", "no host"),
            ("mysql://root:s3cret@127.0.0.1/db", "unsupported store URL scheme 'mysql'"),
        ],
    )
    async def test_malformed_urls(self, url: str, message: str) -> None:
        """A URL that cannot work says why, without its password."""
        with pytest.raises(StoreError, match=message) as caught:
            await open_store(url)
        assert "s3cret" not in str(caught.value)

    async def test_another_applications_database(self, postgres_url: str) -> None:
        """A schema with tables that are not ours is refused by name and left alone."""
        await execute(postgres_url, "CREATE TABLE invoices (id int)")
        with pytest.raises(StoreError, match=r"holds tables that are not reconcile's \(invoices\)"):
            await open_store(postgres_url)
        assert await tables(postgres_url) == ["invoices"]

    async def test_a_foreign_meta_table(self, postgres_url: str) -> None:
        """A reconcile_meta table without our marker is not a store of ours."""
        await execute(
            postgres_url,
            "CREATE TABLE reconcile_meta (key text PRIMARY KEY, value jsonb NOT NULL)",
            """INSERT INTO reconcile_meta VALUES ('application', '"billing"')""",
        )
        with pytest.raises(StoreError, match="not a reconcile store"):
            await open_store(postgres_url)
        assert await tables(postgres_url) == ["reconcile_meta"]

    async def test_newer_schema(self, postgres_url: str) -> None:
        """A store written by a newer reconcile is refused, untouched."""
        store = await open_store(postgres_url)
        await store.close()
        await execute(
            postgres_url,
            f"UPDATE reconcile_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'",  # noqa: S608 - a number of ours
        )
        with pytest.raises(SchemaVersionError, match="written by a newer reconcile"):
            await open_store(postgres_url)

    async def test_read_only_open_of_an_empty_schema_creates_nothing(self, postgres_url: str) -> None:
        """``read_only`` (the commands that only read) never makes the tables."""
        with pytest.raises(StoreError, match="not a reconcile store"):
            await open_store(postgres_url, read_only=True)
        assert await tables(postgres_url) == []

    async def test_wrong_password(self, scram_server: str) -> None:
        """A server that checks passwords: the wrong one is refused, and not shown."""
        url = scram_server.replace(":right@", ":wrong@")
        with pytest.raises(StoreError, match="authentication failed") as caught:
            await open_store(url)
        assert "wrong" not in str(caught.value)
        store = await open_store(scram_server)  # the right one works
        await store.close()


@pytest.fixture(scope="module")
def scram_server() -> Iterator[str]:
    """A throwaway cluster that checks passwords (scram-sha-256); its URL with the right
    password."""
    with cluster("the wrong-password test", auth="scram-sha-256", password="right") as made:  # noqa: S106 - a test cluster's
        yield made.url


SITE = """\
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: index}
spec: {path: index.html, content: "<h1>Hello</h1>\\n"}
"""


def test_the_command_line_on_postgres(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RECONCILE_DB=postgresql://...``: apply, run --once, get, history and verify work
    unchanged, and no output holds the password; an unreachable server exits non-zero
    with the password masked."""
    monkeypatch.setenv("RECONCILE_DB", postgres_url.replace("postgres@", "postgres:s3cret@"))
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "site.yaml").write_text(SITE)

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--root", str(site), *args])
        captured = capsys.readouterr()
        assert "s3cret" not in captured.out + captured.err
        return code, captured.out + captured.err

    assert run("apply", "-f", str(tmp_path / "site.yaml")) == (0, "file.files.reconcile.dev/index created\n")
    code, _ = run("run", "--once", "--timeout", "60")
    assert code == 0
    assert (site / "index.html").read_text() == "<h1>Hello</h1>\n"
    code, out = run("get", "file")
    assert code == 0
    assert "index" in out
    code, out = run("history", "file/index")
    assert code == 0
    assert "CreateSucceeded" in out
    assert run("verify")[0] == 0
    monkeypatch.setenv("RECONCILE_DB", f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/db")
    code, out = run("get", "file")
    assert code != 0
    assert "postgres:***@127.0.0.1" in out
