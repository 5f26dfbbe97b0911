"""How long the ``reconcile`` command takes to answer, beside the least a click CLI can.

Times whole processes, as a user waits for them: ``python -m reconcile version``, ``get``
(a table of --size objects) and ``history`` of one object, on a store made once. Beside
them, measured in the same run, the limits: a bare ``python -c pass`` (the interpreter's
start) and ``python -c "import click"`` (the floor for any click command line). The
cases take turns, round after round, so that a busy machine slows them all alike; each
row gives the median and the fastest of --rounds runs, wall and CPU (user + system)
time. The target is 150 ms of wall time for each command (kubectl answers in about
100 ms).

    python benchmarks/startup.py [--size N] [--rounds R] [--source DIR] [--json PATH]

``--source DIR`` times the reconcile of another checkout (say, a worktree of an older
commit) with the same store and the same limits, for a before-and-after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.150
"""What a command line should answer within (kubectl: about 0.1 s)."""


def _directories(size: int) -> str:
    """``size`` Directory manifests (the files provider's; nothing is written by apply)."""
    return "".join(
        "---\napiVersion: files.reconcile.dev/v1\nkind: Directory\n"
        f"metadata: {{name: d{i}, labels: {{app: bench}}}}\nspec: {{path: d{i}}}\n"
        for i in range(size)
    )


def cases(db: Path) -> dict[str, list[str]]:
    """Each case: the limits, then the commands a user types most."""
    reconcile = [sys.executable, "-m", "reconcile", "--db", str(db)]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import click'": [sys.executable, "-c", "import click"],
        "reconcile version": [*reconcile, "version"],
        "reconcile get": [*reconcile, "get"],
        "reconcile history": [*reconcile, "history", "directory", "d0"],
    }


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run (which must succeed). ``cwd`` is not a checkout:
    ``python -m`` puts the current folder first on the path, ahead of PYTHONPATH."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        message = f"{' '.join(command)} failed ({result.returncode}): {result.stderr}"
        raise SystemExit(message)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(folder: Path, size: int, rounds: int, source: Path) -> list[dict[str, object]]:
    """Make the store, then time every case ``rounds`` times, taking turns."""
    env = {**os.environ, "PYTHONPATH": str(source), "NO_COLOR": "1"}
    # As installed: modules load from .pyc files (the warm-up writes them), not compiled
    # from source on every start as PYTHONDONTWRITEBYTECODE (set in some CI and
    # containers) would have it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    db, manifests = folder / "state.db", folder / "dirs.yaml"
    manifests.write_text(_directories(size))
    setup = [sys.executable, "-m", "reconcile", "--db", str(db), "--root", str(folder / "root")]
    _timed([*setup, "apply", "-f", str(manifests)], env, folder)
    commands = cases(db)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for command in commands.values():  # one warm-up each: the OS's file cache, .pyc files
        _timed(command, env, folder)
    for _ in range(rounds):
        for name, command in commands.items():
            times[name].append(_timed(command, env, folder))
    floor = statistics.median(wall for wall, _ in times["python -c 'import click'"])
    rows: list[dict[str, object]] = []
    for name, samples in times.items():
        walls = [wall for wall, _ in samples]
        median = statistics.median(walls)
        rows.append(
            {
                "phase": name,
                "limit": name.startswith("python"),
                "median_s": median,
                "min_s": min(walls),
                "cpu_s": statistics.median(cpu for _, cpu in samples),
                "over_click_s": median - floor,
                "target_s": None if name.startswith("python") else TARGET_S,
            }
        )
    return rows


def main() -> None:
    """Run, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="how many objects the store holds")
    parser.add_argument("--rounds", type=int, default=10, help="how many runs of each case")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose reconcile is timed")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        rows = measure(Path(folder), args.size, args.rounds, args.source.resolve())
    print(f"{args.rounds} runs of each, {args.size} objects in the store, {args.source}")
    print(f"{'case':<28} {'median ms':>10} {'min ms':>8} {'cpu ms':>8} {'- click':>8}  target")
    for row in rows:
        target = row["target_s"]
        verdict = "(the limit)" if target is None else ("ok" if row["median_s"] <= target else "over")
        print(
            f"{row['phase']:<28} {row['median_s'] * 1000:>10.0f} {row['min_s'] * 1000:>8.0f}"
            f" {row['cpu_s'] * 1000:>8.0f} {row['over_click_s'] * 1000:>+8.0f}  "
            + (verdict if target is None else f"{target * 1000:.0f} ms {verdict}")
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "benchmark": "startup",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "size": args.size,
            "rounds": args.rounds,
            "rows": rows,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
