"""A service that serves its own routes and, beside them, reconcile's HTTP API.

The API is an ASGI app (``reconcile.http.create_app(client)``); the host mounts it under a
prefix of its own (here ``/k8s``), in a Starlette app or a FastAPI one. Kubernetes'
clients take a server URL with a path, so kubectl reaches it as
``server: http://127.0.0.1:8080/k8s``.

    python examples/http_service/embedding.py [--db sqlite:///state.db] [--port 8080] [--fastapi]
    curl localhost:8080/summary
    curl localhost:8080/k8s/apis/files.reconcile.dev/v1/namespaces/default/files
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter

import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

import reconcile
from reconcile.http import create_app

PREFIX = "/k8s"


def starlette_host(client: reconcile.Client) -> Starlette:
    """A Starlette service: its ``/summary`` beside the API under ``/k8s``."""

    async def summary(request: Request) -> JSONResponse:  # noqa: ARG001 - Starlette's signature
        return JSONResponse(await count_objects(client))

    return Starlette(routes=[Route("/summary", summary), Mount(PREFIX, app=create_app(client))])


def fastapi_host(client: reconcile.Client) -> FastAPI:
    """The same service in FastAPI: a path operation beside the mounted API."""
    service = FastAPI(title="my service")

    @service.get("/summary")
    async def summary() -> dict[str, int]:
        return await count_objects(client)

    service.mount(PREFIX, create_app(client))
    return service


async def count_objects(client: reconcile.Client) -> dict[str, int]:
    """The host's own use of the client: how many objects of each kind it stores."""
    counts: Counter[str] = Counter()
    for kind in client.kinds:
        counts[kind.kind] = len((await client.list(kind.kind)).items)
    return {kind: n for kind, n in sorted(counts.items()) if n}


async def serve(db: str, port: int, *, fastapi: bool) -> None:
    """Open the store, build the host around its client, serve until interrupted (the
    first line printed says where, once it accepts connections); the client closes after
    the server has stopped."""
    async with reconcile.connect(db) as client:
        host = fastapi_host(client) if fastapi else starlette_host(client)
        server = uvicorn.Server(uvicorn.Config(host, host="127.0.0.1", port=port, log_level="warning"))
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn sets a flag
            await asyncio.sleep(0.01)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            print(f"serving on http://127.0.0.1:{bound}", flush=True)
        await serving


def main() -> None:
    """Parse the command line and serve."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="sqlite:///state.db", help="the store's URL")
    parser.add_argument("--port", type=int, default=8080, help="0: a free port")
    parser.add_argument("--fastapi", action="store_true", help="the FastAPI host instead of Starlette's")
    args = parser.parse_args()
    asyncio.run(serve(args.db, args.port, fastapi=args.fastapi))


if __name__ == "__main__":
    main()
