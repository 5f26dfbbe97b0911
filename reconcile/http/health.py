"""Probes and the store's health, beside the API: Kubernetes' ``/livez``, ``/readyz`` and
``/healthz`` (``ok``, or a 500 listing the failed checks; ``?verbose`` lists every check
as ``[+]name ok`` / ``[-]name failed: reason``), and ``/health``, a JSON document of what
a watcher of the server wants to know: the store's head revision, whether it takes
writes, its runners' shards, and the runtime's controllers when ``serve --run``.

Checks:

* ``store`` (all three): the store answers a read of its head revision;
* ``store-writes`` (``readyz``): the store takes writes (a PostgreSQL standby or a
  read-only server does not: the API still serves reads, so it stays live);
* ``runtime`` (``readyz`` with ``--run``): every controller is synced and watching;
  (``livez``) none waits to be restarted.

The probes answer everybody; a failed check's reason (which may name the store's
address, user or file) only to a user who may read ``/health``, ``reason withheld`` to
the others (the reason goes to the log). ``/health`` itself is authorized as a
non-resource path (:func:`reconcile.http.context.authorize_path`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from reconcile.http.context import ApiState, Attributes, authorize_path, state, user_of
from reconcile.http.responses import json_response

__all__ = ["health_routes"]

logger = logging.getLogger("reconcile.http")

Check = tuple[str, str | None]  # (name, None when it passed, else the reason)


async def _store_read(api: ApiState) -> Check:
    try:
        await api.client.store.revision()
    except Exception as exc:  # noqa: BLE001 - any failure is the check's answer
        return ("store", " ".join(str(exc).split()) or type(exc).__name__)
    return ("store", None)


async def _store_writes(api: ApiState) -> Check:
    try:
        refusal = await api.client.store.write_refusal()
    except Exception as exc:  # noqa: BLE001
        return ("store-writes", " ".join(str(exc).split()) or type(exc).__name__)
    return ("store-writes", refusal)


def _runtime(api: ApiState, *, ready: bool) -> list[Check]:
    if api.runtime_health is None:
        return []
    health = api.runtime_health()
    passed = health.ready if ready else health.healthy
    return [("runtime", None if passed else ("; ".join(health.problems()) or "not started"))]


async def _checks(api: ApiState, probe: str) -> list[Check]:
    checks = [await _store_read(api)]
    if probe in ("readyz", "healthz"):
        checks.append(await _store_writes(api))
    checks += _runtime(api, ready=probe != "livez")
    return checks


def _may_read_health(request: Request) -> bool:
    attributes = Attributes("get", "", "", path="/health")
    return state(request).authorizer.allowed(user_of(request), attributes)


def _probe(probe: str) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        checks = await _checks(state(request), probe)
        failed = [c for c in checks if c[1] is not None]
        if failed and not _may_read_health(request):
            # The reasons name the store's address, user or file: said to those who may
            # read /health; the probes answer everybody (Kubernetes withholds them too).
            for name, reason in failed:
                logger.warning("the %s check of %s failed: %s", name, probe, reason)
            checks = [(name, None if reason is None else "reason withheld") for name, reason in checks]
        verbose = "verbose" in request.query_params
        lines = [f"[-]{name} failed: {reason}" if reason else f"[+]{name} ok" for name, reason in checks]
        if failed:
            body = "\n".join(lines) + f"\n{probe} check failed\n"
            return PlainTextResponse(body, status_code=500)
        return PlainTextResponse("\n".join(lines) + f"\n{probe} check passed\n" if verbose else "ok")

    return answer


async def health_document(request: Request) -> Response:
    """``GET /health``: the store's and the runtime's health as JSON."""
    authorize_path(request)
    api = state(request)
    store = api.client.store
    document: dict[str, Any] = {"kind": "Health", "apiVersion": "reconcile.dev/v1"}
    read = await _store_read(api)
    document["store"] = {"reachable": read[1] is None, "problem": read[1]}
    if read[1] is None:
        document["store"]["revision"] = str(await store.revision())
        document["store"]["writeRefusal"] = (await _store_writes(api))[1]
        table = await store.shard_table()
        document["sharding"] = (
            None
            if table is None
            else {
                "shards": len(table.leases),
                "runners": {holder: sorted(shards) for holder, shards in table.by_holder().items()},
                "refused": table.refused,
            }
        )
    if api.runtime_health is not None:
        document["runtime"] = api.runtime_health().as_dict()
    healthy = read[1] is None and (api.runtime_health is None or api.runtime_health().healthy)
    return json_response(document, 200 if healthy else 503)


def health_routes() -> list[BaseRoute]:
    """The probes and ``/health``."""
    return [
        Route("/livez", _probe("livez"), methods=["GET"]),
        Route("/readyz", _probe("readyz"), methods=["GET"]),
        Route("/healthz", _probe("healthz"), methods=["GET"]),
        Route("/health", health_document, methods=["GET"]),
    ]
