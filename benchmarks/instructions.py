"""Instructions per store write, counted under valgrind, beside the off-the-loop limit's.

Timing a write on a shared two-core machine measures the other work on it as much as
the write (the limit's own CPU per event moves by a factor of two within an hour); a
count of instructions does not. Each case writes N new objects with the payloads of
``store.py``, at ``synchronous=NORMAL``, and runs under ``valgrind --tool=callgrind``
twice, with ``--small`` and ``--large`` N; the difference over the difference in N is
the instructions per write (both threads, SQLite's included, start-up and imports
excluded; user space only: a flush's or a thread wake-up's kernel work is not in it).
The counts repeat to within about 0.5%.

* ``store``: ``store.write`` with one writer that waits for each write.
* ``store100``: ``store.write`` with 100 writers at once.
* ``limit``: the off-the-loop limit by 1 (``store.py``'s ``raw_rows_off_loop``).
* ``limit100``: the same by 100.

    python benchmarks/instructions.py [--cases store,limit] [--small 200] [--large 1200]

Needs valgrind on the path. Runs against whatever ``reconcile`` is beside this file (a
worktree, or main for the figures before a change).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

import aiosqlite  # noqa: E402
from store import _same_rows_transaction, payload  # noqa: E402

from reconcile.model import ObjectKey  # noqa: E402
from reconcile.store import Put, SQLiteStore  # noqa: E402
from reconcile.store.sqlite.schema import prepare  # noqa: E402

SYNCHRONOUS = "NORMAL"


async def store_writes(path: Path, count: int, writers: int) -> None:
    """``count`` new objects through ``store.write``, ``writers`` tasks at once."""
    async with SQLiteStore(path, synchronous=SYNCHRONOUS) as store:
        work = iter(
            [
                (ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}"), payload(i))
                for i in range(count)
            ]
        )

        async def writer() -> None:
            for key, body in work:
                await store.write(key, lambda _, body=body: Put("Created", body), actor="bench")

        await asyncio.gather(*(writer() for _ in range(writers)))


async def limit_writes(path: Path, count: int, batch: int) -> None:
    """The off-the-loop limit: the store's rows, ``batch`` per transaction, each one call
    awaited on aiosqlite's thread."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        run, raw = conn._execute, conn._conn  # noqa: SLF001 - aiosqlite's way to its thread
        await run(prepare, raw, str(path), SYNCHRONOUS)
        bodies = [payload(i) for i in range(count)]
        for start in range(0, count, batch):
            await run(_same_rows_transaction, raw, bodies, start, min(start + batch, count))


CASES = {
    "store": lambda path, count: store_writes(path, count, 1),
    "store100": lambda path, count: store_writes(path, count, 100),
    "limit": lambda path, count: limit_writes(path, count, 1),
    "limit100": lambda path, count: limit_writes(path, count, 100),
}


def counted(case: str, count: int) -> int:
    """Instructions of one run of ``case`` over ``count`` writes, under callgrind."""
    done = subprocess.run(  # noqa: S603 - this script, under valgrind
        [  # noqa: S607 - valgrind wherever the path has it
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--run",
            case,
            "--small",
            str(count),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    """Count every case asked for, two runs each at once; print instructions per write."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="store,limit", help="comma-separated: " + ", ".join(CASES))
    parser.add_argument("--small", type=int, default=200, help="writes of the smaller run")
    parser.add_argument("--large", type=int, default=1200, help="writes of the larger run")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one run, under valgrind
    args = parser.parse_args()
    if args.run:
        with tempfile.TemporaryDirectory() as folder:
            asyncio.run(CASES[args.run](Path(folder) / "state.db", args.small))
        return
    cases = args.cases.split(",")
    print(f"reconcile from {ROOT}")
    with concurrent.futures.ThreadPoolExecutor() as pool:
        runs = {
            (case, count): pool.submit(counted, case, count)
            for case in cases
            for count in (args.small, args.large)
        }
        for case in cases:
            small, large = runs[case, args.small].result(), runs[case, args.large].result()
            per_write = (large - small) / (args.large - args.small)
            print(f"{case:10s} {per_write / 1000:8.1f}k instructions per write")


if __name__ == "__main__":
    main()
