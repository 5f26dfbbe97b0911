"""What ``apply --atomic`` costs: the same documents applied both ways, interleaved.

``Client.apply_many(check_all_first=True)`` as ``reconcile apply -f`` calls it, once with
``atomic=True`` (every document in one store transaction, ``EventStore.write_many``) and
once without (runs of 1,024 documents sharing group commits), on fresh SQLite files at
``synchronous=FULL``, alternating which goes first; the median and the spread of
``--rounds`` rounds each. Also measured: the longest the store's writer spent on one
commit, the time other writers (a runner on the same file) would wait at worst, and the
Python heap's peak during the apply (``tracemalloc``, in separate rounds: it slows
allocation down).

    python benchmarks/atomic.py [--size N] [--rounds R] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconcile import connect  # noqa: E402
from reconcile.runtime.collecting import collecting_less  # noqa: E402
from reconcile.store.sqlite import writing  # noqa: E402
from reconcile.testing import example_kinds  # noqa: E402


def manifests(size: int) -> list[dict[str, Any]]:
    """``size`` Widget manifests with a label and a small spec."""
    return [
        {
            "apiVersion": "example.reconcile.dev/v1",
            "kind": "Widget",
            "metadata": {"name": f"w-{i:06d}", "labels": {"app": "bench"}},
            "spec": {"size": i % 100, "color": "blue"},
        }
        for i in range(size)
    ]


class LongestCommit:
    """Wraps the store's batch commit to time each call (the write lock is held that long)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._original = writing.commit_batch

    def __enter__(self) -> Self:
        original = self._original

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.longest = max(self.longest, time.perf_counter() - started)

        writing.commit_batch = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc_info: object) -> None:
        writing.commit_batch = self._original  # type: ignore[assignment]


async def apply_once(path: Path, docs: list[dict[str, Any]], *, atomic: bool, heap: bool) -> dict[str, float]:
    """Apply ``docs`` to a fresh store; seconds, longest commit, heap peak (MiB, with ``heap``)."""
    async with connect(f"sqlite:///{path}?synchronous=FULL", kinds=example_kinds()) as client:
        with LongestCommit() as commits:
            if heap:
                tracemalloc.start()
            started = time.perf_counter()
            with collecting_less():  # as reconcile apply has it
                results = await client.apply_many(docs, check_all_first=True, atomic=atomic)
            elapsed = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] / 2**20 if heap else 0.0
            if heap:
                tracemalloc.stop()
        assert all(r.outcome == "created" for r in results), {r.outcome for r in results}
        assert await client.store.revision() == len(docs)
    return {"seconds": elapsed, "longest_commit": commits.longest, "heap_peak_mib": peak}


def main() -> None:
    """Measure and print (and write ``--json``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    docs = manifests(args.size)
    measured: dict[str, list[dict[str, float]]] = {"atomic": [], "group commits": []}
    heaps: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        count = 0

        def fresh() -> Path:
            nonlocal count
            count += 1
            return Path(folder) / f"{count}.db"

        for round_ in range(args.rounds):
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for atomic in order:
                row = asyncio.run(apply_once(fresh(), docs, atomic=atomic, heap=False))
                measured["atomic" if atomic else "group commits"].append(row)
        for atomic in (True, False):
            row = asyncio.run(apply_once(fresh(), docs, atomic=atomic, heap=True))
            heaps["atomic" if atomic else "group commits"] = row["heap_peak_mib"]
    rows = []
    print(f"{args.size} documents, {args.rounds} rounds each, synchronous=FULL")
    print(
        f"{'mode':14} {'median s':>9} {'min s':>7} {'max s':>7} {'docs/s':>8} "
        f"{'longest commit s':>17} {'heap MiB':>9}"
    )
    for mode, runs in measured.items():
        seconds = [r["seconds"] for r in runs]
        longest = statistics.median(r["longest_commit"] for r in runs)
        row = {
            "mode": mode,
            "median_s": statistics.median(seconds),
            "min_s": min(seconds),
            "max_s": max(seconds),
            "docs_per_s": args.size / statistics.median(seconds),
            "longest_commit_s": longest,
            "heap_peak_mib": heaps[mode],
        }
        rows.append(row)
        print(
            f"{mode:14} {row['median_s']:9.3f} {row['min_s']:7.3f} {row['max_s']:7.3f} "
            f"{row['docs_per_s']:8.0f} {longest:17.3f} {heaps[mode]:9.1f}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "benchmark": "atomic",
            "size": args.size,
            "rounds": args.rounds,
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "rows": rows,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
