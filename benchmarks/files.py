"""The files provider end to end, beside plain Python writing the same files.

1. Cold convergence: apply --size File resources (100 per folder) and run the Runtime
   until every one is Ready; beside it, a plain loop writing the same files atomically
   (temporary file, fsync, rename, fsync of the folder) one after another, and the same
   loop on 16 threads (what 16 workers could at best overlap).
2. A no-change pass, read three ways, each beside its own plain limit:

   * a fresh Runtime over the converged store (what ``reconcile run --once`` does the
     next time) lists and decodes the stored Files, observes every file and writes
     nothing; beside it, a plain loop reading and comparing every file with the content
     it already holds in memory (the reading this benchmark began with);
   * the same fresh pass beside a plain loop that first loads the desired state from the
     same store (one stdlib ``sqlite3`` SELECT of the stored File bodies, JSON parsed),
     then reads and compares: the honest limit of a fresh process;
   * the steady pass of a running Runtime: every cached key enqueued at once, as the
     controller's periodic resync does, until every one is reconciled (nothing
     appended); beside it, the plain read and compare: what a level-triggered runner
     does every resync period.

   Each of these is timed in wall and in process CPU seconds (the steadier reading on a
   shared machine), the plain ones after the engine's, on a quiet disk.

    python benchmarks/files.py [--size N] [--json PATH] [--busy]

``--busy``: a CPU-bound process runs beside the whole benchmark (``busy.py``), so every
figure and every limit beside it is measured with the second core busy.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import platform
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

import orjson  # noqa: E402
from busy import burning  # noqa: E402

from reconcile import Runtime  # noqa: E402
from reconcile.controller.queueing import Priority  # noqa: E402
from reconcile_providers.files import FilesProvider  # noqa: E402

PER_FOLDER = 100
WORKERS = 16
#: The files provider's controller for File, as the Runtime names it.
FILE_CONTROLLER = "file.files.reconcile.dev"


def content(index: int) -> bytes:
    """What file ``index`` holds (a small page)."""
    return f"<h1>page {index}</h1>\n<p>{'lorem ipsum ' * 20}</p>\n".encode()


def relative(index: int) -> str:
    """Where file ``index`` goes, under the root."""
    return f"d{index // PER_FOLDER:04d}/f{index:06d}.html"


def write_atomically(path: str, data: bytes) -> None:
    """The limit's write: the same steps the provider takes, nothing else."""
    directory = str(Path(path).parent)
    temporary = f"{path}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    Path(temporary).replace(path)
    folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def plain_loop(root: Path, size: int, threads: int) -> float:
    """Seconds to write every file atomically (folders made first, as needed)."""
    start = time.perf_counter()
    for folder in range((size + PER_FOLDER - 1) // PER_FOLDER):
        (root / f"d{folder:04d}").mkdir(parents=True, exist_ok=True)
    jobs = [(str(root / relative(i)), content(i)) for i in range(size)]
    if threads == 1:
        for path, data in jobs:
            write_atomically(path, data)
    else:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda job: write_atomically(*job), jobs))
    return time.perf_counter() - start


def plain_check(root: Path, size: int) -> tuple[float, float]:
    """Wall and CPU seconds to read every file and compare it with what it should hold
    (the desired contents already in memory)."""
    desired = [content(index) for index in range(size)]
    start, cpu = time.perf_counter(), time.process_time()
    for index in range(size):
        with open(root / relative(index), "rb") as handle:  # noqa: PTH123
            assert handle.read() == desired[index]
        (root / relative(index)).stat()
    return time.perf_counter() - start, time.process_time() - cpu


def plain_load_check(db: Path, root: Path, size: int) -> tuple[float, float]:
    """Wall and CPU seconds to load every File's desired state from the store (stdlib
    ``sqlite3``, each current body JSON parsed), then read and compare every file: what a
    plain program does that keeps its desired state in the same database."""
    start, cpu = time.perf_counter(), time.process_time()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT e.body FROM objects o JOIN events e ON e.revision = o.resource_version "
            "WHERE o.api_group = 'files.reconcile.dev' AND o.kind = 'File' AND o.live"
        ).fetchall()
    finally:
        conn.close()
    checked = 0
    for (body,) in rows:
        spec = orjson.loads(body)["spec"]
        path = root / spec["path"]
        with open(path, "rb") as handle:  # noqa: PTH123
            assert handle.read() == spec["content"].encode()
        path.stat()
        checked += 1
    if checked != size:
        msg = f"loaded {checked} Files from the store, not {size}"
        raise RuntimeError(msg)
    return time.perf_counter() - start, time.process_time() - cpu


async def resync_pass(runtime: Runtime, size: int) -> tuple[float, float]:
    """Wall and CPU seconds from enqueueing every cached File (what the controller's
    periodic resync does) to the last of them reconciled."""
    controller = runtime.controllers[FILE_CONTROLLER]
    done = asyncio.Event()
    seen = [0]

    def finished(_key: object, _outcome: str) -> None:
        seen[0] += 1
        if seen[0] >= size:
            done.set()

    controller.add_listener(finished)
    keys = controller.informer.cached_keys()
    if len(keys) != size:
        msg = f"{len(keys)} Files cached, not {size}"
        raise RuntimeError(msg)
    start, cpu = time.perf_counter(), time.process_time()
    controller.enqueue_many(keys, Priority.RESYNC)
    await done.wait()
    return time.perf_counter() - start, time.process_time() - cpu


def manifest(index: int) -> dict[str, Any]:
    """File ``index`` as a manifest."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": f"page-{index:06d}"},
        "spec": {"path": relative(index), "content": content(index).decode()},
    }


async def engine(db: Path, root: Path, size: int) -> dict[str, Any]:
    """Apply everything, converge, then a fresh runner's no-change pass and a resync of
    it. Both Runtimes tune the collector as ``reconcile run`` does (``gc_tuning``)."""
    config = {"files": {"roots": [str(root)]}}
    start = time.perf_counter()
    async with Runtime(
        db, providers=[FilesProvider()], provider_config=config, workers=WORKERS, gc_tuning=True
    ) as runtime:
        await runtime.wait_synced()
        applied = time.perf_counter()
        await runtime.apply_many([manifest(i) for i in range(size)])
        apply_s = time.perf_counter() - applied
        state = await runtime.wait_converged()
        if not state.converged or state.total != size:
            msg = f"did not converge: {state.ready}/{state.total} Ready"
            raise RuntimeError(msg)
        converge_s = time.perf_counter() - start
        revision = await runtime.client.revision()
    second, cpu = time.perf_counter(), time.process_time()
    async with Runtime(
        db, providers=[FilesProvider()], provider_config=config, workers=WORKERS, gc_tuning=True
    ) as runtime:
        await runtime.wait_synced()
        await runtime.wait_converged()  # the first pass over every cached File
        noop_s, noop_cpu = time.perf_counter() - second, time.process_time() - cpu
        appended = await runtime.client.revision() - revision
        resync_s, resync_cpu = await resync_pass(runtime, size)
        resync_appended = await runtime.client.revision() - revision - appended
    return {
        "apply_s": apply_s,
        "converge_s": converge_s,
        "noop_pass_s": noop_s,
        "noop_pass_cpu_s": noop_cpu,
        "noop_events_appended": appended,
        "resync_pass_s": resync_s,
        "resync_pass_cpu_s": resync_cpu,
        "resync_events_appended": resync_appended,
    }


def main() -> None:
    """Run both cases, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10000, help="how many files")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument("--busy", action="store_true", help="a CPU-bound process beside the whole run")
    args = parser.parse_args()
    size = args.size
    with burning(args.busy) as burner, tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        base = Path(folder)
        sequential = plain_loop(base / "plain", size, 1)
        threaded = plain_loop(base / "threaded", size, WORKERS)
        ours = asyncio.run(engine(base / "state.db", base / "site", size))
        # The plain passes after the engine's, not right after the plain writes: then
        # the disk was still writing back 20,000 files and the plain read waited on it
        # (twice its CPU time in wall time), a limit easier than the engine's own.
        check, check_cpu = plain_check(base / "plain", size)
        load_check, load_check_cpu = plain_load_check(base / "state.db", base / "site", size)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "benchmark": "files",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "size": size,
        "plain_sequential_s": sequential,
        "plain_threads_s": threaded,
        "plain_check_s": check,
        "plain_check_cpu_s": check_cpu,
        "plain_load_check_s": load_check,
        "plain_load_check_cpu_s": load_check_cpu,
        **ours,
        "converge_ratio_vs_sequential": ours["converge_s"] / sequential,
        "converge_ratio_vs_threads": ours["converge_s"] / threaded,
        "noop_ratio": ours["noop_pass_s"] / check,
        "noop_ratio_vs_load_check": ours["noop_pass_s"] / load_check,
        "resync_ratio": ours["resync_pass_s"] / check,
        "noop_cpu_ratio": ours["noop_pass_cpu_s"] / check_cpu,
        "noop_cpu_ratio_vs_load_check": ours["noop_pass_cpu_s"] / load_check_cpu,
        "resync_cpu_ratio": ours["resync_pass_cpu_s"] / check_cpu,
        "peak_rss_mib": peak,
        **burner.record(),
    }
    # (name, seconds, x limit, CPU seconds, CPU x limit): the passes are CPU-bound, and
    # on a shared machine their CPU ratios are the steadier reading.
    rows: list[tuple[str, float, float, float | None, float | None]] = [
        ("cold: plain loop, 1 thread", sequential, 1.0, None, None),
        (f"cold: plain loop, {WORKERS} threads", threaded, threaded / sequential, None, None),
        (
            "cold: reconcile (apply + converge)",
            ours["converge_s"],
            ours["converge_s"] / sequential,
            None,
            None,
        ),
        ("  of which apply", ours["apply_s"], ours["apply_s"] / sequential, None, None),
        ("no change: plain read + compare", check, 1.0, check_cpu, 1.0),
        ("no change: plain load + read + compare", load_check, 1.0, load_check_cpu, 1.0),
        (
            "no change: reconcile run pass",
            ours["noop_pass_s"],
            result["noop_ratio"],
            ours["noop_pass_cpu_s"],
            result["noop_cpu_ratio"],
        ),
        (
            "  the same, x plain load + read + compare",
            ours["noop_pass_s"],
            result["noop_ratio_vs_load_check"],
            ours["noop_pass_cpu_s"],
            result["noop_cpu_ratio_vs_load_check"],
        ),
        (
            "no change: resync of a running runner",
            ours["resync_pass_s"],
            result["resync_ratio"],
            ours["resync_pass_cpu_s"],
            result["resync_cpu_ratio"],
        ),
    ]
    print(f"{size} files, {PER_FOLDER} per folder{burner.title}")
    print(f"{'case':<42} {'seconds':>9} {'x limit':>8} {'cpu s':>8} {'cpu x':>6}")
    for name, seconds, ratio, cpu, cpu_ratio in rows:
        cpu_text = "" if cpu is None else f"{cpu:.2f}"
        cpu_ratio_text = "" if cpu_ratio is None else f"{cpu_ratio:.2f}"
        print(f"{name:<42} {seconds:>9.2f} {ratio:>8.2f} {cpu_text:>8} {cpu_ratio_text:>6}")
    print(
        f"events appended: fresh pass {ours['noop_events_appended']}, resync pass "
        f"{ours['resync_events_appended']}; peak RSS {peak:.0f} MiB"
    )
    if burner.busy:
        print(burner.summary())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
