"""A small aiohttp service that embeds reconcile in its own event loop.

Startup opens the Runtime (store, controllers, providers) inside the service's loop; a
request applies a resource and waits until it is Ready; shutdown drains the controllers.
``/readyz`` and ``/healthz`` answer the orchestrator's probes from ``Runtime.health()``.

    python examples/service/app.py            # serves on http://127.0.0.1:8080
    curl -X PUT localhost:8080/buckets/photos -d '{"value": "v1"}'
    curl localhost:8080/readyz
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiohttp import web

import reconcile
from reconcile.testing import MemoryProvider

RUNTIME = web.AppKey("runtime", reconcile.Runtime)


def create_app(
    store: str, providers: Sequence[reconcile.Provider], **runtime_options: Any
) -> web.Application:
    """The application; ``store`` and ``providers`` configure its Runtime."""
    app = web.Application()

    async def runtime_context(app: web.Application) -> AsyncIterator[None]:
        async with reconcile.Runtime(store, providers=providers, **runtime_options) as runtime:
            app[RUNTIME] = runtime
            yield  # the service runs here; leaving the block drains and closes

    app.cleanup_ctx.append(runtime_context)
    app.router.add_put("/buckets/{name}", put_bucket)
    app.router.add_get("/buckets/{name}", get_bucket)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/healthz", healthz)
    return app


async def readyz(request: web.Request) -> web.Response:
    """200 once every controller's cache is synced and watching; 503 with the reasons."""
    health = request.app[RUNTIME].health()
    return web.json_response(health.as_dict(), status=200 if health.ready else 503)


async def healthz(request: web.Request) -> web.Response:
    """200 unless a controller or a watch waits to be restarted (restart the process if
    this stays 503)."""
    health = request.app[RUNTIME].health()
    return web.json_response(health.as_dict(), status=200 if health.healthy else 503)


def describe(obj: reconcile.Resource[Any, Any]) -> dict[str, Any]:
    """The JSON a client sees."""
    conditions = {c.type: {"status": c.status.value, "reason": c.reason} for c in obj.status.conditions}
    return {"name": obj.metadata.name, "generation": obj.metadata.generation, "conditions": conditions}


async def put_bucket(request: web.Request) -> web.Response:
    """Declare a bucket and answer once it is Ready (or 504 when it is not in time)."""
    runtime = request.app[RUNTIME]
    name = request.match_info["name"]
    try:
        body = await request.json()
    except json.JSONDecodeError as exc:
        return web.json_response({"error": f"the body is not JSON: {exc}"}, status=400)
    if not isinstance(body, dict):
        return web.json_response(
            {"error": 'the body must be a JSON object, such as {"value": "v1"}'}, status=400
        )
    try:
        timeout = float(request.query.get("timeout", "10"))
    except ValueError:
        return web.json_response({"error": "timeout: must be a number of seconds"}, status=400)
    manifest = {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"name": name, "value": str(body.get("value", ""))},
    }
    try:
        await runtime.apply(manifest, manager="bucket-service")
    except reconcile.InvalidError as exc:
        return web.json_response({"error": str(exc)}, status=422)
    try:
        obj = await runtime.wait_ready("bucket", name, timeout=timeout)
    except TimeoutError as exc:
        return web.json_response({"error": str(exc)}, status=504)
    return web.json_response(describe(obj))


async def get_bucket(request: web.Request) -> web.Response:
    """Read a bucket."""
    try:
        obj = await request.app[RUNTIME].client.get("bucket", request.match_info["name"])
    except reconcile.NotFoundError:
        return web.json_response({"error": "not found"}, status=404)
    return web.json_response(describe(obj))


if __name__ == "__main__":
    web.run_app(create_app("sqlite:///service.db", [MemoryProvider()]), host="127.0.0.1", port=8080)
