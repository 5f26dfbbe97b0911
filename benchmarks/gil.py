"""How much of the SQLite writer thread's time is Python holding the GIL.

The store's writer connection runs each commit on its own thread (aiosqlite). sqlite3
releases the GIL while SQLite prepares and steps a statement, so the thread holds the
GIL for the Python around the statements: mutations, JSON, row building in the older
write path; only binding parameters in the newer. This benchmark wraps the commit
function the writer runs on its thread and the connection it is given: the thread's
busy time is the function's wall time; the time inside sqlite3 calls (execute,
executemany, fetch) is SQLite's, GIL released except for binding each row's parameters;
the rest is Python holding the GIL. Beside them: the thread's CPU time
(``time.thread_time``) and the wall time of the whole run.

    python benchmarks/gil.py [--size N] [--json PATH]

Runs against whatever ``reconcile`` is on the path (a worktree, or main for the
figures before a change): the commit function is the writer module's ``commit_batch``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# ``reconcile`` from the path first (PYTHONPATH: this tree, or another one to compare),
# then this folder's store benchmark for its payloads (it puts its own tree on the path,
# too late to change which ``reconcile`` was imported). This folder, first on the path as
# the script's, is left out meanwhile: its reconcile.py would shadow the package.
HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p != HERE]

from reconcile.model import ObjectKey  # noqa: E402
from reconcile.store import Put, SQLiteStore  # noqa: E402
from reconcile.store.sqlite import committing, writing  # noqa: E402

sys.path.insert(0, HERE)

from store import payload  # noqa: E402


class _Timed:
    """A sqlite3 connection whose statements are timed (wall, on the calling thread)."""

    def __init__(self, conn: Any, totals: dict[str, float]) -> None:
        self._conn, self._totals = conn, totals

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def _timed(self, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        try:
            result = call(*args)
            if hasattr(result, "fetchall"):  # a cursor: its rows are stepped here too
                result = _Rows(result.fetchall())
            return result
        finally:
            self._totals["sql"] += time.perf_counter() - started

    def execute(self, *args: Any) -> Any:
        return self._timed(self._conn.execute, *args)

    def executemany(self, *args: Any) -> Any:
        return self._timed(self._conn.executemany, *args)


class _Rows(list[Any]):
    def fetchone(self) -> Any:
        return self[0] if self else None


def measuring(totals: dict[str, float]) -> Callable[..., Any]:
    """A replacement for ``writing.commit_batch`` that times every commit on the thread
    (the writer looks it up in its module at each commit, whether it awaits the thread's
    call or hears of its end in a callback)."""
    original = committing.commit_batch  # (the real one, however often this is called)

    def run(conn: Any, *args: Any, **options: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return original(_Timed(conn, totals), *args, **options)
        finally:
            totals["busy"] += time.perf_counter() - started
            totals["cpu"] += time.thread_time() - cpu
            totals["commits"] += 1

    return run


async def _busy(stop: asyncio.Event) -> None:
    """Python on the loop all along, in short slices (as reconciles are)."""
    while not stop.is_set():
        sum(range(2000))
        await asyncio.sleep(0)


async def writes(
    path: Path, size: int, writers: int, totals: dict[str, float], *, busy: bool = False
) -> float:
    """``writers`` tasks writing ``size`` new objects (``busy``: while the loop runs other
    Python); the run's wall time."""
    writing.commit_batch = measuring(totals)
    async with SQLiteStore(path, synchronous="FULL") as store:
        work = iter(
            [
                (ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}"), payload(i))
                for i in range(size)
            ]
        )

        async def writer() -> None:
            for key, body in work:
                await store.write(key, lambda _, body=body: Put("Created", body), actor="bench")

        stop = asyncio.Event()
        other = asyncio.create_task(_busy(stop)) if busy else None
        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - started
        stop.set()
        if other is not None:
            await other
        return elapsed


def main() -> None:
    """Measure 1 and 100 writers, and 100 while the loop runs other Python; print the
    table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20000, help="writes per case (1 writer: at most 3000)")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    print(f"reconcile from {Path(committing.__file__).parents[3]}")
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        for writers, busy in ((1, False), (100, False), (100, True)):
            size = args.size if writers > 1 else min(args.size, 3000)
            totals = {"busy": 0.0, "sql": 0.0, "cpu": 0.0, "commits": 0}
            path = Path(folder) / f"w{writers}{busy}.db"
            wall = asyncio.run(writes(path, size, writers, totals, busy=busy))
            python = totals["busy"] - totals["sql"]
            rows.append(
                {
                    "writers": writers,
                    "loop_busy": busy,
                    "writes": size,
                    "wall_s": wall,
                    "commits": totals["commits"],
                    "thread_busy_s": totals["busy"],
                    "thread_sql_s": totals["sql"],
                    "thread_python_s": python,
                    "thread_cpu_s": totals["cpu"],
                    "python_share_of_busy": python / totals["busy"],
                    "python_share_of_wall": python / wall,
                    "python_us_per_write": python / size * 1e6,
                }
            )
    print(
        f"{'writers':>12} {'writes/s':>9} {'commits':>8} {'busy s':>7} {'sql s':>7} {'GIL s':>7} "
        f"{'cpu s':>7} {'GIL/busy':>8} {'GIL/wall':>8} {'GIL us/write':>12}"
    )
    for r in rows:
        print(
            f"{str(r['writers']) + (', busy' if r['loop_busy'] else ''):>12} "
            f"{r['writes'] / r['wall_s']:>9.0f} {r['commits']:>8} "
            f"{r['thread_busy_s']:>7.3f} {r['thread_sql_s']:>7.3f} {r['thread_python_s']:>7.3f} "
            f"{r['thread_cpu_s']:>7.3f} "
            f"{r['python_share_of_busy']:>8.2f} {r['python_share_of_wall']:>8.2f} "
            f"{r['python_us_per_write']:>12.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "gil", "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
