"""``reconcile migrate``: a store's whole history copied between backends (SQLite to
PostgreSQL and back) through the store contract, checked by counts and checksums, the
copy then used like the original; and every refusal made with nothing written."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from test_cli import HEAD

from reconcile import ObjectKey
from reconcile.cli import main
from reconcile.store import RawEvent, Remove, open_store
from reconcile.store.contract import ObjectRecord, StoreHeader
from reconcile.store.copying import Checksums, CopyMismatchError, CopyRefusedError, check_copy, migrate


def run(db: str | Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``reconcile --db DB ARGS``: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["--db", str(db), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def dump(url: str | Path) -> tuple[StoreHeader, list[RawEvent], list[ObjectRecord], list[Any]]:
    """Everything a store holds, read through its snapshot: header, events (with their
    texts), projection rows."""
    store = await open_store(url, read_only=True)
    try:
        async with store.snapshot() as snapshot:
            events = [e async for batch in snapshot.events(5) for e in batch]
            objects = [o async for batch in snapshot.objects(5) for o in batch]
            header = snapshot.header
    finally:
        await store.close()
    texts = [(e.body_text, e.data_text) for e in events]
    return header, events, objects, texts


async def tables(url: str) -> list[str]:
    """The tables in the URL's schema."""
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        )
    finally:
        await connection.close()
    return [row[0] for row in rows]


async def _remove(db: Path, key: ObjectKey) -> None:
    """Remove an object for good (what the runner does once its finalizer is done)."""
    store = await open_store(db)
    try:
        await store.write(key, lambda current: Remove(current.body) if current else None, actor="test")
    finally:
        await store.close()


@pytest.fixture
def source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A SQLite store with a history: three files applied by two users, one changed
    twice, one deleted (a tombstone), labels, the provider settings apply remembers, and part of
    the history compacted away (a horizon, and gaps in the revisions)."""
    db = tmp_path / "source.db"
    folder = tmp_path / "manifests"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.yaml").write_text(
            HEAD.replace("name: x", f"name: {name}") + f"spec: {{path: {name}.txt, content: one}}\n"
        )
        assert run(db, "--as", "alice", "apply", "-f", str(folder / f"{name}.yaml"), capsys=capsys)[0] == 0
    for content in ("two", "three"):
        (folder / "a.yaml").write_text(
            HEAD.replace("name: x", "name: a") + f"spec: {{path: a.txt, content: {content}}}\n"
        )
        assert run(db, "--as", "bob", "apply", "-f", str(folder / "a.yaml"), capsys=capsys)[0] == 0
    assert run(db, "label", "file", "b", "tier=web", capsys=capsys)[0] == 0
    assert run(db, "delete", "file", "c", capsys=capsys)[0] == 0
    asyncio.run(_remove(db, ObjectKey("files.reconcile.dev", "File", "default", "c")))
    assert run(db, "compact", "--before", "3", "--yes", capsys=capsys)[0] == 0
    return db


class TestRoundTrip:
    """SQLite -> PostgreSQL -> SQLite, history intact."""

    def test_history_survives_both_ways(
        self, source: Path, tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Every event equal field by field (its stored texts too), the projection, head,
        horizon, identity, mark key and settings equal, checksums equal, verify ok on all
        three; the secret is printed nowhere."""
        back = tmp_path / "back.db"
        code, out, err = run(source, "migrate", "--to", postgres_url, "--batch", "2", capsys=capsys)
        assert code == 0, err
        assert "copying events:" in err
        assert "the copy verifies" in out
        code, out, err = run(postgres_url, "migrate", "--to", str(back), "--batch", "3", capsys=capsys)
        assert code == 0, err
        dumps = [asyncio.run(dump(url)) for url in (source, postgres_url, back)]
        first = dumps[0]
        assert first[0].horizon == 3
        assert first[0].settings
        assert first[0].mark_key
        assert first[0].events == len(first[1]) > 0
        assert first[0].objects == 3
        assert first[0].live == 2
        assert {e.user for e in first[1]} >= {"alice", "bob"}
        for other in dumps[1:]:
            assert other[0] == first[0]  # every field, the mark key included
            assert other[1] == first[1]  # RawEvent equality: every field, the bodies parsed
            assert other[2] == first[2]
            assert other[3] == first[3]
        sums = []
        for _, events, objects, _ in dumps:
            checksum = Checksums()
            checksum.add_events(events)
            checksum.add_objects(objects)
            sums.append((checksum.events, checksum.objects))
        assert len(set(sums)) == 1
        secret = first[0].mark_key.hex()
        for url in (source, postgres_url, back):
            code, out, err = run(url, "verify", "--deep", capsys=capsys)
            assert (code, out.splitlines()[-1]) == (
                0,
                "ok: the projection matches the log; every event decodes",
            )
            assert secret not in out + err

    def test_the_copy_is_used_like_the_original(
        self, source: Path, postgres_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """get, history and apply on the copy; the next revision continues from the
        source's head; a watch from the horizon replays the copied history."""
        head = asyncio.run(dump(source))[0].revision
        assert run(source, "migrate", "--to", postgres_url, capsys=capsys)[0] == 0
        code, out, _ = run(postgres_url, "get", "file", "a", "-o", "json", capsys=capsys)
        assert code == 0
        assert json.loads(out)["spec"]["content"] == "three"
        _, before, _ = run(source, "history", "file", "a", "-o", "json", capsys=capsys)
        code, after, _ = run(postgres_url, "history", "file", "a", "-o", "json", capsys=capsys)
        assert (code, json.loads(after)) == (0, json.loads(before))
        manifest = tmp_path / "manifests" / "a.yaml"
        manifest.write_text(HEAD.replace("name: x", "name: a") + "spec: {path: a.txt, content: four}\n")
        assert run(postgres_url, "apply", "-f", str(manifest), capsys=capsys)[0] == 0
        code, out, _ = run(postgres_url, "history", "file", "a", "-o", "json", capsys=capsys)
        events = json.loads(out)
        assert events[-1]["revision"] == head + 1
        assert events[:-1] == json.loads(before)
        assert run(postgres_url, "verify", capsys=capsys)[0] == 0

    def test_a_watch_on_the_copy_replays_the_history(
        self, source: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A watch on the copy from its horizon delivers the copied events, in order, then
        a bookmark at the copied head."""
        assert run(source, "migrate", "--to", postgres_url, capsys=capsys)[0] == 0
        header, events, _, _ = asyncio.run(dump(source))

        async def watched() -> tuple[list[RawEvent], int]:
            store = await open_store(postgres_url)
            seen: list[RawEvent] = []
            try:
                async for item in store.watch(since=header.horizon - 1):
                    if isinstance(item, RawEvent):
                        seen.append(item)
                    else:
                        return seen, item.revision
            finally:
                await store.close()
            raise AssertionError("the watch ended")

        seen, bookmark = asyncio.run(watched())
        assert seen == events
        assert bookmark == header.revision

    def test_a_write_during_the_copy_is_not_in_it(self, source: Path, tmp_path: Path) -> None:
        """An apply that commits to the source while the copy runs is wholly out of the
        copy (one snapshot), which still checks out; the report says the source moved on."""
        manifest = tmp_path / "manifests" / "late.yaml"
        manifest.write_text(HEAD.replace("name: x", "name: late") + "spec: {path: late.txt}\n")
        applied: list[int] = []

        def apply_once(stage: str, _done: int, _total: int) -> None:
            if stage == "events" and not applied:
                # Another process writes now, as a CLI would.
                command = [
                    sys.executable,
                    "-m",
                    "reconcile",
                    "--db",
                    str(source),
                    "apply",
                    "-f",
                    str(manifest),
                ]
                applied.append(subprocess.run(command, check=False, capture_output=True).returncode)

        target = tmp_path / "copy.db"
        header = asyncio.run(dump(source))[0]
        report = asyncio.run(migrate(source, target, batch=2, progress=apply_once))
        assert applied == [0]
        assert report.header.revision == header.revision
        assert report.source_moved >= 1
        copied = asyncio.run(dump(target))
        assert copied[0] == header
        assert "late" not in {o.key.name for o in copied[2]}

    def test_an_empty_store_copies(self, tmp_path: Path, postgres_url: str) -> None:
        """A store with nothing in it yet copies too (its identity and secret kept)."""

        async def scenario() -> None:
            empty = tmp_path / "empty.db"
            store = await open_store(empty)
            identity = await store.identity()
            await store.close()
            report = await migrate(empty, postgres_url)
            assert report.header.events == 0
            copy = await open_store(postgres_url)
            try:
                assert await copy.identity() == identity
                assert await copy.revision() == 0
            finally:
                await copy.close()

        asyncio.run(scenario())


class TestRefusals:
    """Bad input is refused by name, exit code 2, with nothing written."""

    def test_a_target_that_is_not_empty(
        self, source: Path, postgres_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """A store holding anything is named with what it holds, and left as it was."""
        manifest = tmp_path / "manifests" / "a.yaml"
        assert run(postgres_url, "apply", "-f", str(manifest), capsys=capsys)[0] == 0
        before = asyncio.run(dump(postgres_url))
        code, _, err = run(source, "migrate", "--to", postgres_url, capsys=capsys)
        assert code == 2
        assert "not empty: holds 1 events up to revision 1, 1 live objects (0 deleted)" in err
        assert asyncio.run(dump(postgres_url)) == before

    def test_another_applications_database(
        self, source: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A schema holding another application's tables is refused by name, untouched."""

        async def make() -> None:
            connection = await asyncpg.connect(postgres_url)
            try:
                await connection.execute("CREATE TABLE invoices (id int)")
            finally:
                await connection.close()

        asyncio.run(make())
        code, _, err = run(source, "migrate", "--to", postgres_url, capsys=capsys)
        assert code == 2
        assert "holds tables that are not reconcile's (invoices)" in err
        assert asyncio.run(tables(postgres_url)) == ["invoices"]

    def test_a_source_that_does_not_exist(
        self, tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No store at the source: refused, and the source is not created."""
        missing = tmp_path / "missing.db"
        code, _, err = run(missing, "migrate", "--to", postgres_url, capsys=capsys)
        assert (code, err.strip()) == (2, f"error: {missing}: no store there to copy")
        assert not missing.exists()
        assert asyncio.run(tables(postgres_url)) == []

    def test_the_same_store(self, source: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The source as the target, by the same path or another spelling of it."""
        before = source.read_bytes()
        code, _, err = run(source, "migrate", "--to", str(source), capsys=capsys)
        assert (code, "the source and the target are the same store" in err) == (2, True)
        other = f"sqlite:///{source.parent}/../{source.parent.name}/{source.name}"
        code, _, err = run(source, "migrate", "--to", other, capsys=capsys)
        assert (code, "has the identity of the source" in err) == (2, True)
        assert source.read_bytes() == before

    def test_a_copy_already_made(
        self, source: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Migrating twice into the same target: the second run finds the first's copy."""
        assert run(source, "migrate", "--to", postgres_url, capsys=capsys)[0] == 0
        code, _, err = run(source, "migrate", "--to", postgres_url, capsys=capsys)
        assert (code, "it is the same store, or a copy of it already" in err) == (2, True)

    @pytest.mark.parametrize(
        ("url", "said"),
        [
            ("postgresql://postgres:hunter2@127.0.0.1:99999/db", "malformed URL"),
            ("postgresql://postgres:hunter2@127.0.0.1:1/db", "cannot reach the server"),
            ("postgresql://postgres:hunter2@/db", "no host"),
            ("mysql://root:hunter2@127.0.0.1/db", "unsupported store URL scheme 'mysql'"),
        ],
    )
    def test_a_bad_target_url(
        self, source: Path, url: str, said: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Malformed, out of reach, no host, an unknown scheme: refused, the password masked."""
        code, out, err = run(source, "migrate", "--to", url, capsys=capsys)
        assert code == 2
        assert said in err
        assert "hunter2" not in out + err

    def test_a_runner_at_work(self, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A runner holding the source's runner lock: refused, naming the holder."""

        async def holding() -> tuple[int, str]:
            store = await open_store(source)
            claim = await store.claim("runner")
            try:
                return await asyncio.to_thread(
                    lambda: run(source, "migrate", "--to", str(tmp_path / "t.db"), capsys=capsys)[::2]
                )
            finally:
                claim.release()
                await store.close()

        code, err = asyncio.run(holding())
        assert code == 2
        assert "the source is in use" in err
        assert "holds the runner lock" in err
        assert not (tmp_path / "t.db").exists()

    def test_a_failed_copy_leaves_the_target_empty(self, source: Path, tmp_path: Path) -> None:
        """A failure in the middle of the copy rolls the target's transaction back: it is
        as empty as it was, and a second attempt succeeds."""
        target = tmp_path / "t.db"
        calls = []

        def failing(stage: str, done: int, total: int) -> None:
            calls.append(stage)
            if stage == "events":
                raise OSError("disk on fire")

        with pytest.raises(OSError, match="disk on fire"):
            asyncio.run(migrate(source, target, batch=2, progress=failing))
        header = asyncio.run(dump(target))[0]
        assert header.empty
        assert asyncio.run(migrate(source, target)).verified

    def test_a_copy_that_does_not_match_is_named(self, source: Path, tmp_path: Path) -> None:
        """Read back, a copy whose checksums differ from what was copied is a
        CopyMismatchError naming each difference (the secret never shown)."""
        target = tmp_path / "t.db"
        report = asyncio.run(migrate(source, target))

        async def check() -> None:
            store = await open_store(target, read_only=True)
            try:
                await check_copy(report.header, Checksums(), store)
            finally:
                await store.close()

        with pytest.raises(CopyMismatchError, match="events checksum: source") as caught:
            asyncio.run(check())
        assert "objects checksum" in str(caught.value)
        assert report.header.mark_key.hex() not in str(caught.value)

    def test_refusal_is_an_error_type(self, tmp_path: Path) -> None:
        """The library raises CopyRefusedError (a StoreError) for a refusal."""
        with pytest.raises(CopyRefusedError, match="no store there"):
            asyncio.run(migrate(tmp_path / "none.db", tmp_path / "t.db"))
