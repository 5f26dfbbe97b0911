"""Reconcile throughput, each figure beside its limit measured in the same run.

1. Steady-state no-op reconciles/s through a Controller (work queue, workers, spans and
   metrics through the no-op OpenTelemetry API) beside a bare asyncio dedup queue with 16
   workers making the same no-op calls; best of three runs of each, interleaved.
2. Cold convergence of 1,000 .. --size resources with a no-op provider (apply all, run
   until all Ready) beside a minimal hand-written loop with sqlite3 that appends the
   declarations, rebuilds a dict cache and writes one durable status event per resource,
   committed 1,000 at a time (the limit); beside it, as references, the same loop
   committing (and fsyncing) each status event on its own, and the contract floor: only
   the per-resource work the engine's contract requires (typed admission, three durable
   events, a typed cache entry, asyncio workers), as cheaply as Python allows. The
   references are in ``limits.py``.
3. A full resync of every converged resource: events appended (must be 0) and seconds.

Garbage-collector pauses are recorded through gc.callbacks.

    python benchmarks/reconcile.py [--size N] [--json PATH] [--workers W] [--db postgresql://...] [--busy]

``--busy``: a CPU-bound process runs beside the whole benchmark (``busy.py``), so every
figure and every limit beside it is measured with the second core busy.

``--db`` (a PostgreSQL server, by the URL of any of its databases): each cold convergence
runs again on a database of its own made there (dropped afterwards), beside SQLite's in
the same run.

``--workers`` sets the controller's workers for cold convergence (16, the Runtime's
default, unless given). A worker does not wait for its create's outcome write to commit
(it lands while the worker goes on, up to 4 per worker at once), so once the applies are
in, a commit holds up to about five writes per worker: more workers, fuller commits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from busy import burning  # noqa: E402
from limits import THING, contract_floor, minimal_loop  # noqa: E402

from reconcile import (  # noqa: E402
    ExternalClient,
    Kind,
    KindRegistry,
    Observation,
    Request,
    Result,
    Runtime,
    connect,
)
from reconcile.controller import Cache, Controller, InformerEvent, Priority  # noqa: E402
from reconcile.model import ObjectKey  # noqa: E402
from reconcile.runtime.collecting import cache_grew, collecting_less  # noqa: E402

#: The Runtime's collector tuning (``gc_tuning``, as ``reconcile run`` has it), unless
#: RECONCILE_BENCH_GC_TUNING=0 (or the former RECONCILE_BENCH_FREEZE_GC=0).
_GC_TUNING = os.environ.get("RECONCILE_BENCH_GC_TUNING", os.environ.get("RECONCILE_BENCH_FREEZE_GC", "1"))
GC_TUNING = _GC_TUNING == "1"


class NoopClient:
    """An external system that answers at once."""

    def __init__(self) -> None:
        self.made: set[str] = set()

    async def observe(self, resource: Any) -> Observation:
        """Exists once created; always up to date."""
        return Observation(exists=resource.metadata.name in self.made, owner=resource.metadata.uid)

    async def create(self, resource: Any) -> str | None:
        """Remember it."""
        self.made.add(resource.metadata.name)
        return None

    async def update(self, resource: Any, observation: Observation) -> None:
        """Nothing to do."""

    async def delete(self, resource: Any) -> None:
        """Forget it."""
        self.made.discard(resource.metadata.name)

    async def close(self) -> None:
        """Nothing to release."""


class NoopProvider:
    """The provider of Things."""

    name = "noop"

    def __init__(self) -> None:
        self.client = NoopClient()

    @property
    def kinds(self) -> Sequence[Kind]:
        """Thing."""
        return (THING,)

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:  # noqa: ARG002
        """The shared client."""
        return self.client


class GcPauses:
    """Durations of collections while active."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: Mapping[str, Any]) -> None:  # noqa: ARG002
        """gc.callbacks hook."""
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)

    def __enter__(self) -> Self:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop recording."""
        gc.callbacks.remove(self)

    def summary(self) -> dict[str, float]:
        """Count, total seconds and longest pause in milliseconds."""
        return {
            "collections": len(self.pauses),
            "total_s": sum(self.pauses),
            "max_ms": max(self.pauses, default=0.0) * 1000,
        }


# -- 1. steady-state no-op reconciles ------------------------------------------------------


async def bare_loop(keys: int, rounds: int) -> float:
    """The limit: a dedup set over an asyncio.Queue, 16 workers, the same no-op
    reconciler called with the same requests."""
    queue: asyncio.Queue[ObjectKey] = asyncio.Queue()
    queued: set[ObjectKey] = set()
    done = 0
    finished = asyncio.Event()
    reconciler = Noop()
    names = [ObjectKey(THING.api_group, THING.kind, "default", f"t{i}") for i in range(keys)]

    async def worker() -> None:
        nonlocal done
        while True:
            key = await queue.get()
            queued.discard(key)
            await reconciler.reconcile(Request(key))
            done += 1
            if done == keys * rounds:
                finished.set()

    workers = [asyncio.create_task(worker()) for _ in range(16)]
    started = time.perf_counter()
    for _ in range(rounds):
        for key in names:
            if key not in queued:
                queued.add(key)
                queue.put_nowait(key)
        while queued:
            await asyncio.sleep(0)
    await finished.wait()
    elapsed = time.perf_counter() - started
    for task in workers:
        task.cancel()
    return keys * rounds / elapsed


class Noop:
    """A reconciler that does nothing."""

    def __init__(self) -> None:
        self.calls = 0

    async def reconcile(self, request: Request) -> Result | None:  # noqa: ARG002
        """Count and return."""
        self.calls += 1
        return None


async def controller_loop(db: Path, keys: int, rounds: int, *, stored: bool = True) -> float:
    """Our queue, workers, span and metrics per reconcile, no-op reconciler. ``stored``:
    the keys' objects exist (the steady state: the informer caches them); otherwise the
    keys name nothing (every reconcile is of an object that is gone)."""
    async with connect(db, kinds=KindRegistry([THING])) as client:
        if stored:
            with collecting_less() if GC_TUNING else contextlib.nullcontext():
                await client.apply_many(
                    [
                        {"apiVersion": THING.api_version, "kind": "Thing", "metadata": {"name": f"t{i}"}}
                        for i in range(keys)
                    ]
                )
        reconciler = Noop()
        # The Runtime's collector tuning, wired by hand (a controller made alone has none).
        cache = Cache(client, on_growth=cache_grew if GC_TUNING else None)
        controller = Controller(client, THING, reconciler, cache=cache, workers=16, resync_period=None)
        task = asyncio.create_task(controller.run())
        await controller.wait_synced()
        names = [ObjectKey(THING.api_group, THING.kind, "default", f"t{i}") for i in range(keys)]
        # The informer's first list enqueued every stored key: those reconciles go first.
        while reconciler.calls < (keys if stored else 0):
            await asyncio.sleep(0)
        reconciler.calls = 0
        started = time.perf_counter()
        for round_ in range(rounds):
            for key in names:
                controller.enqueue(key, Priority.RESYNC)
            while reconciler.calls < keys * (round_ + 1):
                await asyncio.sleep(0)
        elapsed = time.perf_counter() - started
        await controller.shutdown()
        task.cancel()
        return keys * rounds / elapsed


# -- 2. cold convergence ------------------------------------------------------------------------


async def cold_convergence(db: Path | str, count: int, workers: int) -> dict[str, Any]:
    """Apply ``count`` Things and run until every one is Ready; then a full resync."""
    provider = NoopProvider()
    runtime = Runtime(
        db, providers=[provider], poll_interval=3600, resync_period=None, workers=workers, gc_tuning=GC_TUNING
    )
    with GcPauses() as pauses:
        started = time.perf_counter()
        loop_cpu, process_cpu = time.thread_time(), time.process_time()
        async with runtime:
            # The controllers' first (empty) list done before the apply: a list racing the
            # apply's commits would decode what the apply's results are about to put in.
            await runtime.wait_synced()
            controller = next(iter(runtime.controllers.values()))
            ready: set[str] = set()
            all_ready = asyncio.Event()

            def track(event: InformerEvent) -> None:
                # Counted from the informer's own notifications: no polling of 100k objects.
                condition = event.new.status.condition("Ready") if event.new is not None else None
                if condition is not None and condition.status.value == "True":
                    ready.add(event.key.name)
                    if len(ready) == count:
                        all_ready.set()

            controller.informer.add_handler(track)
            # Decodes per created object (a stored body structured into a Resource): the
            # apply's result, one. The engine's write (its create being atomic, one per
            # object) is built from the object it acted on, and the watch events of both
            # writes are dropped unparsed by the cache, which holds them already.
            decoder = runtime.client.decoder
            decode = decoder.resource
            decodes = [0]

            def counting(body: Any, **kwargs: Any) -> Any:
                decodes[0] += 1
                return decode(body, **kwargs)

            decoder.resource = counting  # type: ignore[method-assign]
            manifests = [
                {
                    "apiVersion": THING.api_version,
                    "kind": "Thing",
                    "metadata": {"name": f"t{i}"},
                    "spec": {"size": i},
                }
                for i in range(count)
            ]
            # The bulk apply: one admission per document, writes sharing group commits.
            for first in range(0, count, 10_000):
                await runtime.apply_many(manifests[first : first + 10_000])
            applied = time.perf_counter() - started
            await all_ready.wait()
            converged = time.perf_counter() - started
            # The loop's thread on the CPU, and the whole process (the writer connection's
            # thread besides): what is left of the wall time, the loop waited (on commits,
            # or on the GIL while the writer ran Python).
            loop_cpu, process_cpu = time.thread_time() - loop_cpu, time.process_time() - process_cpu
            decoded = decodes[0]
            revision = await runtime.client.revision()
            calls_before = len(provider.client.made)
            resync_started = time.perf_counter()
            # What the controller's periodic resync does.
            controller.enqueue_many(controller.informer.cached_keys(), Priority.RESYNC)
            while (stats := controller.queue.statistics()).depth or stats.processing:
                await asyncio.sleep(0.005)
            resync = time.perf_counter() - resync_started
            appended = await runtime.client.revision() - revision
    return {
        "size": count,
        "workers": workers,
        "apply_s": applied,
        "converge_s": converged,
        "resync_s": resync,
        "resync_events_appended": appended,
        "created": calls_before,
        "decodes_per_object": decoded / count,
        "loop_cpu_share": loop_cpu / converged,
        "process_cpu_share": process_cpu / converged,
        "gc": pauses.summary(),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def postgres_convergence(server: str, size: int, workers: int) -> dict[str, Any]:
    """:func:`cold_convergence` on a new database of the PostgreSQL server ``server``
    names (any of its databases), dropped afterwards."""
    import runners  # noqa: PLC0415 - asyncpg only with --db

    with runners.database(server) as url:
        return asyncio.run(cold_convergence(url, size, workers))


def made_databases() -> list[str]:
    """The databases ``--db`` made (and dropped)."""
    import runners  # noqa: PLC0415 - asyncpg only with --db

    return runners.MADE


def main() -> None:
    """Run every case, print the tables, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10000, help="largest cold convergence")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument(
        "--workers",
        type=int,
        default=16,
        help="the controller's workers for cold convergence (default 16, the Runtime's default)",
    )
    parser.add_argument(
        "--db",
        help="a postgresql:// URL of a server: each cold convergence also on a database of its own there",
    )
    parser.add_argument("--busy", action="store_true", help="a CPU-bound process beside the whole run")
    args = parser.parse_args()
    sizes = [n for n in (1000, 10000, 100000) if n < args.size] + [args.size]
    result: dict[str, Any] = {
        "benchmark": "reconcile",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    with burning(args.busy) as burner, tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        base = Path(folder)
        keys, rounds = min(args.size, 10000), 5
        # Best of three for each, interleaved: a run of a fraction of a second is at the
        # mercy of whatever else the machine does, and both sides get the same chances.
        limits, ours_runs, absent_runs = [], [], []
        for attempt in range(3):
            limits.append(asyncio.run(bare_loop(keys, rounds)))
            ours_runs.append(asyncio.run(controller_loop(base / f"noop{attempt}.db", keys, rounds)))
            absent_runs.append(
                asyncio.run(controller_loop(base / f"absent{attempt}.db", keys, rounds, stored=False))
            )
        limit, ours, absent = max(limits), max(ours_runs), max(absent_runs)
        result["noop"] = {
            "bare_per_s": limit,
            "controller_per_s": ours,
            "ratio": ours / limit,
            "controller_absent_per_s": absent,
            "absent_ratio": absent / limit,
            "bare_runs": limits,
            "controller_runs": ours_runs,
            "controller_absent_runs": absent_runs,
        }
        print(
            f"no-op reconciles/s (best of 3){burner.title}: controller {ours:,.0f} "
            f"(keys without objects: {absent:,.0f}), "
            f"bare asyncio {limit:,.0f}, ratio {ours / limit:.2f} ({absent / limit:.2f})"
        )
        result["convergence"] = []
        header = (
            "size",
            "limit s",
            "ours s",
            "x limit",
            "per-event s",
            "x per-event",
            "floor s",
            "x floor",
            "resync s",
            "resync events",
            "decodes/obj",
            "loop cpu %",
            "gc max ms",
            "rss MiB",
            *(("pg s", "pg/sqlite") if args.db else ()),
        )
        print(f"cold convergence{burner.title}")
        print(" ".join(f"{h:>11}" for h in header))
        for index, size in enumerate(sizes):
            baseline = minimal_loop(base / f"minimal{index}.db", size)
            # A reference, not the limit: the same loop with each status event committed
            # (and fsynced) on its own, as the engine's writes are acknowledged one by one.
            per_event = minimal_loop(base / f"per-event{index}.db", size, batch=1)
            floor = asyncio.run(contract_floor(base / f"floor{index}.db", size, args.workers))
            row = asyncio.run(cold_convergence(base / f"cold{index}.db", size, args.workers))
            row["limit_s"] = baseline
            row["ratio"] = row["converge_s"] / baseline
            row["per_event_commit_s"] = per_event
            row["per_event_ratio"] = row["converge_s"] / per_event
            row["floor_s"] = floor
            row["floor_ratio"] = row["converge_s"] / floor
            if args.db:
                row["postgres"] = postgres_convergence(args.db, size, args.workers)
                result["databases"] = made_databases()
            result["convergence"].append(row)
            cells = (
                f"{size}",
                f"{baseline:.2f}",
                f"{row['converge_s']:.2f}",
                f"{row['ratio']:.1f}",
                f"{per_event:.2f}",
                f"{row['per_event_ratio']:.1f}",
                f"{floor:.2f}",
                f"{row['floor_ratio']:.1f}",
                f"{row['resync_s']:.2f}",
                f"{row['resync_events_appended']}",
                f"{row['decodes_per_object']:.2f}",
                f"{100 * row['loop_cpu_share']:.0f}",
                f"{row['gc']['max_ms']:.1f}",
                f"{row['peak_rss_mib']:.0f}",
            )
            if args.db:
                pg = row["postgres"]["converge_s"]
                cells = (*cells, f"{pg:.2f}", f"{pg / row['converge_s']:.1f}")
            print(" ".join(f"{c:>11}" for c in cells))
    result.update(burner.record())
    if burner.busy:
        print(burner.summary())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
