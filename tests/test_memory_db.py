"""``--db :memory:`` (and a Runtime on it) is refused with the reason: an in-memory SQLite
database lives in one connection of one process, the store opens several, and every
``reconcile`` command is a process of its own. It used to fail with "no such table: meta"."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconcile import Runtime, StoreError
from reconcile.cli import main

REASON = "an in-memory database cannot hold a reconcile store"
SITE = "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: x}\nspec: {path: x, content: x}\n"


class TestInMemory:
    """Every way of naming SQLite's in-memory database is refused, nothing written."""

    @pytest.mark.parametrize("db", [":memory:", "sqlite:///:memory:"])
    @pytest.mark.parametrize(
        "args",
        [
            ["apply", "-f", "MANIFEST"],
            ["get", "file"],
            ["history", "file", "x"],
            ["delete", "file", "x"],
            ["run", "--once", "--timeout", "5"],
            ["verify"],
            ["compact", "--yes"],
            ["plan"],
        ],
        ids=lambda args: args[0],
    )
    def test_the_cli_refuses_it_with_exit_2(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        db: str,
        args: list[str],
    ) -> None:
        """Exit 2, the reason on stderr, and no file made under any name."""
        monkeypatch.chdir(tmp_path)
        manifest = tmp_path / "site.yaml"
        manifest.write_text(SITE)
        code = main(["--db", db, *(str(manifest) if arg == "MANIFEST" else arg for arg in args)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"error: --db: {db}: {REASON}" in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["site.yaml"]

    async def test_a_runtime_refuses_it(self) -> None:
        """Runtime(":memory:").start() raises StoreError with the reason."""
        with pytest.raises(StoreError, match=REASON):
            await Runtime(":memory:").start()
