"""``reconcile apply -f`` of 10,000 documents as a real process, stopped by a signal:
with ``--atomic`` (the default) the store holds none or all of them, even after SIGKILL;
with ``--no-atomic`` SIGINT and SIGTERM stop it cleanly after the run of writes in
flight, and it says exactly what the store holds (exit 130 or 143, no traceback).

To signal the process at a known point without sleeping, the test waits on the store
(rows committed, or the apply's transaction holding the write lock), and it can pause
the apply's writer by holding SQLite's write lock itself for a moment: the apply's next
commit waits on it (its busy timeout), and goes on when the test lets go.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import checkout_path

ROOT = Path(__file__).parents[1]
DEADLINE = 60.0
FILES, PER_FILE = 10, 1000
TOTAL = FILES * PER_FILE


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of 10 manifest files of 1,000 File documents each."""
    folder = tmp_path_factory.mktemp("many")
    for part in range(FILES):
        documents = [
            f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: f{n}}}\n"
            f"spec: {{path: out/f{n}.txt, content: 'hello {n}'}}\n"
            for n in range(part * PER_FILE, (part + 1) * PER_FILE)
        ]
        (folder / f"part-{part:02d}.yaml").write_text("---\n".join(documents))
    return folder


def start_apply(db: Path, manifests: Path, *flags: str) -> subprocess.Popen[str]:
    """``reconcile apply -f FOLDER`` as a process."""
    env = {**os.environ, "PYTHONPATH": checkout_path(), "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "reconcile", "--db", str(db), "apply", *flags, "-f", str(manifests)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def stored(db: Path) -> int:
    """How many objects the store holds (0 while there is no store yet)."""
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM objects WHERE live").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def has_schema(db: Path) -> bool:
    """Whether the store exists with its tables (the apply has opened it)."""
    if not db.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            conn.execute("SELECT count(*) FROM objects").fetchone()
    except sqlite3.OperationalError:
        return False
    return True


def write_locked(db: Path) -> bool:
    """Whether another connection holds the store's write lock right now."""
    with contextlib.closing(sqlite3.connect(db, timeout=0, isolation_level=None)) as conn:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return True
            raise
        conn.execute("ROLLBACK")
    return False


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    """Poll ``condition`` until it holds; fail at the deadline or if the process ended first."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the apply ended (exit {process.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {DEADLINE} s")
        time.sleep(0.001)  # a poll interval, not a wait for something


@contextlib.contextmanager
def writer_paused(db: Path) -> Iterator[None]:
    """Hold the store's write lock (after the commit under way, if any) until the block ends."""
    conn = sqlite3.connect(db, timeout=DEADLINE, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def finish(process: subprocess.Popen[str]) -> tuple[int, list[str], list[str]]:
    """Exit code, stdout lines, stderr lines."""
    out, err = process.communicate(timeout=DEADLINE)
    assert "Traceback" not in err, err
    return process.returncode, out.splitlines(), err.splitlines()


def verify(db: Path) -> None:
    """``reconcile verify``: the projection equals the log's replay."""
    result = subprocess.run(
        [sys.executable, "-m", "reconcile", "--db", str(db), "verify"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": checkout_path()},
        check=False,
        timeout=DEADLINE,
    )
    assert result.returncode == 0, result.stdout + result.stderr


SIGNALS = [signal.SIGINT, signal.SIGTERM]


class TestNotAtomic:
    """``apply --no-atomic``: a signal stops it between two runs of writes, and it says what was stored."""

    @pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
    def test_signal_reports_exactly_what_is_stored(
        self, tmp_path: Path, manifests: Path, signum: signal.Signals
    ) -> None:
        """Signalled once some documents are stored: exit 128+n, "stored K of 10000 (up to
        FILE, document N)", K the store's count, K lines on stdout; re-running finishes."""
        db = tmp_path / "state.db"
        process = start_apply(db, manifests, "--no-atomic")
        wait_until(lambda: stored(db) > 0, process, "a stored document")
        with writer_paused(db):
            process.send_signal(signum)
        code, out, err = finish(process)
        count = stored(db)
        assert code == 128 + signum.value, err
        assert 0 < count < TOTAL, (count, err)
        assert err[0] == f"error: interrupted by {signum.name}"
        match = re.fullmatch(
            r"error: stored (\d+) of 10000 documents \(up to (.+), document (\d+)\); not stored: the other "
            r"(\d+) \(from (.+), document (\d+)\); re-run apply to finish",
            err[1],
        )
        assert match, err
        assert int(match[1]) == count
        assert int(match[4]) == TOTAL - count
        last_file, last_index = Path(match[2]).name, int(match[3])
        assert last_file == f"part-{(count - 1) // PER_FILE:02d}.yaml"
        assert last_index == (count - 1) % PER_FILE + 1
        assert len(out) == count
        assert all(line.endswith(" created") for line in out)
        verify(db)

        rerun = start_apply(db, manifests, "--no-atomic")
        code, out, err = finish(rerun)
        assert code == 0, err
        assert stored(db) == TOTAL
        assert sum(line.endswith(" unchanged") for line in out) == count


class TestAtomic:
    """``apply --atomic``: one transaction, so none or all of the documents, whatever stops it."""

    @pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
    def test_signal_before_the_transaction_stores_nothing(
        self, tmp_path: Path, manifests: Path, signum: signal.Signals
    ) -> None:
        """Signalled once the store is open (its writer held back): none or all stored,
        exit 128+n, and the message says which."""
        db = tmp_path / "state.db"
        process = start_apply(db, manifests, "--atomic")
        wait_until(lambda: has_schema(db), process, "the store")
        with writer_paused(db):
            process.send_signal(signum)
        self.check_none_or_all(db, process, signum)

    @pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
    def test_signal_during_the_transaction_stores_all(
        self, tmp_path: Path, manifests: Path, signum: signal.Signals
    ) -> None:
        """Signalled while its one transaction holds the write lock: it is not cut in
        the middle (none or all stored), exit 128+n, and the message says which."""
        db = tmp_path / "state.db"
        process = start_apply(db, manifests, "--atomic")
        wait_until(lambda: has_schema(db) and write_locked(db), process, "the apply's transaction")
        process.send_signal(signum)
        self.check_none_or_all(db, process, signum)

    @staticmethod
    def check_none_or_all(db: Path, process: subprocess.Popen[str], signum: signal.Signals) -> None:
        """The apply ended on the signal, storing none or all, and said which."""
        code, out, err = finish(process)
        count = stored(db)
        assert code == 128 + signum.value, err
        assert count in (0, TOTAL)
        assert err[0] == f"error: interrupted by {signum.name}"
        if count == 0:
            assert err[1:] == ["error: nothing stored (of 10000 documents); re-run apply"], err
            assert out == []
        else:
            assert err[1].startswith("error: stored all 10000 documents"), err
            assert len(out) == TOTAL
        verify(db)

    def test_sigkill_during_the_transaction_leaves_none_or_all(self, tmp_path: Path, manifests: Path) -> None:
        """SIGKILL while the apply's one transaction holds the write lock: none or all stored."""
        db = tmp_path / "state.db"
        process = start_apply(db, manifests, "--atomic")
        wait_until(lambda: has_schema(db) and write_locked(db), process, "the apply's transaction")
        process.kill()
        process.wait(timeout=DEADLINE)
        assert process.returncode == -signal.SIGKILL
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        process.stderr.close()
        assert stored(db) in (0, TOTAL)
        verify(db)

    def test_sigkill_while_waiting_for_the_write_lock_stores_nothing(
        self, tmp_path: Path, manifests: Path
    ) -> None:
        """SIGKILL while the apply waits for another writer: nothing stored, and a re-run stores all."""
        db = tmp_path / "state.db"
        process = start_apply(db, manifests, "--atomic")
        wait_until(lambda: has_schema(db), process, "the store")
        with writer_paused(db):
            before = stored(db)
            process.kill()
            process.wait(timeout=DEADLINE)
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        process.stderr.close()
        assert stored(db) == before
        assert before in (0, TOTAL)
        code, _, err = finish(start_apply(db, manifests))
        assert code == 0, err
        assert stored(db) == TOTAL
