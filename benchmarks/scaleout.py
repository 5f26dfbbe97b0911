"""Scale-out on PostgreSQL: cold convergence of N resources whose provider sleeps 5 ms per
call, by 1, 2 and 3 ``reconcile run --sharding`` processes on one database, each beside
the physical limit measured in the same run; and the watch latency across processes.

    python benchmarks/scaleout.py --db postgresql://postgres@127.0.0.1:5432/postgres \
        [--size 10000] [--processes 1,2,3] [--workers 16] [--latency 0.005] [--json PATH] \
        [--lease 1.5] [--renew 0.3] [--no-analyze] [--timeout 900]

The provider is the memory provider with every call sleeping ``--latency`` seconds
(``benchmarks/sleepy.py``), installed for the runners as a distribution of its own in a
temporary folder on their ``PYTHONPATH``. Each measurement gets a database of its own on
the server ``--db`` names (dropped afterwards): the N Buckets are applied, then the
tables are analyzed (``--no-analyze``: not; see below), the runners start
(``--lease-duration 1.5 --renew-interval 0.3`` unless ``--lease``/``--renew`` say
otherwise: the shards spread within about a second) and the time runs until every
Bucket is Ready (polled with SQL every 0.25 s: the objects written since the apply, then
those whose last event says Ready; all Ready checked through the store once converged).

The limit: a bare asyncio loop with workers x processes tasks, each taking a resource
and sleeping the latency once per provider call the engine made per resource (counted
in-process on a small SQLite run with the same provider). Beside each figure, the CPU
each runner spent, the server's backends for that database, and the whole machine's
share busy (2 cores: what saturates when the speedup stops), and the median time of a
one-row committed insert measured just before the runners start (each create waits on
two durable commits).

Why ANALYZE: until a table's statistics exist, the planner believes the objects table
nearly empty. The watch's query (events by revision joined to their objects, filtered
by kind) used to walk every object of the kind for each page it read then: about 45 ms
a page at 10,000 objects, on every runner's every wake-up, where 0.03 ms would do. It
no longer depends on the statistics (each event's object is looked up by key), and
``--no-analyze`` checks that it stays so: the store before autovacuum's next round (a
minute by default; it is off on the test machine's server) should measure as after.

The watch latency: a writer process's acknowledged applies to a watch in this process
(LISTEN/NOTIFY waking it), ``benchmarks/store.py``'s measurement, on a database of its
own with nothing else running.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# This folder holds a reconcile.py (the throughput benchmark): the package goes first.
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402
import runners  # noqa: E402
import sleepy  # noqa: E402
from store import cross_process_latency  # noqa: E402

from reconcile import KindRegistry, Runtime, connect  # noqa: E402
from reconcile.model import ObjectKey  # noqa: E402
from reconcile.runtime.collecting import collecting_less  # noqa: E402
from reconcile.store import open_store  # noqa: E402
from reconcile.store.fencing import shard_of  # noqa: E402
from reconcile.testing.memory import BUCKET  # noqa: E402


def install(folder: Path) -> Path:
    """``sleepy`` as a distribution in ``folder`` (a ``PYTHONPATH`` entry for the
    runners): the module and a dist-info naming its provider under the
    ``reconcile.providers`` entry points, as ``memory``."""
    shutil.copy(HERE / "sleepy.py", folder / "reconcile_bench_sleepy.py")
    info = folder / "reconcile_bench_sleepy-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reconcile-bench-sleepy\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[reconcile.providers]\nmemory = reconcile_bench_sleepy:provider\n"
    )
    return folder


def manifests(size: int) -> list[dict[str, Any]]:
    """``size`` Buckets."""
    return [
        {
            "apiVersion": BUCKET.api_version,
            "kind": "Bucket",
            "metadata": {"name": f"b{i}"},
            "spec": {"name": f"b{i}", "value": f"v{i}"},
        }
        for i in range(size)
    ]


async def apply(url: str, size: int) -> int:
    """Declare ``size`` Buckets; the store's revision after."""
    registry = KindRegistry()
    registry.register(BUCKET, provider="memory")
    async with connect(url, kinds=registry) as client:
        documents = manifests(size)
        with collecting_less():
            for first in range(0, size, 10_000):
                await client.apply_many(documents[first : first + 10_000])
        return await client.revision()


async def calls_per_resource(folder: Path, latency: float, size: int) -> float:
    """Provider calls the engine makes per created Bucket, counted in-process (SQLite)."""
    provider = sleepy.provider()
    provider.cloud.latency = latency
    async with Runtime(folder / "calls.db", providers=[provider], poll_interval=3600) as runtime:
        await runtime.apply_many(manifests(size))
        await runtime.wait_converged(timeout=300)
    return sum(provider.cloud.calls.values()) / size


async def bare_limit(size: int, calls: int, tasks: int, latency: float) -> float:
    """Seconds for ``tasks`` asyncio tasks to take ``size`` resources off a queue, each
    sleeping ``latency`` ``calls`` times: what the provider's waits alone cost."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for item in range(size):
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            queue.get_nowait()
            for _ in range(calls):
                await asyncio.sleep(latency)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return time.perf_counter() - started


# The objects the engine wrote after the apply (cheap: the first to wait on), and those
# whose last event's body says Ready=True (the encoder writes a condition's type, then its
# status).
TOUCHED = "SELECT count(*) FROM reconcile_objects WHERE resource_version > $1"
SETTLED = (
    "SELECT count(*) FROM reconcile_objects o JOIN reconcile_events e ON e.revision = o.resource_version "
    """WHERE o.resource_version > $1 AND strpos(e.body, '{"type":"Ready","status":"True"') > 0"""
)
# Creates made again: a shard that moved while the runners spread (within their first
# second) goes to a runner whose memory provider has not got the items the previous
# holder made; it finds them missing and makes them again.
DRIFTS = "SELECT count(*) FROM reconcile_events WHERE type = 'DriftDetected'"


async def wait_converged(url: str, head: int, size: int, deadline: float) -> None:
    """Poll until every object's last event says Ready; at the deadline, TimeoutError
    naming the shards of those left and their holders."""
    connection = await asyncpg.connect(url)
    try:
        for query in (TOUCHED, SETTLED):
            while await connection.fetchval(query, head) < size:
                if time.monotonic() > deadline:
                    raise TimeoutError(await _left(connection, head, size))
                await asyncio.sleep(0.25 if query is TOUCHED else 0.05)
    finally:
        await connection.close()


async def _left(connection: Any, head: int, size: int) -> str:
    """What is not converged: how many, in which shards, held by whom."""
    rows = await connection.fetch(
        "SELECT api_group, kind, namespace, name FROM reconcile_objects WHERE resource_version <= $1", head
    )
    holders = dict(await connection.fetch("SELECT shard, holder FROM reconcile_shards"))
    shards = collections.Counter(shard_of(ObjectKey(*row), len(holders) or 1) for row in rows)
    by_holder: dict[str, list[int]] = {}
    for shard in sorted(shards):
        by_holder.setdefault(str(holders.get(shard)), []).append(shard)
    done = size - len(rows)
    return f"not converged in time: {done} of {size} written after the apply; the rest by holder: {by_holder}"


async def count_ready(url: str) -> int:
    """Buckets whose status says Ready=True, read through the store."""
    store = await open_store(url, read_only=True)
    try:
        ready, after = 0, None
        while True:
            page = await store.list(BUCKET.api_group, BUCKET.kind, after=after, limit=5000)
            for obj in page.items:
                conditions = obj.body.get("status", {}).get("conditions", [])
                ready += any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            if page.next_after is None:
                return ready
            after = page.next_after
    finally:
        await store.close()


def converge(
    server: str,
    folder: Path,
    size: int,
    *,
    processes: int,
    workers: int,
    latency: float,
    analyze: bool,
    timeout: float,
    lease: tuple[float, float],
) -> dict[str, Any]:
    """Apply ``size`` Buckets to a new database (then ANALYZE it, with ``analyze``), start
    ``processes`` runners, time them to convergence; what each spent."""
    with runners.database(server) as url:
        head = asyncio.run(apply(url, size))
        if analyze:
            asyncio.run(runners.execute(url, "ANALYZE"))
        commit = asyncio.run(commit_latency(url))
        before = runners.busy_ticks()
        started = time.monotonic()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            duration, renew = lease
            arguments = ["--workers", str(workers)]
            arguments += ["--lease-duration", str(duration), "--renew-interval", str(renew)]
            latent = {"RECONCILE_BENCH_LATENCY": str(latency)}
            procs = [
                runners.runner(url, folder, *arguments, paths=(folder,), environment=latent)
                for _ in range(processes)
            ]
            asyncio.run(wait_converged(url, head, size, started + timeout))
            elapsed = time.monotonic() - started
            busy, total = (b - a for a, b in zip(before, runners.busy_ticks(), strict=True))
            cpu = [runners.cpu_seconds(p.pid) for p in procs]
            server_cpu = sum(runners.cpu_seconds(pid) for pid in asyncio.run(runners.server_pids(url)))
            dead = [p.returncode for p in procs if p.poll() is not None]
            drifts = asyncio.run(fetchval(url, DRIFTS))
        finally:
            runners.stop(procs)
        ready = asyncio.run(count_ready(url))
    if dead or ready != size:
        msg = f"{processes} runner(s): {ready} of {size} Ready, exit codes of those that stopped: {dead}"
        raise RuntimeError(msg)
    return {
        "processes": processes,
        "converge_s": elapsed,
        "runner_cpu_s": cpu,
        "server_cpu_s": server_cpu,
        "machine_busy_share": busy / total,
        "recreated_after_a_move": drifts,
        "commit_ms": commit * 1000,
    }


async def commit_latency(url: str, count: int = 20) -> float:
    """The median seconds of a one-row committed insert, ``count`` in a row: what each of
    the engine's durable writes waits at least, on this server at this moment."""
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("CREATE TABLE reconcile_bench_probe (n integer)")
        times = []
        for n in range(count):
            started = time.perf_counter()
            await connection.execute("INSERT INTO reconcile_bench_probe VALUES ($1)", n)
            times.append(time.perf_counter() - started)
        await connection.execute("DROP TABLE reconcile_bench_probe")
        return statistics.median(times)
    finally:
        await connection.close()


async def fetchval(url: str, query: str) -> Any:
    """One value ``query`` reads."""
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetchval(query)
    finally:
        await connection.close()


def main() -> None:
    """Measure, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a postgresql:// URL of the server (any database)")
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--processes", default="1,2,3")
    parser.add_argument(
        "--workers", type=int, default=16, help="each runner's workers (reconcile run --workers)"
    )
    parser.add_argument("--latency", type=float, default=sleepy.LATENCY, help="seconds per provider call")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument("--lease", type=float, default=1.5, help="the runners' --lease-duration")
    parser.add_argument("--renew", type=float, default=0.3, help="the runners' --renew-interval")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one convergence may take")
    parser.add_argument(
        "--no-analyze",
        dest="analyze",
        action="store_false",
        help="start the runners on the freshly filled tables, before their statistics exist",
    )
    args = parser.parse_args()
    # A SIGTERM stops the runners and drops the databases, as the end of a run does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        asyncio.run(runners.execute(args.db, "SELECT 1"))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        parser.error(f"--db: cannot reach the server: {exc}")
    counts = [int(n) for n in args.processes.split(",")]
    result: dict[str, Any] = {
        "benchmark": "scaleout",
        "size": args.size,
        "workers": args.workers,
        "latency_s": args.latency,
        "analyzed": args.analyze,
        "lease_s": args.lease,
        "renew_s": args.renew,
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as name:
        folder = install(Path(name))
        calls = asyncio.run(calls_per_resource(folder, args.latency, min(args.size, 200)))
        result["calls_per_resource"] = calls
        print(
            f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.size} Buckets, "
            f"{calls:g} provider calls each of {args.latency * 1000:g} ms; {args.workers} workers per runner"
        )
        header = (
            "runners",
            "limit s",
            "ours s",
            "x limit",
            "speedup",
            "runner cpu s",
            "server cpu s",
            "busy %",
            "remade",
            "commit ms",
        )
        print(" ".join(f"{h:>12}" for h in header))
        rows = []
        for count in counts:
            limit = asyncio.run(bare_limit(args.size, round(calls), args.workers * count, args.latency))
            row = converge(
                args.db,
                folder,
                args.size,
                processes=count,
                workers=args.workers,
                latency=args.latency,
                analyze=args.analyze,
                timeout=args.timeout,
                lease=(args.lease, args.renew),
            )
            row["limit_s"] = limit
            row["ratio"] = row["converge_s"] / limit
            row["speedup"] = rows[0]["converge_s"] / row["converge_s"] if rows else 1.0
            rows.append(row)
            cells = (
                f"{count}",
                f"{limit:.2f}",
                f"{row['converge_s']:.2f}",
                f"{row['ratio']:.2f}",
                f"{row['speedup']:.2f}",
                "+".join(f"{c:.1f}" for c in row["runner_cpu_s"]),
                f"{row['server_cpu_s']:.1f}",
                f"{100 * row['machine_busy_share']:.0f}",
                f"{row['recreated_after_a_move']}",
                f"{row['commit_ms']:.1f}",
            )
            print(" ".join(f"{c:>12}" for c in cells))
        result["rows"] = rows
        with runners.database(args.db) as url:
            latencies = asyncio.run(cross_process_latency(url, max(20, min(args.size // 50, 200))))
    quantiles = statistics.quantiles(latencies, n=100)
    result["cross_process_watch_latency"] = {
        "count": len(latencies),
        "median_ms": statistics.median(latencies) * 1000,
        "p99_ms": quantiles[-1] * 1000,
        "max_ms": max(latencies) * 1000,
    }
    lat = result["cross_process_watch_latency"]
    print(
        f"cross-process watch latency over {lat['count']} writes: p50 {lat['median_ms']:.2f} ms, "
        f"p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.2f} ms"
    )
    result["loadavg_after"] = os.getloadavg()
    result["databases"] = runners.MADE
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
