"""``reconcile run`` as a real process: it picks up what another process applies or
deletes, without a restart, and stops cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import queue
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from helpers import checkout_path

from reconcile.cli import main

ROOT = Path(__file__).parents[1]
DEADLINE = 30.0

SITE = """\
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: index}
spec: {path: www/index.html, content: "hello\\n"}
"""


class Lines:
    """A process's output, read line by line on a thread, waited on with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.stream = stream
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        """After the process ended: let the reader reach the end, then close the pipe."""
        self.thread.join(timeout=DEADLINE)
        self.stream.close()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def rest(self) -> list[str]:
        """After :meth:`close`: every line, the ones not waited for included."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return self.seen
            if line is not None:
                self.seen.append(line)

    def wait_for(self, text: str, timeout: float = DEADLINE) -> str:
        """The first line (from now) containing ``text``; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line with {text!r} within {timeout} s; saw {self.seen[-10:]}")
            if line is None:
                pytest.fail(f"the stream ended before a line with {text!r}; saw {self.seen[-10:]}")
            self.seen.append(line)
            if text in line:
                return line


class Cli:
    """``python -m reconcile ARGS`` as a process, its output read line by line."""

    def __init__(self, db: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": checkout_path(), "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reconcile", "--db", str(db), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self.out, self.err = Lines(self.process.stdout), Lines(self.process.stderr)

    def stop(self, signum: signal.Signals) -> int:
        """Send ``signum``; the exit code; the pipes read to the end and closed."""
        self.process.send_signal(signum)
        code = self.process.wait(timeout=DEADLINE)
        self.close()
        return code

    def close(self) -> None:
        """Kill it if it still runs; close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=DEADLINE)
        self.out.close()
        self.err.close()
        assert not any("Traceback" in line for line in self.err.rest())


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Lines, Lines, Path]]:
    """``reconcile run`` on a fresh database, up and waiting."""
    db = tmp_path / "state.db"
    run = Cli(db, "run", "--poll-interval", "3600")
    run.err.wait_for("reconcile: running on")
    yield run.process, run.out, run.err, db
    run.close()


def test_run_picks_up_apply_and_delete_from_another_process(
    runner: tuple[subprocess.Popen[str], Lines, Lines, Path], tmp_path: Path
) -> None:
    """apply and delete in "another terminal" reach the running runner without a restart."""
    process, out, _, db = runner
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE)
    target = tmp_path / "www" / "index.html"

    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    out.wait_for("File default/index CreateSucceeded")
    assert target.read_text() == "hello\n"

    assert main(["--db", str(db), "delete", "file", "index", "--wait", "--timeout", str(DEADLINE)]) == 0
    assert not target.exists(), "delete --wait returned before the file was removed"
    out.wait_for("File default/index Deleted")
    assert process.poll() is None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_run_stops_cleanly_on_signals(
    runner: tuple[subprocess.Popen[str], Lines, Lines, Path], tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM and SIGINT: exit 0, no traceback, a consistent database."""
    process, out, err, db = runner
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE)
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    out.wait_for("CreateSucceeded")
    process.send_signal(signum)
    assert process.wait(timeout=DEADLINE) == 0
    err.wait_for("reconcile: stopping")
    assert not any("Traceback" in line for line in err.seen)
    assert main(["--db", str(db), "verify"]) == 0


def test_watch_streams_json_lines(tmp_path: Path) -> None:
    """watch -o json replays from --since as JSON lines, then stops on SIGINT with 0."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE)
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    watch = Cli(db, "watch", "-o", "json", "--since", "0")
    out = watch.out
    line = out.wait_for('"type":"Created"')
    event = json.loads(line)
    assert (event["kind"], event["name"], event["revision"]) == ("File", "index", 1)
    assert main(["--db", str(db), "delete", "file", "index"]) == 0
    out.wait_for('"type":"DeletionRequested"')
    # The managed finalizer holds it until a runner has cleaned up.
    assert main(["--db", str(db), "run", "--once", "--timeout", "20"]) == 0
    out.wait_for('"type":"Deleted"')
    assert watch.stop(signal.SIGINT) == 0


def test_run_once_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal, run --once draws rich's progress bar instead of action lines."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE)
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": checkout_path(), "TERM": "xterm", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "reconcile", "--db", str(db), "run", "--once"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    chunks = []
    with contextlib.suppress(OSError):  # EIO once the process has closed the terminal
        while True:
            readable, _, _ = select.select([leader], [], [], DEADLINE)
            if not readable:
                process.kill()
                pytest.fail("run --once went silent on the terminal")
            chunk = os.read(leader, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=DEADLINE) == 0
    screen = b"".join(chunks).decode(errors="replace")
    assert "converging" in screen
    assert "1/1" in screen
    assert "CreateRequested" not in screen


def test_sigterm_mid_convergence_then_resume(tmp_path: Path) -> None:
    """SIGTERM while hundreds of files are being written: exit 0 within the deadline, a
    database that verifies, and a second run finishes the job."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "many.yaml"
    manifest.write_text(
        "---\n".join(
            f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: f{i}}}\n"
            f"spec: {{path: 'www/d{i % 10}/f{i}.txt', content: 'file {i}'}}\n"
            for i in range(400)
        )
    )
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    run = Cli(db, "run", "--shutdown-deadline", "10")
    run.out.wait_for("CreateSucceeded")
    assert run.stop(signal.SIGTERM) == 0
    assert main(["--db", str(db), "verify"]) == 0
    assert main(["--db", str(db), "run", "--once", "--timeout", str(DEADLINE), "-q"]) == 0
    written = sorted((tmp_path / "www").rglob("*"))
    files = [p for p in written if p.is_file()]
    assert len(files) == 400, "every file once, no temporaries left behind"
    assert all(p.read_text() == f"file {p.stem[1:]}" for p in files)


def test_one_runner_per_database(
    runner: tuple[subprocess.Popen[str], Lines, Lines, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A second runner on the same database fails at once, naming the first (exit 1,
    nothing written); with --standby it waits, and takes over when the first stops."""
    process, _, _, db = runner
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    capsys.readouterr()
    assert main(["--db", str(db), "run", "--once", "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert f"another runner is reconciling {db}: pid {process.pid} on " in err
    assert "--standby" in err
    assert "Traceback" not in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == before
    standby = Cli(db, "run", "--standby", "--poll-interval", "3600")
    try:
        standby.err.wait_for("standing by until it stops")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE) == 0
        standby.err.wait_for("reconcile: running on")
        assert standby.stop(signal.SIGTERM) == 0
    finally:
        if standby.process.poll() is None:
            standby.close()


def flip_byte(db: Path, needle: bytes, occurrence: int = -1) -> None:
    """Corrupt the database file as a failing disk would: one byte inside a stored body
    (``"kind":"File"`` becomes ``"kind"?"File"``), behind SQLite's back."""
    data = bytearray(db.read_bytes())
    found = [i for i in range(len(data)) if data.startswith(needle, i)]
    where = found[occurrence] + needle.index(b":")
    data[where] = ord("?")
    db.write_bytes(bytes(data))


@pytest.fixture
def corrupt_store(tmp_path: Path) -> Path:
    """A store of two Files whose current body of the second no longer parses."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE + "---\n" + SITE.replace("index", "about"))
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    flip_byte(db, b'"kind":"File"')
    return db


class TestCorruptStore:
    """A body that cannot be decoded: reported once, by revision; no hang, no tracebacks."""

    def test_run_once_fails_at_once_naming_the_event(self, corrupt_store: Path) -> None:
        """run --once exits 1 long before its timeout, naming the event and pointing at
        verify --deep; the report is one line, not a traceback per retry."""
        started = time.monotonic()
        run = Cli(corrupt_store, "run", "--once", "--timeout", "600")
        assert run.process.wait(timeout=DEADLINE) == 1
        run.close()
        assert time.monotonic() - started < DEADLINE
        lines = run.err.rest()
        errors = [line for line in lines if "cannot be decoded" in line]
        assert errors, lines
        assert "error: the store is corrupt: event 1 (File.files.reconcile.dev default/index)" in errors[-2]
        assert any("verify --deep" in line for line in lines)
        assert len(lines) <= 4, lines
        assert not any("Traceback" in line for line in lines)

    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
    def test_run_stops_on_signals(self, corrupt_store: Path, signum: signal.Signals) -> None:
        """A runner whose informer cannot list still stops on a signal, having said so once."""
        run = Cli(corrupt_store, "run")
        run.err.wait_for("cannot be decoded")
        code = run.stop(signum)
        assert code == 0
        assert sum("cannot be decoded" in line for line in run.err.rest()) == 1

    def test_verify_finds_it_and_deep_finds_old_ones(self, corrupt_store: Path, tmp_path: Path) -> None:
        """verify decodes every current object; an old event's corrupt body only --deep finds."""
        assert main(["--db", str(corrupt_store), "verify"]) == 1
        db = tmp_path / "history.db"
        manifest = tmp_path / "one.yaml"
        manifest.write_text(SITE)
        assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
        manifest.write_text(SITE.replace("hello", "changed"))
        assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
        flip_byte(db, b'"kind":"File"', occurrence=-1)  # the older event: SQLite fills pages from the end
        assert main(["--db", str(db), "verify"]) == 0
        assert main(["--db", str(db), "verify", "--deep"]) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_standby_runner_stops_on_signals(
    runner: tuple[subprocess.Popen[str], Lines, Lines, Path], signum: signal.Signals
) -> None:
    """A runner standing by stops on SIGTERM or SIGINT: exit 0 and a line saying it
    stopped while standing by (it used to die with 143 and no word)."""
    process, _, _, db = runner
    standby = Cli(db, "run", "--standby")
    standby.err.wait_for("standing by until it stops")
    assert standby.stop(signum) == 0
    assert any("stopped while standing by" in line for line in standby.err.rest())
    assert process.poll() is None, "the first runner is unaffected"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_run_once_interrupted_exits_130(tmp_path: Path, signum: signal.Signals) -> None:
    """A signal before run --once converged: exit 130, as the reference says for an
    interrupted one-shot command (it was 1), still naming what was not Ready."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE)
    # The folder on the way is a symlink: retried with backoff, never settled, so only the
    # signal ends the run (a permanent failure would let it end by itself, racing it).
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "www").symlink_to(tmp_path / "elsewhere")
    run = Cli(db, "run", "--once", "--timeout", "600")
    run.out.wait_for("File default/index")
    assert run.stop(signum) == 130
    lines = run.err.rest()
    assert any("interrupted: 1 not converged" in line for line in lines), lines
    assert any("File default/index: Ready=" in line for line in lines), lines


def test_get_watch_prints_a_row_per_change(tmp_path: Path) -> None:
    """get -w: the table, then a row for each change of a matching object, lined up with
    the table's header, until SIGINT (exit 0); -w of one object is a usage error."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE)
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 0
    watching = Cli(db, "get", "files", "-w")
    header = watching.out.wait_for("NAME")
    watching.out.wait_for("index")
    other = tmp_path / "ab.yaml"
    other.write_text(SITE.replace("index", "ab"))
    assert main(["--db", str(db), "apply", "-f", str(other)]) == 0
    row = watching.out.wait_for("ab ")
    assert row.split()[:3] == ["ab", "Unknown", "Unknown"]
    assert row.index("Unknown") == header.index("READY"), f"{header!r}\n{row!r}"
    assert watching.stop(signal.SIGINT) == 0
    assert main(["--db", str(db), "get", "file/index", "-w"]) == 2
