"""The processes of ``benchmarks/http_api.py`` besides its own: the server, the load
generator of the reads, the watchers; and what they share with it (the widgets, the
paths, the writes of the watch case and their latencies).

* ``--serve DB``: ``create_app`` over a client of the store at DB, served by uvicorn as
  ``reconcile serve`` serves it, on a free loopback port (the first line printed says
  where). Beside the API, on the same app: ``/bench/one`` and ``/bench/list`` return the
  API's own answers to the two reads as bytes computed once (the floor of the HTTP
  stack); ``POST /bench/write?changes=C&rate=R`` makes C changes in the server process,
  R a second, and answers each one's revision and commit time.
* ``--load URL PATH``: ``GET PATH`` over --connections keep-alive connections for
  --seconds; prints the requests, the rate and the failures as JSON.
* ``--watch URL``: --watchers watches of the widgets from the current revision, then the
  writes; prints the latencies (p50, p99) and how many events were lost, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconcile.api import Client, connect
from reconcile.http import create_app
from reconcile.http.serving import _bound
from reconcile.testing import example_kinds

__all__ = ["ONE", "PATH", "READS", "TOKEN_VARIABLE", "latencies", "role", "widget", "write_changes"]

PATH = "/apis/example.reconcile.dev/v1/namespaces/default/widgets"
ONE = f"{PATH}/w0"
#: Where the load generator finds the bearer token it sends (none when empty).
TOKEN_VARIABLE = "BENCH_HTTP_TOKEN"  # noqa: S105 - the name of a variable, not a token
#: Each read case: the API's path and the bare handler's.
READS = {"get one": (ONE, "/bench/one"), "list": (PATH, "/bench/list")}


def widget(index: int, size: int) -> dict[str, Any]:
    """Widget ``w{index}`` of size ``size``."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": f"w{index}", "labels": {"app": "bench"}},
        "spec": {"size": size, "color": "blue", "tags": ["a", "b"]},
    }


async def write_changes(client: Client, objects: int, changes: int, rate: float) -> dict[int, float]:
    """``changes`` changes of the widgets, in turn, ``rate`` a second (0: one after
    another): each one's revision -> the monotonic time its apply returned."""
    committed: dict[int, float] = {}
    base = await client.revision()
    started = time.monotonic()
    for i in range(changes):
        if rate:
            await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        written = await client.apply(widget(i % objects, 1_000_000 + base + i))
        assert written.metadata.resource_version is not None
        committed[written.metadata.resource_version] = time.monotonic()
    return committed


def _percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)] if ordered else math.nan


def latencies(committed: dict[int, float], receipts: list[dict[int, float]]) -> dict[str, Any]:
    """p50 and p99 ms from each commit to each watcher's receipt; how many of the
    watchers' events never arrived."""
    spans, lost = [], 0
    for seen in receipts:
        for revision, at in committed.items():
            if revision in seen:
                spans.append(seen[revision] - at)
            else:
                lost += 1
    spans.sort()
    return {
        "p50_ms": 1000 * _percentile(spans, 0.50),
        "p99_ms": 1000 * _percentile(spans, 0.99),
        "max_ms": 1000 * spans[-1] if spans else math.nan,
        "delivered": len(spans),
        "lost": lost,
    }


async def _serve(db: Path) -> None:
    async with connect(f"sqlite:///{db}", kinds=example_kinds()) as client:
        answers: dict[str, bytes] = {}

        async def bare(request: Request) -> Response:
            return Response(answers[request.url.path], media_type="application/json")

        async def write(request: Request) -> Response:
            query = request.query_params
            objects = len((await client.list("Widget")).items)
            started = time.monotonic()
            committed = await write_changes(client, objects, int(query["changes"]), float(query["rate"]))
            elapsed = time.monotonic() - started
            return JSONResponse({"seconds": elapsed, "committed": {str(k): v for k, v in committed.items()}})

        routes = [
            Route("/bench/one", bare),
            Route("/bench/list", bare),
            Route("/bench/write", write, methods=["POST"]),
        ]
        app = create_app(client, routes=routes)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://bench") as own:
            for api_path, bare_path in READS.values():
                answer = await own.get(api_path)
                answer.raise_for_status()
                answers[bare_path] = answer.content
        sock = _bound("127.0.0.1", 0)  # reconcile serve's own socket
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)

        async def announce() -> None:
            while not server.started:
                await asyncio.sleep(0.01)
            print(f"serving on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

        announcing = asyncio.ensure_future(announce())
        try:
            await server.serve(sockets=[sock])
        finally:
            announcing.cancel()
            sock.close()


async def _requests(url: str, path: str, deadline: float) -> tuple[int, str]:
    """Requests answered 200 on one keep-alive connection until ``deadline``, and the
    first other answer (which ends it). Plain asyncio streams, not an HTTP library: the
    load generator must cost the machine much less than the server, or it measures itself."""
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    token = os.environ.get(TOKEN_VARIABLE)
    bearer = f"Authorization: Bearer {token}\r\n" if token else ""
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n{bearer}\r\n".encode()
    )
    done = 0
    try:
        while time.monotonic() < deadline:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)[1])  # type: ignore[index]
            body = await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200 ") or not body:
                return done, f"{head.split(maxsplit=2)[1].decode()} {body[:200].decode(errors='replace')}"
            done += 1
    finally:
        writer.close()
    return done, ""


async def _load(url: str, path: str, connections: int, seconds: float) -> dict[str, Any]:
    await asyncio.gather(*(_requests(url, path, 0) for _ in range(connections)))  # warm
    started = time.monotonic()
    results = await asyncio.gather(*(_requests(url, path, started + seconds) for _ in range(connections)))
    elapsed = time.monotonic() - started
    done = sum(n for n, _ in results)
    errors = [e for _, e in results if e]
    return {"requests": done, "per_s": done / elapsed, "errors": len(errors), "error": errors[:1]}


async def _watch_stream(
    url: str, query: str, seen: dict[int, float], changes: int, opened: asyncio.Semaphore
) -> str | None:
    """One watch (``GET PATH?watch=true&QUERY``), read off the socket as it comes: each
    event's revision -> when its line arrived, until ``changes`` events; the message of
    an ERROR event that ended it, if one did. Plain asyncio and HTTP/1.1 chunks, as
    :func:`_requests`: 100 watchers take a million lines, which an HTTP library in
    Python would spend more CPU on than the server."""
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {PATH}?watch=true&{query} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200 ") or b"chunked" not in head.lower():
            raise SystemExit(f"watch: {head.decode(errors='replace')}")
        opened.release()
        pending = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                return "the server ended the watch"
            chunk = (await reader.readexactly(size + 2))[:-2]
            at = time.monotonic()
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if not line:
                    continue
                event = orjson.loads(line)
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    seen[int(event["object"]["metadata"]["resourceVersion"])] = at
                    if len(seen) >= changes:
                        return None
                elif event["type"] == "ERROR":  # cut off (410): what it did not get is lost
                    return str(event["object"].get("message", "an ERROR event"))
    finally:
        writer.close()


async def _watch(url: str, watchers: int, changes: int, rate: float) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(60, read=None)) as http:
        listed = await http.get(PATH, params={"limit": "1"})
        listed.raise_for_status()
        query = f"resourceVersion={listed.json()['metadata']['resourceVersion']}"
        receipts: list[dict[int, float]] = [{} for _ in range(watchers)]
        opened = asyncio.Semaphore(0)
        tasks = [asyncio.create_task(_watch_stream(url, query, seen, changes, opened)) for seen in receipts]
        # Every watch is open (its answer's head arrived) before the first write; its
        # resourceVersion makes it start at the same revision however late it opened.
        for _ in range(watchers):
            await asyncio.wait_for(opened.acquire(), 60)
        wrote = await http.post(
            "/bench/write", params={"changes": str(changes), "rate": str(rate)}, timeout=None
        )
        wrote.raise_for_status()
        committed = {int(k): v for k, v in wrote.json()["committed"].items()}
        written_per_s = len(committed) / wrote.json()["seconds"]
        done, late = await asyncio.wait(tasks, timeout=max(30.0, changes / 100))
    for task in late:
        task.cancel()
    endings = [task.result() for task in done]
    cut_off = [ending for ending in endings if ending]
    return {
        **latencies(committed, receipts),
        "written_per_s": written_per_s,
        "cut_off": len(cut_off),
        "why": cut_off[:1],
    }


def role(argv: list[str]) -> None:
    """Run the role ``argv`` names (``--serve``, ``--load`` or ``--watch``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=Path)
    parser.add_argument("--load", nargs=2, metavar=("URL", "PATH"))
    parser.add_argument("--watch", metavar="URL")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.serve))
    elif args.load:
        print(json.dumps(asyncio.run(_load(*args.load, args.connections, args.seconds))))
    else:
        print(json.dumps(asyncio.run(_watch(args.watch, args.watchers, args.changes, args.rate))))
