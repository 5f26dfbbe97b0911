"""The HTTP API's reads and watches, each beside its limits measured in the same run.

A server built as ``reconcile serve`` builds it (``create_app`` over a client of a SQLite
file store, uvicorn with ``serve``'s settings, ``serve``'s own loopback socket) runs in a
process of its own, holding --size Widgets (the app alone, as a host mounts it: not
``serve``'s authentication and per-client limits). A load generator in another process
(--connections keep-alive connections on plain asyncio streams, each sending its next
request as soon as the last is answered: an HTTP library in Python costs more CPU per
request than the server, and would measure itself) measures, for --seconds each:

* ``get one``: ``GET .../widgets/w0``; ``list``: ``GET .../widgets`` (all --size);
* each beside ``bare``, a Starlette handler on the same app and the same uvicorn returning
  the same bytes, computed once: the HTTP stack's floor, what no handler of ours can beat;
* and beside ``client``: the same reads through ``Client.get`` and ``Client.list`` in
  this process, --connections tasks at once: the engine without HTTP (it structures
  every object into its attrs classes, which the API does not).

``serve`` is the same reads from the real ``reconcile serve`` on the same store, with a
bearer token from a tokens file: the app with serve's authentication and limits.

The server's CPU time per request is recorded too: the load generator shares the
machine's cores, and CPU per request does not depend on who is faster.

``watch``: --watchers watches (``?watch=true&resourceVersion=R``, Kubernetes' protocol:
one JSON event a line, in HTTP/1.1 chunks) take --changes changes written one after
another in the server process, as writes over HTTP would be, at most --rate a second
(the rate achieved is reported: each waits for its commit, and the server is busy
sending the watchers their events). The latency of each event to
each watcher runs from its write's commit (its apply returned) to the arrival of its
line (CLOCK_MONOTONIC is shared by processes on Linux); every watcher must get every
change (``lost`` counts those that did not arrive, ``cut off`` the watches the server
ended with an ERROR). Beside it, the limit: the same number of watchers on the store's
own watch (``EventStore.watch``, which the API's watches follow) in this process, the
same writes.

Every figure is the median of --runs runs (the sides taking turns), with min and max.

    python benchmarks/http_api.py [--size N] [--changes C] [--watchers W] [--rate R]
                              [--connections K] [--seconds S] [--runs R] [--json PATH]

``--changes 0`` leaves the watch case out.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Not ``http.py``, the name the issue gives: in this folder, first on ``sys.path`` of every
# benchmark run as a script, that name hid the standard library's ``http`` from them all
# (benchmarks/s3.py failed importing urllib). The folder still goes last here, after the
# standard library, as it did for that name.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != HERE), str(HERE)]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import secrets  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable, Mapping  # noqa: E402
from typing import Any  # noqa: E402

from http_roles import READS, TOKEN_VARIABLE, latencies, role, widget, write_changes  # noqa: E402
from runners import cpu_seconds, env  # noqa: E402

from reconcile import Bookmark  # noqa: E402
from reconcile.api import Client, connect  # noqa: E402
from reconcile.http.tokens import hash_token  # noqa: E402
from reconcile.testing import example_kinds  # noqa: E402

SIDES = ("bare", "http", "serve", "client")
GROUP = "example.reconcile.dev"
SETTINGS = ("size", "changes", "watchers", "rate", "connections", "seconds", "runs")


async def client_reads(client: Client, phase: str, connections: int, seconds: float) -> float:
    """Requests per second of ``phase`` through ``client`` in this process."""
    read: Callable[[], Awaitable[Any]] = (
        (lambda: client.get("Widget", "w0")) if phase == "get one" else (lambda: client.list("Widget"))
    )
    done = 0
    deadline = time.monotonic() + seconds

    async def reader() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await read()
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(reader() for _ in range(connections)))
    return done / (time.monotonic() - started)


def helper(*arguments: str) -> list[str]:
    """The command running this script in one of its roles (``--serve``, ``--load``, ``--watch``)."""
    return [sys.executable, str(Path(__file__).resolve()), *arguments]


def http_reads(
    url: str, server: int, path: str, connections: int, seconds: float, *, token: str = ""
) -> dict[str, float]:
    """Requests per second of ``GET path`` from the load generator (with ``token`` as its
    bearer token, in its environment: never on a command line), and the server's CPU
    microseconds per request."""
    before = cpu_seconds(server)
    done = subprocess.run(  # noqa: S603 - this script
        helper("--load", url, path, "--connections", str(connections), "--seconds", str(seconds)),
        capture_output=True,
        text=True,
        check=False,
        env={**env(), TOKEN_VARIABLE: token},
    )
    if done.returncode != 0:
        raise SystemExit(f"the load generator failed: {done.stderr}")
    result = json.loads(done.stdout)
    if result["errors"]:
        raise SystemExit(f"{path}: {result['errors']} requests failed ({result['error']})")
    used = cpu_seconds(server) - before
    return {"per_s": result["per_s"], "cpu_us": 1e6 * used / max(result["requests"], 1)}


def watch_http(url: str, watchers: int, changes: int, rate: float) -> dict[str, Any]:
    """The watch case over HTTP (the watchers in the load generator, the writes in the server)."""
    done = subprocess.run(  # noqa: S603 - this script
        helper("--watch", url, "--watchers", str(watchers), "--changes", str(changes), "--rate", str(rate)),
        capture_output=True,
        text=True,
        check=False,
        env=env(),
    )
    if done.returncode != 0:
        raise SystemExit(f"the watchers failed: {done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def median_of(runs: list[float]) -> dict[str, Any]:
    """min, median and max of ``runs``, and the runs."""
    return {"min": min(runs), "median": statistics.median(runs), "max": max(runs), "runs": runs}


def _start_server(command: list[str], cwd: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """``command`` started; it and the URL its first line says it serves on."""
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env(), cwd=cwd)  # noqa: S603
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("serving on "):
        server.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return server, line.removeprefix("serving on ").strip()


def _start_serve(folder: Path, url: str) -> tuple[subprocess.Popen[str], str, str]:
    """The real ``reconcile serve`` on the store at ``url``, with a bearer token from a
    tokens file (authentication, limits, its socket), knowing the Widget kind through
    ``--import`` of a module made in ``folder``: it, its URL and the token."""
    token = secrets.token_urlsafe(32)
    (folder / "bench_kinds.py").write_text("from reconcile.testing.kinds import WIDGET\n\nkinds = [WIDGET]\n")
    (folder / "tokens.yaml").write_text(f"tokens:\n  - hash: {hash_token(token)}\n    user: bench\n")
    command = [sys.executable, "-m", "reconcile", "--db", url, "--import", "bench_kinds", "serve"]
    served, base = _start_server(
        [*command, "--port", "0", "--token-file", str(folder / "tokens.yaml")], folder
    )
    return served, base, token


async def measure(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Every run of every case; the rows."""
    db = folder / "http.db"
    url = f"sqlite:///{db}"
    async with connect(url, kinds=example_kinds()) as client:
        await client.apply_many([widget(i, i) for i in range(args.size)], atomic=True)
    server, base = _start_server(helper("--serve", str(db)))
    try:
        served, served_base, token = _start_serve(folder, url)
    except BaseException:
        server.terminate()
        server.wait()
        raise
    reads: dict[str, dict[str, list[float]]] = {p: {f"{s}_per_s": [] for s in SIDES} for p in READS}
    cpu: dict[str, dict[str, list[float]]] = {p: {"bare": [], "http": [], "serve": []} for p in READS}
    watch: dict[str, list[float]] = {
        f"{side}_{figure}": [] for side in ("http", "store") for figure in ("p50", "p99", "written_per_s")
    }
    lost = {"http": 0, "store": 0}
    cut_off = 0
    try:
        async with connect(url, kinds=example_kinds()) as client:
            for _ in range(args.runs):
                for phase, (api_path, bare_path) in READS.items():
                    for side, path in (("bare", bare_path), ("http", api_path), ("serve", api_path)):
                        where, pid, bearer = (
                            (served_base, served.pid, token) if side == "serve" else (base, server.pid, "")
                        )
                        got = http_reads(where, pid, path, args.connections, args.seconds, token=bearer)
                        reads[phase][f"{side}_per_s"].append(got["per_s"])
                        cpu[phase][side].append(got["cpu_us"])
                    reads[phase]["client_per_s"].append(
                        await client_reads(client, phase, args.connections, args.seconds)
                    )
                if args.changes:
                    over_http = watch_http(base, args.watchers, args.changes, args.rate)
                    in_process = await store_watch(client, args.size, args.watchers, args.changes, args.rate)
                    for side, result in (("http", over_http), ("store", in_process)):
                        watch[f"{side}_p50"].append(result["p50_ms"])
                        watch[f"{side}_p99"].append(result["p99_ms"])
                        watch[f"{side}_written_per_s"].append(result["written_per_s"])
                        lost[side] += result["lost"]
                    cut_off += over_http["cut_off"]
    finally:
        for process in (server, served):
            process.terminate()
            process.wait()
    rows: list[dict[str, Any]] = []
    for phase, sides in reads.items():
        row: dict[str, Any] = {"phase": phase, **{k: median_of(v) for k, v in sides.items()}}
        row["ratio_to_bare"] = row["http_per_s"]["median"] / row["bare_per_s"]["median"]
        row["ratio_to_client"] = row["http_per_s"]["median"] / row["client_per_s"]["median"]
        row["serve_ratio_to_bare"] = row["serve_per_s"]["median"] / row["bare_per_s"]["median"]
        row["server_cpu_us"] = {side: median_of(v) for side, v in cpu[phase].items()}
        rows.append(row)
    if args.changes:
        row = {
            "phase": "watch",
            **{k if k.endswith("_s") else f"{k}_ms": median_of(v) for k, v in watch.items()},
        }
        row |= {"lost_http": lost["http"], "lost_store": lost["store"], "cut_off_http": cut_off}
        row["ratio_p50"] = row["http_p50_ms"]["median"] / row["store_p50_ms"]["median"]
        row["ratio_p99"] = row["http_p99_ms"]["median"] / row["store_p99_ms"]["median"]
        rows.append(row)
    return {"rows": rows}


async def store_watch(client: Client, size: int, watchers: int, changes: int, rate: float) -> dict[str, Any]:
    """The limit of the watch case: the same watchers on the store's own watch in this
    process (``EventStore.watch``, what the API's watches follow; it parses no body),
    the same writes made here."""
    since = await client.revision()
    receipts: list[dict[int, float]] = [{} for _ in range(watchers)]

    async def watcher(seen: dict[int, float]) -> None:
        async for event in client.store.watch(since=since, api_group=GROUP, kind="Widget"):
            if not isinstance(event, Bookmark):
                seen[event.revision] = time.monotonic()
                if len(seen) >= changes:
                    return

    tasks = [asyncio.create_task(watcher(seen)) for seen in receipts]
    started = time.monotonic()
    committed = await write_changes(client, size, changes, rate)
    written_per_s = len(committed) / (time.monotonic() - started)
    await asyncio.wait(tasks, timeout=max(30.0, changes / 100))
    for task in tasks:
        task.cancel()
    return {**latencies(committed, receipts), "written_per_s": written_per_s}


def _spread(figures: Mapping[str, float], form: str = ",.0f") -> str:
    return " / ".join(format(figures[k], form) for k in ("min", "median", "max"))


def _print(document: Mapping[str, Any]) -> None:
    print(
        f"{document['size']:,} widgets, {document['connections']} connections, {document['seconds']} s a "
        f"case, {document['runs']} runs (min / median / max); load {document['load'][0]:.1f}"
    )
    print(f"{'case':<9} {'side':<7} {'requests/s':>26} {'server µs/request':>24}")
    for row in document["rows"]:
        if row["phase"] == "watch":
            continue
        for side in SIDES:
            cpu = row["server_cpu_us"].get(side)
            used = _spread(cpu) if cpu else "(in this process)"
            print(f"{row['phase']:<9} {side:<7} {_spread(row[side + '_per_s']):>26} {used:>24}")
        print(
            f"{'':<9} http / bare {row['ratio_to_bare']:.2f}; http / client {row['ratio_to_client']:.2f}; "
            f"serve / bare {row['serve_ratio_to_bare']:.2f}"
        )
    for row in document["rows"]:
        if row["phase"] == "watch":
            print(
                f"watch: {document['changes']:,} changes to {document['watchers']} watchers, "
                f"{document['rate']:g} a second; ms from commit to receipt"
            )
            for side in ("http", "store"):
                print(
                    f"  {side:<7} p50 {_spread(row[side + '_p50_ms'], '.2f'):>24}   "
                    f"p99 {_spread(row[side + '_p99_ms'], '.2f'):>24}   lost {row['lost_' + side]}   "
                    f"written/s {_spread(row[side + '_written_per_s'])}"
                )


def main() -> None:
    """Measure, print the table, write the JSON (``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="widgets stored (the list's length)")
    parser.add_argument("--changes", type=int, default=10_000, help="changes the watchers take (0: no watch)")
    parser.add_argument("--watchers", type=int, default=100, help="concurrent watches")
    parser.add_argument(
        "--rate", type=float, default=200.0, help="changes written a second, at most (0: as fast as they go)"
    )
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections of the reads")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of each read case")
    parser.add_argument("--runs", type=int, default=3, help="runs of everything, the sides taking turns")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        measured = asyncio.run(measure(args, Path(folder)))
    document = {
        "benchmark": "http",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        **{
            k: getattr(args, k)
            for k in ("size", "changes", "watchers", "rate", "connections", "seconds", "runs")
        },
        **measured,
    }
    _print(document)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--serve", "--load", "--watch"):
        role(sys.argv[1:])
    else:
        main()
