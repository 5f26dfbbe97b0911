"""An admission hook's rule across objects in a Runtime: read from the informer cache
(``HookReader``, the default in a Runtime) or from the store, in one run.

A Gadget kind has one validating hook: its title is unique in its namespace (the hook
lists every gadget, as the example operator's ``unique_title`` does when a title
changes). --size gadgets are stored; then --applies applies, one at a time, each
changing one gadget's title, are timed three ways:

* ``cache``: the hook's ``request.client`` is the Runtime's ``HookReader`` (synced
  informer: no store round trip);
* ``store``: the hook reads through the client, as outside a Runtime;
* ``limit``: the same hook reading nothing (the chain, admission and the write only):
  what no reader can beat.

    python benchmarks/hook_reads.py [--size N] [--applies M] [--runs R] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconcile import AdmissionRequest, FieldError, Kind, KindRegistry, Runtime  # noqa: E402
from reconcile.controller import Context, Request, Result  # noqa: E402


@attrs.frozen
class GadgetSpec:
    """A gadget: a title unique in its namespace."""

    title: str = ""


class Switch:
    """Whether the hook reads (off: the limit)."""

    reads = True


def gadget_kind() -> Kind:
    """Gadget with its unique-title hook."""
    kind = Kind("gadgets.example.dev/v1", "Gadget", GadgetSpec)

    @kind.validating
    async def unique_title(request: AdmissionRequest) -> list[FieldError]:
        if not Switch.reads:
            return []
        listed = await request.client.list("Gadget", namespace=request.object.metadata.namespace)
        return [
            FieldError("spec.title", f"taken by {o.metadata.name}")
            for o in listed.items
            if o.metadata.name != request.object.metadata.name and o.spec.title == request.spec.title
        ]

    return kind


def gadget(index: int, title: str) -> dict[str, Any]:
    """Gadget ``index`` as a manifest."""
    return {
        "apiVersion": "gadgets.example.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": f"g-{index:05d}"},
        "spec": {"title": title},
    }


async def idle(_request: Request, _context: Context) -> Result | None:
    """Nothing to do: the controller is here for its informer."""
    return None


async def timed(runtime: Runtime, size: int, applies: int, round_: int) -> float:
    """Seconds per apply of ``applies`` title changes, one at a time."""
    start = time.perf_counter()
    for i in range(applies):
        await runtime.apply(gadget(i % size, f"title {i}-{round_}"))
    return (time.perf_counter() - start) / applies


async def main() -> None:
    """Measure and print the table; write JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--applies", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kind = gadget_kind()
    results: dict[str, list[float]] = {"cache": [], "store": [], "limit": []}
    with tempfile.TemporaryDirectory() as folder:
        runtime = Runtime(
            Path(folder) / "hooks.db", providers=[], kinds=KindRegistry([kind]), resync_period=None
        )
        runtime.controller(kind)(idle)
        async with runtime:
            await runtime.apply_many([gadget(i, f"title {i}") for i in range(args.size)], atomic=True)
            informer = runtime.cache.informer(kind)
            async with asyncio.timeout(60):  # the cache holds every gadget before the timing
                while not informer.synced.is_set() or len(informer.list()) < args.size:
                    await asyncio.sleep(0.01)
            cached_reader = runtime.client.engine.reader
            round_ = 0
            for _ in range(args.runs):
                for way in ("cache", "store", "limit"):
                    round_ += 1
                    Switch.reads = way != "limit"
                    runtime.client.engine.reader = runtime.client if way == "store" else cached_reader
                    results[way].append(await timed(runtime, args.size, args.applies, round_))
    load = os.getloadavg()
    print(f"{args.size} gadgets, {args.applies} applies per run, {args.runs} runs; load {load[0]:.1f}")
    print(f"{'reader':<8} {'min ms':>8} {'median ms':>10} {'max ms':>8} {'x limit':>8}")
    limit = statistics.median(results["limit"])
    for way, times in results.items():
        median = statistics.median(times)
        print(
            f"{way:<8} {min(times) * 1000:>8.2f} {median * 1000:>10.2f} "
            f"{max(times) * 1000:>8.2f} {median / limit:>8.2f}"
        )
    if args.json is not None:
        rows = [
            {
                "phase": way,
                "min_s": min(times),
                "median_s": statistics.median(times),
                "max_s": max(times),
                "runs_s": times,
            }
            for way, times in results.items()
        ]
        document = {"benchmark": "hook_reads", "size": args.size, "applies": args.applies, "load": load}
        args.json.write_text(json.dumps({**document, "rows": rows}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
