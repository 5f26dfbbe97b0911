"""benchmarks/busy.py: the CPU-bound process ``--busy`` runs beside a benchmark is gone
once the benchmark is, however it ended (its block left, SIGTERM, SIGINT, SIGKILL); the
benchmarks say in their JSON and their titles that the second core was busy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import checkout_path

ROOT = Path(__file__).parents[1]
DEADLINE = 30.0

#: Starts a burner, says its pid, then waits to be signalled.
HOLDER = f"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
from busy import burning
with burning(True) as burner:
    print(burner.pid, flush=True)
    time.sleep(600)
"""


def burner_alive(pid: int) -> bool:
    """Whether ``pid`` is still a burner (not gone, and not reused by another program)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return b"getppid" in command and state != "Z"


def eventually(predicate: Callable[[], bool], what: str) -> None:
    """Wait, up to a deadline, for ``predicate()`` to hold."""
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def wait_gone(pid: int) -> None:
    """Wait, up to a deadline, for the burner ``pid`` to be gone."""
    eventually(lambda: not burner_alive(pid), f"burner {pid} still running")


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_burner_stops_with_its_benchmark(sent: signal.Signals) -> None:
    """However the benchmark is stopped, its burner does not outlive it."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a signal to the holder alone, not to its group
    ) as holder:
        try:
            assert holder.stdout is not None
            pid = int(holder.stdout.readline())
            # Its command line shows once its exec is done.
            eventually(lambda: burner_alive(pid), f"burner {pid} never seen running")
            holder.send_signal(sent)
            holder.wait(timeout=DEADLINE)
            wait_gone(pid)
        finally:
            holder.kill()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark with reconcile importable."""
    env = {**os.environ, "PYTHONPATH": checkout_path()}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.mark.parametrize(
    ("script", "arguments", "title"),
    [
        ("reconcile.py", ("--size", "100", "--workers", "4"), "cold convergence (second core busy)"),
        ("store.py", ("--size", "100"), "store (second core busy)"),
        ("files.py", ("--size", "20"), "20 files, 100 per folder (second core busy)"),
    ],
)
def test_busy_benchmark_smoke(tmp_path: Path, script: str, arguments: tuple[str, ...], title: str) -> None:
    """With ``--busy`` a benchmark runs beside its burner, says so in its title and its
    JSON with the CPU the burner had, and leaves no burner behind."""
    out = tmp_path / "result.json"
    result = run(str(ROOT / "benchmarks" / script), *arguments, "--busy", "--json", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["busy"] is True
    burner = data["burner"]
    assert burner["cpu_s"] > 0
    assert 0 < burner["core_share"] <= 1.05
    assert title in result.stdout
    assert "second core busy: the burner had" in result.stdout
    wait_gone(burner["pid"])


def test_quiet_run_says_so(tmp_path: Path) -> None:
    """Without ``--busy``: ``busy`` false, no burner, no busy title."""
    out = tmp_path / "files.json"
    result = run(str(ROOT / "benchmarks" / "files.py"), "--size", "10", "--json", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["busy"] is False
    assert "burner" not in data
    assert "busy" not in result.stdout
