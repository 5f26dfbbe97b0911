"""The example operator (examples/operator/sites.py) beside the same children applied
directly, and beside plain Python writing the same files, in one run.

1. Cold convergence: apply --size StaticSites of --pages pages each and run the Runtime
   until every site and every child (a Directory and a File per page: --size x
   (--pages + 1) children) is Ready; beside it, the same Directories and Files applied
   directly (apply_many) and converged by the files provider alone, and a plain loop
   making the folders and writing the files atomically (temporary file, fsync, rename,
   fsync of the folder: the provider's steps, nothing else) -- the limit.
2. One page changed in each site: the sites applied again, each with one page's body
   changed, until converged; beside it, the same Files applied directly, and the plain
   loop rewriting those files.

The operator's overhead is its time over the direct one's (target: under 1.5x): what
the StaticSite objects, their admission hooks, their controller's server-side applies
of every child on each pass, the owner index and the status cost on top of the same
files.

    python benchmarks/operators.py [--size N] [--pages P] [--workers W] [--gc-tuning] [--json PATH]

``--gc-tuning`` runs both Runtimes with ``gc_tuning=True`` (what ``reconcile run`` has):
the cyclic collector's full collections are much of what the operator's larger process
costs without it (see docs/explanation/performance.md).

(Not ``operator.py``: in this folder, the first on ``sys.path`` of every benchmark run
as a script, that name would hide the standard library's ``operator`` from them all.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sys
import tempfile
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "providers"))
sys.path.insert(2, str(ROOT / "examples" / "operator"))

import sites  # noqa: E402
from files import write_atomically  # noqa: E402

from reconcile import Request, Runtime  # noqa: E402
from reconcile_providers.files import FilesProvider  # noqa: E402

WORKERS = 16
TARGET = 1.5


def site_name(index: int) -> str:
    """Site ``index``'s name."""
    return f"site-{index:05d}"


def pages_of(pages: int, changed: bool) -> dict[str, str]:
    """A site's pages: ``pages`` small bodies; ``changed``: the first one's body edited."""
    body = "<p>" + "lorem ipsum " * 20 + "</p>"
    declared = {f"page-{p:02d}.html": f"<h1>page {p}</h1>\n{body}" for p in range(pages)}
    if changed:
        declared["page-00.html"] = "<h1>page 0, changed</h1>\n" + body
    return declared


def site(index: int, pages: int, *, changed: bool = False) -> dict[str, Any]:
    """StaticSite ``index`` as a manifest."""
    return {
        "apiVersion": sites.SITE.api_version,
        "kind": "StaticSite",
        "metadata": {"name": site_name(index)},
        "spec": {"title": f"Site {index}", "pages": pages_of(pages, changed)},
    }


def children(
    size: int, pages: int, *, changed: bool = False, only_changed: bool = False
) -> list[dict[str, Any]]:
    """The Directories and Files the operator makes of ``size`` sites, as manifests of
    their own (no owner): the same names, paths and content (``sites.children_of``)."""
    declared: list[dict[str, Any]] = []
    for index in range(size):
        spec = site(index, pages, changed=changed)["spec"]
        admitted = types.SimpleNamespace(
            metadata=types.SimpleNamespace(name=site_name(index)),
            spec=sites.StaticSiteSpec(title=spec["title"], pages=dict(sorted(spec["pages"].items()))),
        )
        for child in sites.children_of(admitted):  # type: ignore[arg-type]
            if only_changed and not child["metadata"]["name"].endswith(".page-00.html"):
                continue
            declared.append(child)
    return declared


def plain(root: Path, manifests: Sequence[dict[str, Any]]) -> float:
    """Seconds to make the folders and write the files the manifests declare, one after
    another (the limit)."""
    start = time.perf_counter()
    for manifest in manifests:
        path = root / manifest["spec"]["path"]
        if manifest["kind"] == "Directory":
            path.mkdir(parents=True, exist_ok=True)
        else:
            write_atomically(str(path), manifest["spec"]["content"].encode())
    return time.perf_counter() - start


async def converge(runtime: Runtime, manifests: list[dict[str, Any]], total: int) -> dict[str, float]:
    """Apply ``manifests`` and wait until all ``total`` objects are Ready: seconds to
    apply, seconds to converge (the apply included), the process's CPU seconds meanwhile
    (all its threads: on a shared machine, what the phase cost, whatever the others
    took of the cores), and the events appended."""
    revision = await runtime.client.revision()
    cpu = time.process_time()
    start = time.perf_counter()
    await runtime.apply_many(manifests)
    applied = time.perf_counter() - start
    state = await runtime.wait_converged()
    if not state.converged or state.total != total:
        msg = f"did not converge: {state.ready}/{state.total} Ready, {total} expected"
        raise RuntimeError(msg)
    seconds = time.perf_counter() - start
    return {
        "apply_s": applied,
        "seconds": seconds,
        "cpu_s": time.process_time() - cpu,
        "events": await runtime.client.revision() - revision,
    }


async def direct(
    db: Path, root: Path, size: int, pages: int, workers: int, *, gc_tuning: bool = False
) -> dict[str, dict[str, float]]:
    """The children applied directly: cold, then one File changed per site."""
    total = size * (pages + 1)
    config = {"files": {"roots": [str(root)]}}
    async with Runtime(
        db, providers=[FilesProvider()], provider_config=config, workers=workers, gc_tuning=gc_tuning
    ) as runtime:
        await runtime.wait_synced()
        cold = await converge(runtime, children(size, pages), total)
        changed = children(size, pages, changed=True, only_changed=True)
        return {"cold": cold, "change": await converge(runtime, changed, total)}


async def pass_costs(runtime: Runtime, size: int, pages: int, repeat: int) -> dict[str, float]:
    """Microseconds, on the converged sites (the best of five rounds over up to
    ``repeat`` sites): one site's pass when nothing changed (every child declared as
    before, the status as it is: no write), and one unchanged child declared
    (``children.apply`` answered by the controller's memo, no apply)."""
    reconciler = runtime.controllers["staticsite.sites.example.dev"].reconciler
    context = reconciler.context  # type: ignore[attr-defined]
    names = [site_name(i) for i in range(min(size, repeat))]
    found = [await context.client.get(sites.SITE, name) for name in names]
    declared = [(obj, sites.children_of(obj)) for obj in found]
    per_pass = per_child = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for obj in found:
            await sites.reconcile_site(Request(obj.key), context)
        per_pass = min(per_pass, (time.perf_counter() - start) / len(found) * 1e6)
        start = time.perf_counter()
        for obj, manifests in declared:
            children = context.children(obj)
            for manifest in manifests:
                await children.apply(manifest)
        per_child = min(per_child, (time.perf_counter() - start) / (len(found) * (pages + 1)) * 1e6)
    return {"site_pass_unchanged_us": per_pass, "unchanged_child_us": per_child}


async def operator(
    db: Path, root: Path, size: int, pages: int, workers: int, *, gc_tuning: bool = False
) -> dict[str, dict[str, float]]:
    """The sites through the operator: cold, then one page changed per site; then what
    a pass costs when nothing changed (:func:`pass_costs`)."""
    total = size * (pages + 2)  # the sites, and their children
    config = {"files": {"roots": [str(root)]}}
    async with Runtime(
        db,
        providers=[FilesProvider()],
        provider_config=config,
        operators=[sites.operator],
        workers=workers,
        gc_tuning=gc_tuning,
    ) as runtime:
        await runtime.wait_synced()
        cold = await converge(runtime, [site(i, pages) for i in range(size)], total)
        changed = [site(i, pages, changed=True) for i in range(size)]
        change = await converge(runtime, changed, total)
        return {"cold": cold, "change": change, "costs": await pass_costs(runtime, size, pages, 200)}


def main() -> None:
    """Run the three cases, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="how many sites")
    parser.add_argument("--pages", type=int, default=10, help="pages per site")
    parser.add_argument("--workers", type=int, default=WORKERS, help="workers per controller")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument(
        "--gc-tuning",
        action="store_true",
        help="both Runtimes with gc_tuning=True, as reconcile run has it",
    )
    args = parser.parse_args()
    size, pages = args.size, args.pages
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        base = Path(folder)
        limit_cold = plain(base / "plain", children(size, pages))
        limit_change = plain(base / "plain", children(size, pages, changed=True, only_changed=True))
        tuning = args.gc_tuning
        ours_direct = asyncio.run(
            direct(base / "direct.db", base / "direct", size, pages, args.workers, gc_tuning=tuning)
        )
        ours = asyncio.run(
            operator(base / "operator.db", base / "operator", size, pages, args.workers, gc_tuning=tuning)
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = []
    for phase, limit, key in (
        ("cold", limit_cold, "cold"),
        ("one page changed per site", limit_change, "change"),
    ):
        rows += [
            {"phase": f"{phase}: plain loop (limit)", "seconds": limit, "x_limit": 1.0},
            {
                "phase": f"{phase}: children applied directly",
                **ours_direct[key],
                "x_limit": ours_direct[key]["seconds"] / limit,
            },
            {
                "phase": f"{phase}: operator",
                **ours[key],
                "x_limit": ours[key]["seconds"] / limit,
                "x_direct": ours[key]["seconds"] / ours_direct[key]["seconds"],
                "cpu_x_direct": ours[key]["cpu_s"] / ours_direct[key]["cpu_s"],
            },
        ]
    result = {
        "benchmark": "operator",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "size": size,
        "pages": pages,
        "children": size * (pages + 1),
        "workers": args.workers,
        "gc_tuning": args.gc_tuning,
        "target_x_direct": TARGET,
        "rows": rows,
        "costs": {
            **ours["costs"],
            "direct_change_per_site_us": ours_direct["change"]["seconds"] / size * 1e6,
        },
        "peak_rss_mib": peak,
    }
    made = f"{size * (pages + 1)} children ({size} Directories, {size * pages} Files)"
    print(f"{size} sites of {pages} pages: {made}")
    header = f"{'phase':<52} {'seconds':>9} {'apply s':>9} {'events':>8} {'x limit':>8} {'x direct':>9}"
    print(f"{header} {'cpu s':>7} {'cpu x direct':>13}")
    for row in rows:
        apply_s = f"{row['apply_s']:>9.2f}" if "apply_s" in row else f"{'':>9}"
        events = f"{row['events']:>8.0f}" if "events" in row else f"{'':>8}"
        x_direct = f"{row['x_direct']:>9.2f}" if "x_direct" in row else f"{'':>9}"
        cpu = f"{row['cpu_s']:>7.2f}" if "cpu_s" in row else f"{'':>7}"
        cpu_x = f"{row['cpu_x_direct']:>13.2f}" if "cpu_x_direct" in row else f"{'':>13}"
        print(
            f"{row['phase']:<52} {row['seconds']:>9.2f} {apply_s} {events} {row['x_limit']:>8.2f} {x_direct}"
            f" {cpu} {cpu_x}"
        )
    print(f"operator overhead target: under {TARGET}x the children applied directly; peak RSS {peak:.0f} MiB")
    costs = result["costs"]
    print(
        f"converged: a site's pass with nothing changed {costs['site_pass_unchanged_us']:.0f} us, "
        f"one unchanged child declared {costs['unchanged_child_us']:.1f} us; "
        f"the direct change per site {costs['direct_change_per_site_us']:.0f} us"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
