"""The references the reconcile benchmark measures the engine against, and its kind.

* :func:`minimal_loop`: the cold-convergence limit (and, committing each status event on
  its own, the per-event reference), stdlib sqlite3 and dicts;
* :func:`contract_floor`: the least per-resource work the engine's contract requires
  (typed objects, three durable events), as cheaply as Python allows.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import cattrs

from reconcile import Kind, ManagedStatus
from reconcile.model import Condition, ConditionStatus, ObjectMeta, Resource, make_converter
from reconcile.store.encoding import dumps

__all__ = ["THING", "ThingSpec", "contract_floor", "minimal_loop"]


@attrs.frozen
class ThingSpec:
    """A no-op resource."""

    size: int = 0


THING = Kind(
    "bench.reconcile.dev/v1",
    "Thing",
    ThingSpec,
    ManagedStatus,
    deterministic_identity=True,
    atomic_create=True,
)


def _events_file(path: Path) -> sqlite3.Connection:
    """A fresh SQLite file in WAL mode, fsynced on every commit, with an events table."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE events (revision INTEGER PRIMARY KEY, name TEXT, type TEXT, body TEXT)")
    return conn


def minimal_loop(path: Path, count: int, *, batch: int = 1000) -> float:
    """The limit: declarations appended, a dict cache rebuilt, one durable status event per
    resource (committed ``batch`` at a time: 1,000 for the limit; 1 for the reference
    where each status event is durable on its own), with stdlib sqlite3."""
    conn = _events_file(path)
    started = time.perf_counter()
    declarations = [
        {
            "api_version": THING.api_version,
            "kind": "Thing",
            "metadata": {"name": f"t{i}"},
            "spec": {"size": i},
        }
        for i in range(count)
    ]
    for start in range(0, count, 1000):
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO events (name, type, body) VALUES (?, 'Created', ?)",
            [(d["metadata"]["name"], dumps(d)) for d in declarations[start : start + 1000]],
        )
        conn.execute("COMMIT")
    cache = {row[0]: json.loads(row[1]) for row in conn.execute("SELECT name, body FROM events")}
    names = list(cache)
    for start in range(0, count, batch):
        conn.execute("BEGIN")
        rows = []
        for name in names[start : start + batch]:
            status = {"observed_generation": 1, "conditions": [{"type": "Ready", "status": "True"}]}
            cache[name]["status"] = status
            rows.append((name, dumps(cache[name])))
        conn.executemany("INSERT INTO events (name, type, body) VALUES (?, 'StatusChanged', ?)", rows)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


class _FloorLog:
    """The contract floor's event log: group commit on the event loop's own thread."""

    def __init__(self, path: Path) -> None:
        self.conn = _events_file(path)
        self.conn.execute("CREATE TABLE objects (name TEXT PRIMARY KEY, revision INTEGER)")
        self.pending: list[tuple[str, str, str, asyncio.Future[int]]] = []
        self.wake = asyncio.Event()
        self.head = 0

    def write(self, name: str, type_: str, body: dict[str, Any]) -> asyncio.Future[int]:
        """Queue an event; the future is its revision once committed."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append((name, type_, dumps(body), future))
        self.wake.set()
        return future

    async def run(self) -> None:
        """Commit whatever is queued, one transaction at a time."""
        while True:
            await self.wake.wait()
            self.wake.clear()
            await asyncio.sleep(0)
            batch, self.pending = self.pending, []
            rows = [(self.head + n, name, type_, text) for n, (name, type_, text, _) in enumerate(batch, 1)]
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
            self.conn.executemany(
                "INSERT INTO objects VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET revision = excluded.revision",
                [(name, revision) for revision, name, _, _ in rows],
            )
            self.conn.execute("COMMIT")
            self.head += len(rows)
            for (_, _, _, future), row in zip(batch, rows, strict=True):
                future.set_result(row[0])


async def _floor_converge(
    log: _FloorLog, converter: cattrs.Converter, cache: dict[str, Resource[ThingSpec, ManagedStatus]], i: int
) -> None:
    """One resource through the contract's minimum: typed admission, three durable events."""
    meta = converter.structure({"name": f"t{i}"}, ObjectMeta)
    spec = converter.structure({"size": i}, ThingSpec)
    body: dict[str, Any] = {
        "api_version": THING.api_version,
        "kind": "Thing",
        "metadata": converter.unstructure(meta),
        "spec": converter.unstructure(spec),
        "status": {"observed_generation": 0, "conditions": []},
    }
    uid = str(uuid.uuid4())
    body["metadata"].update(uid=uid, generation=1, creation_timestamp=_utcnow().isoformat())
    await log.write(meta.name, "Created", body)
    obj = Resource(
        THING.api_version, "Thing", attrs.evolve(meta, uid=uid, generation=1), spec, ManagedStatus()
    )
    cache[meta.name] = obj
    pending_meta = {
        **body["metadata"],
        "annotations": {"pending": _utcnow().isoformat()},
        "finalizers": ["f"],
    }
    body = {**body, "metadata": pending_meta}
    await log.write(meta.name, "FinalizerAdded", body)
    at = _utcnow()
    status = ManagedStatus(
        observed_generation=1,
        conditions=(
            Condition("Synced", ConditionStatus.TRUE, "ReconcileSuccess", "", at, 1),
            Condition("Ready", ConditionStatus.TRUE, "Available", "", at, 1),
        ),
    )
    done_meta = {**pending_meta, "annotations": {"succeeded": at.isoformat()}}
    await log.write(
        meta.name, "StatusChanged", {**body, "metadata": done_meta, "status": converter.unstructure(status)}
    )
    cache[meta.name] = attrs.evolve(obj, status=status)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def contract_floor(path: Path, count: int, workers: int) -> float:
    """A second reference: only the per-resource work the engine's contract requires, done
    as cheaply as Python allows. Typed admission (metadata and spec structured with
    cattrs and unstructured back), three durable events per resource (the declaration;
    the finalizer with the create-pending marker, which must be on disk before the
    external create; the outcome with the status and its two conditions), the typed object
    kept in a dict, ``workers`` asyncio tasks each awaiting its commits, group commit on
    the event loop's own thread. No validation rules, informer, watch, work queue,
    provider calls, events of actions, spans or metrics: what is left is the cost of
    typed objects, JSON and asyncio at three durable writes per resource."""
    log = _FloorLog(path)
    converter = make_converter()
    cache: dict[str, Resource[ThingSpec, ManagedStatus]] = {}
    work = iter(range(count))

    async def worker() -> None:
        for i in work:
            await _floor_converge(log, converter, cache, i)

    task = asyncio.create_task(log.run())
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed = time.perf_counter() - started
    task.cancel()
    log.conn.close()
    assert len(cache) == count
    assert all(o.status.observed_generation == 1 for o in cache.values())
    return elapsed
