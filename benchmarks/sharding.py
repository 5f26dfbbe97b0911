"""Cold convergence of N files by 1..K ``reconcile run --sharding`` processes on one
PostgreSQL database, and how long a killed runner's shards take to move.

    python benchmarks/sharding.py --db postgresql://postgres@127.0.0.1:5432/postgres \
        [--size 3000] [--processes 1,3] [--lease 1.5] [--renew 0.3]

Each run gets a schema of its own in the database (dropped afterwards) and a temporary
folder for the files. Convergence is timed from the runners' start until every File is
Ready (read from the store every 50 ms); the shard move from a SIGKILL of one runner
(with 3 or more) until the others hold every shard.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).parents[1]
# This folder holds a reconcile.py (the throughput benchmark): the package goes first.
sys.path.insert(0, str(ROOT))

import runners  # noqa: E402

from reconcile.store import open_store  # noqa: E402


def _apply(url: str, folder: Path, size: int) -> None:
    manifest = folder / "many.yaml"
    manifest.write_text(
        "---\n".join(
            f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: f{i}}}\n"
            f"spec: {{path: 'www/d{i % 20}/f{i}.txt', content: 'file {i}'}}\n"
            for i in range(size)
        )
    )
    subprocess.run(  # noqa: S603 - reconcile, with arguments of our own
        [sys.executable, "-m", "reconcile", "--db", url, "apply", "-f", str(manifest)],
        check=True,
        stdout=subprocess.DEVNULL,
        env=runners.env(),
    )


def _runner(url: str, folder: Path, lease: float, renew: float) -> subprocess.Popen[bytes]:
    return runners.runner(url, folder, "--lease-duration", str(lease), "--renew-interval", str(renew))


async def _state(url: str) -> tuple[int, dict[str, list[int]]]:
    store = await open_store(url, read_only=True)
    try:
        table = await store.shard_table()
        ready, after = 0, None
        while True:
            page = await store.list("files.reconcile.dev", "File", after=after, limit=5000)
            for obj in page.items:
                conditions = obj.body.get("status", {}).get("conditions", [])
                ready += any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            if page.next_after is None:
                break
            after = page.next_after
        return ready, ({} if table is None else table.by_holder())
    finally:
        await store.close()


def _one(base: str, size: int, processes: int, lease: float, renew: float) -> tuple[float, float | None]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(runners.execute(base, f"CREATE SCHEMA {schema}"))
    url = f"{base}?search_path={schema}"
    started_runners: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            _apply(url, Path(folder), size)
            started = time.monotonic()
            started_runners = [_runner(url, Path(folder), lease, renew) for _ in range(processes)]
            while asyncio.run(_state(url))[0] < size:
                time.sleep(0.05)
            converged = time.monotonic() - started
            moved = None
            if processes >= 3:
                started_runners[-1].send_signal(signal.SIGKILL)
                started_runners[-1].wait()
                killed = time.monotonic()
                while True:
                    held = asyncio.run(_state(url))[1]
                    if len(held) == processes - 1 and sum(map(len, held.values())) == 64:
                        break
                    time.sleep(0.02)
                moved = time.monotonic() - killed
            return converged, moved
    finally:
        runners.stop(started_runners)
        asyncio.run(runners.execute(base, f"DROP SCHEMA {schema} CASCADE"))


def main() -> None:
    """Run the measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--size", type=int, default=3000)
    parser.add_argument("--processes", default="1,3")
    parser.add_argument("--lease", type=float, default=1.5)
    parser.add_argument("--renew", type=float, default=0.3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.size} files; lease {args.lease} s, renew every {args.renew} s")
    for count in (int(n) for n in args.processes.split(",")):
        converged, moved = _one(args.db, args.size, count, args.lease, args.renew)
        line = f"{count} process(es): converged in {converged:.1f} s"
        if moved is not None:
            line += f"; a SIGKILLed runner's shards moved in {moved:.2f} s"
        print(line)


if __name__ == "__main__":
    main()
