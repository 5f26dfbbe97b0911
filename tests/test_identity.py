"""One external resource, one object: a second object of a kind declaring the identity
(``Kind.identity``: a File's path) another already declares is refused at apply, naming
both, through the Python API, in one group-commit batch, and through the CLI; and the
store migrates a version 1 database to the identity column."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from reconcile import InvalidError, NotFoundError, connect
from reconcile.cli import main
from reconcile.model.external import FINALIZER
from reconcile.store.sqlite import schema

API = "files.reconcile.dev/v1"
HELLO = f"apiVersion: {API}\nkind: File\nmetadata: {{name: hello}}\nspec: {{path: index.html}}\n"


def file_manifest(name: str, path: str) -> dict[str, Any]:
    """A File at ``path``."""
    return {"apiVersion": API, "kind": "File", "metadata": {"name": name}, "spec": {"path": path}}


@pytest.fixture
def config(tmp_path: Path) -> dict[str, Any]:
    """The files provider confined to a root under the test's folder."""
    return {"files": {"roots": [str(tmp_path / "root")]}}


class TestOneObjectPerResource:
    """The second claim is refused; a released one can be claimed again."""

    async def test_a_second_object_with_the_same_path_is_refused(self, tmp_path: Path, config: Any) -> None:
        """InvalidError naming the first; nothing stored; other paths and re-applies fine."""
        async with connect(tmp_path / "state.db", provider_config=config) as client:
            await client.apply(file_manifest("hello", "index.html"))
            revision = await client.revision()
            with pytest.raises(InvalidError, match=r"is already declared by File default/hello") as caught:
                await client.apply(file_manifest("e", "index.html"))
            assert "spec.path=" in str(caught.value)
            assert await client.revision() == revision
            with pytest.raises(NotFoundError):
                await client.get("file", "e")
            await client.apply(file_manifest("hello", "index.html"))  # its own path: fine
            await client.apply(file_manifest("e", "other.html"))

    async def test_racing_applies_in_one_batch_one_wins(self, tmp_path: Path, config: Any) -> None:
        """Ten objects declaring one path at once (one group commit): exactly one is stored."""
        async with connect(tmp_path / "state.db", provider_config=config) as client:
            results = await asyncio.gather(
                *(client.apply(file_manifest(f"f{i}", "same.html")) for i in range(10)),
                return_exceptions=True,
            )
            stored = [r for r in results if not isinstance(r, BaseException)]
            refused = [r for r in results if isinstance(r, InvalidError)]
            assert len(stored) == 1
            assert len(refused) == 9
            assert len((await client.list("file")).items) == 1

    async def test_a_deleted_object_releases_its_path(self, tmp_path: Path, config: Any) -> None:
        """Once the first object is gone, another may declare its path; while it is being
        deleted (its finalizer waiting on the cleanup), the path is still its own."""
        async with connect(tmp_path / "state.db", provider_config=config) as client:
            await client.apply(file_manifest("hello", "index.html"))
            deleting = await client.delete("file", "hello")
            assert deleting is not None
            assert deleting.metadata.finalizers == (FINALIZER,)
            with pytest.raises(InvalidError, match="hello"):
                await client.apply(file_manifest("e", "index.html"))
            # What the runner does once the external file is cleaned up.
            await client.remove_finalizer("file", "hello", FINALIZER)
            with pytest.raises(NotFoundError):
                await client.get("file", "hello")
            stored = await client.apply(file_manifest("e", "index.html"))
            claimant = await client.engine.claimant("file", {"path": stored.spec.path})
            assert claimant is not None
            assert claimant.name == "e"


class TestThroughTheCli:
    """All or nothing, with both names."""

    def test_a_second_apply_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A File e with the path of File hello, applied later: exit 2, both named, nothing stored."""
        db, root = tmp_path / "state.db", tmp_path / "root"
        first = tmp_path / "hello.yaml"
        first.write_text(
            f"apiVersion: {API}\nkind: File\nmetadata: {{name: hello}}\nspec: {{path: index.html}}\n"
        )
        second = tmp_path / "e.yaml"
        second.write_text(
            f"apiVersion: {API}\nkind: File\nmetadata: {{name: e}}\nspec: {{path: index.html}}\n---\n"
            f"apiVersion: {API}\nkind: File\nmetadata: {{name: f}}\nspec: {{path: f.html}}\n"
        )
        assert main(["--db", str(db), "--root", str(root), "apply", "-f", str(first)]) == 0
        capsys.readouterr()
        assert main(["--db", str(db), "--root", str(root), "apply", "-f", str(second)]) == 2
        err = capsys.readouterr().err
        assert f'{second}, document 1: File "e": spec: spec.path=' in err
        assert "is already declared by File default/hello" in err
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM objects").fetchone()[0] == 1

    def test_two_documents_of_one_apply(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Two documents declaring one path in one apply: refused before anything is written."""
        db, root = tmp_path / "state.db", tmp_path / "root"
        both = tmp_path / "both.yaml"
        both.write_text(
            f"apiVersion: {API}\nkind: File\nmetadata: {{name: hello}}\nspec: {{path: index.html}}\n---\n"
            f"apiVersion: {API}\nkind: File\nmetadata: {{name: e}}\nspec: {{path: index.html}}\n"
        )
        assert main(["--db", str(db), "--root", str(root), "apply", "-f", str(both)]) == 2
        err = capsys.readouterr().err
        assert f'{both}, document 2: File "e": spec: spec.path=' in err
        assert f"is also declared by file.files.reconcile.dev/hello ({both}, document 1)" in err
        assert (
            not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM objects").fetchone()[0] == 0
        )


def test_a_version_1_database_migrates(tmp_path: Path) -> None:
    """A store written before the identity column opens, migrates, keeps its objects, and
    checks identities from then on."""
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        for statement in schema._SCHEMA_V1.split(";\n"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO reconcile_schema (version) VALUES (1)")
    conn.close()

    async def use() -> None:
        config = {"files": {"roots": [str(tmp_path / "root")]}}
        async with connect(db, provider_config=config) as client:
            await client.apply(file_manifest("hello", "index.html"))
            with pytest.raises(InvalidError, match="already declared"):
                await client.apply(file_manifest("e", "index.html"))

    asyncio.run(use())
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version FROM reconcile_schema").fetchone()[0] == schema.SCHEMA_VERSION
        columns = [row[1] for row in conn.execute("PRAGMA table_info(objects)")]
    assert "identity" in columns
