"""Work per created object in a cold convergence, beside the contract floor's.

A counting run (not a timing one: a profile hook sees every call, on every thread):
cold convergence of ``--size`` Things with the no-op provider (``reconcile.py``'s), and
the contract floor (``limits.py``) over the same number. Per created object:

* events appended, by type, and the bytes of their bodies and data;
* bytes the process wrote to the disk (``/proc/self/io``: the log, the WAL, checkpoints);
* JSON encodes and decodes (calls of ``orjson.dumps`` / ``orjson.loads`` and of the
  stdlib's ``json.dumps`` / ``json.loads``);
* cattrs calls: entries into a converter's ``structure`` / ``unstructure``, and calls of
  the hooks cattrs generates for attrs classes (a nested class's hook counts too);
* Python function calls, and calls of C functions.

    python benchmarks/counts.py [--size N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

import orjson  # noqa: E402
from limits import contract_floor  # noqa: E402

# benchmarks/reconcile.py, by its path: its name is the package's.
_spec = importlib.util.spec_from_file_location("reconcile_benchmark", ROOT / "benchmarks" / "reconcile.py")
assert _spec is not None
assert _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

COUNTERS = (
    "python_calls",
    "c_calls",
    "json_encodes",
    "json_decodes",
    "cattrs_structure",
    "cattrs_unstructure",
    "cattrs_generated_structure",
    "cattrs_generated_unstructure",
)


class Counting:
    """A profile hook on every thread that counts calls by kind (``next`` on an
    ``itertools.count`` is atomic under the GIL: the writer thread counts into the same)."""

    def __init__(self) -> None:
        self._counts = {name: itertools.count() for name in COUNTERS}
        self._encoders = {id(orjson.dumps), id(json.dumps)}
        self._decoders = {id(orjson.loads), id(json.loads)}

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        """Count one profile event."""
        counts = self._counts
        if event == "call":
            next(counts["python_calls"])
            code = frame.f_code
            filename = code.co_filename
            if filename.startswith("<cattrs generated structure"):
                next(counts["cattrs_generated_structure"])
            elif filename.startswith("<cattrs generated unstructure"):
                next(counts["cattrs_generated_unstructure"])
            elif filename.endswith(_CONVERTERS):
                if code.co_name == "structure":
                    next(counts["cattrs_structure"])
                elif code.co_name == "unstructure":
                    next(counts["cattrs_unstructure"])
            elif code is _JSON_DUMPS:
                next(counts["json_encodes"])
            elif code is _JSON_LOADS:
                next(counts["json_decodes"])
        elif event == "c_call":
            next(counts["c_calls"])
            if id(arg) in self._encoders:
                next(counts["json_encodes"])
            elif id(arg) in self._decoders:
                next(counts["json_decodes"])

    def totals(self) -> dict[str, int]:
        """How many of each kind so far."""
        # A count's next value is how many times it was taken.
        return {name: next(counter) for name, counter in self._counts.items()}

    def run(self, work: Callable[[], Any]) -> Any:
        """``work()`` with the hook on this thread and every thread it starts."""
        threading.setprofile(self.hook)
        sys.setprofile(self.hook)
        try:
            return work()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]


_CONVERTERS = str(Path("cattrs") / "converters.py")
_JSON_DUMPS = json.dumps.__code__
_JSON_LOADS = json.loads.__code__


def _written_bytes() -> int:
    """Bytes this process has caused to be written to storage so far."""
    with Path("/proc/self/io").open() as io:
        return next(int(line.split()[1]) for line in io if line.startswith("write_bytes:"))


def _events(path: Path, sql: str) -> dict[str, tuple[int, int]]:
    conn = sqlite3.connect(path)
    try:
        return {type_: (n, size or 0) for type_, n, size in conn.execute(sql)}
    finally:
        conn.close()


def measure(name: str, path: Path, size: int, work: Callable[[], Any], sql: str) -> dict[str, Any]:
    """One counting run of ``work`` and its events, per created object."""
    counting = Counting()
    written = _written_bytes()
    counting.run(work)
    disk = _written_bytes() - written
    totals = counting.totals()
    events = _events(path, sql)
    row: dict[str, Any] = {"case": name, "size": size}
    row["events"] = sum(n for n, _ in events.values()) / size
    row["events_by_type"] = {type_: n / size for type_, (n, _) in sorted(events.items())}
    row["event_bytes"] = sum(b for _, b in events.values()) / size
    row["event_bytes_by_type"] = {type_: b / size for type_, (_, b) in sorted(events.items())}
    row["disk_bytes"] = disk / size
    row.update({key: value / size for key, value in totals.items()})
    return row


def main() -> None:
    """Count both runs; print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="objects created")
    parser.add_argument("--workers", type=int, default=16, help="the controller's workers (and the floor's)")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    size = args.size
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        ours_db, floor_db = Path(folder) / "cold.db", Path(folder) / "floor.db"
        ours = measure(
            "reconcile",
            ours_db,
            size,
            lambda: asyncio.run(bench.cold_convergence(ours_db, size, args.workers)),
            "SELECT type, count(*), sum(coalesce(length(body), 0) + coalesce(length(data), 0)) "
            "FROM events GROUP BY type",
        )
        floor = measure(
            "contract floor",
            floor_db,
            size,
            lambda: asyncio.run(contract_floor(floor_db, size, args.workers)),
            "SELECT type, count(*), sum(length(body)) FROM events GROUP BY type",
        )
    fields = ("events", "event_bytes", "disk_bytes", *COUNTERS)
    print(f"per created object ({size} objects)")
    print(f"{'':30} {'reconcile':>12} {'floor':>12} {'x floor':>8}")
    for field in fields:
        ratio = f"{ours[field] / floor[field]:.1f}" if floor[field] else "-"
        print(f"{field:30} {ours[field]:12.1f} {floor[field]:12.1f} {ratio:>8}")
    print("events by type (reconcile):", ", ".join(f"{t} {n:.2f}" for t, n in ours["events_by_type"].items()))
    print(
        "event bytes by type (reconcile):",
        ", ".join(f"{t} {n:.0f}" for t, n in ours["event_bytes_by_type"].items()),
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"benchmark": "counts", "rows": [ours, floor]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
