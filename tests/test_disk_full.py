"""A full disk is said at once: the runner warns "disk full" at its first failed write
(it used to retry in silence, every failure logged below the command line's level), and
a store opened on a full disk says so rather than "corrupt or not a SQLite database".

The runner's test fills a small tmpfs, which needs root and a kernel that lets it mount
one; the store's mapping of SQLite's errors is tested everywhere, with SQLite's own
SQLITE_FULL (a page limit the database reaches)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_processes import DEADLINE, Cli

from reconcile.cli import main
from reconcile.store.sqlite.space import disk_full

FILES = 300


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own, unmounted afterwards."""
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "tiny"
    folder.mkdir()
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run([shutil.which("umount") or "umount", str(folder)], check=False)


def _fill(folder: Path, leave: int) -> None:
    """Fill ``folder``'s filesystem, leaving about ``leave`` bytes free."""
    space = os.statvfs(folder)
    free = space.f_bavail * space.f_frsize
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave))


class TestRunner:
    """The runner on a disk that fills up."""

    def test_says_disk_full_at_once(self, tiny_disk: Path, tmp_path: Path) -> None:
        """300 Files to create, 150 KiB left for the log: a "disk full" warning within
        seconds of the start, and a clean stop on SIGTERM."""
        db = tiny_disk / "state.db"
        manifest = tmp_path / "site" / "files.yaml"
        manifest.parent.mkdir()
        manifest.write_text(
            "---\n".join(
                f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: f{i}}}\n"
                f"spec: {{path: out/f{i}.txt, content: 'hello {i}'}}\n"
                for i in range(FILES)
            )
        )
        assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
        _fill(tiny_disk, 150 * 1024)
        run = Cli(db, "run", "--poll-interval", "3600")
        try:
            line = run.err.wait_for("disk full", timeout=10)
            assert "the store failed" in line
            assert str(db) in line
            assert run.stop(signal.SIGTERM) == 0
        finally:
            run.close()

    def test_opening_a_store_on_a_full_disk_says_so(self, tiny_disk: Path, tmp_path: Path) -> None:
        """No byte left: run exits naming the full disk, not a corrupt database."""
        db = tiny_disk / "state.db"
        manifest = tmp_path / "one.yaml"
        manifest.write_text(
            "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: f}\n"
            "spec: {path: f, content: x}\n"
        )
        assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
        _fill(tiny_disk, 0)
        run = Cli(db, "run", "--once", "--timeout", "5")
        try:
            line = run.err.wait_for("error:", timeout=DEADLINE)
            assert "disk full" in line
            assert "corrupt" not in line
        finally:
            run.close()


class TestMapping:
    """SQLite's errors on a store's database, told apart."""

    def test_sqlite_full_is_a_full_disk(self, tmp_path: Path) -> None:
        """A write past the database's room (SQLITE_FULL) is a full disk; a missing table is not."""
        path = tmp_path / "full.db"
        connection = sqlite3.connect(path)
        try:
            connection.execute("CREATE TABLE t (x BLOB)")
            connection.execute("PRAGMA max_page_count = 3")
            with pytest.raises(sqlite3.Error) as full:
                connection.execute("INSERT INTO t VALUES (zeroblob(100000))")
            with pytest.raises(sqlite3.Error) as missing:
                connection.execute("SELECT * FROM nowhere")
        finally:
            connection.close()
        assert disk_full(full.value, path)
        assert not disk_full(missing.value, path)
