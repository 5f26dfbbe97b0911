"""The references the reconcile benchmark measures the engine against, and its kind.

* :func:`minimal_loop`: the cold-convergence limit (and, committing each status event on
  its own, the per-event reference), stdlib sqlite3 and dicts;
* :func:`contract_floor`: the least per-resource work the engine's contract requires
  (typed objects, two durable writes), as cheaply as Python allows.
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

from reconcile import Behaviour, Kind, ManagedStatus
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
    behaviour=Behaviour.MARKED_ON_CREATE,
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
            "apiVersion": THING.api_version,
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
            status = {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]}
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


def _floor_declare(
    log: _FloorLog, converter: cattrs.Converter, i: int
) -> tuple[asyncio.Future[int], Resource[ThingSpec, ManagedStatus], dict[str, Any]]:
    """Typed admission of one declaration (metadata and spec structured, unstructured
    back, server fields and the managed finalizer added) and its durable write, queued."""
    meta = converter.structure({"name": f"t{i}"}, ObjectMeta)
    spec = converter.structure({"size": i}, ThingSpec)
    uid = str(uuid.uuid4())
    body: dict[str, Any] = {
        "apiVersion": THING.api_version,
        "kind": "Thing",
        "metadata": {
            **converter.unstructure(meta),
            "uid": uid,
            "generation": 1,
            "creationTimestamp": _utcnow().isoformat(),
            "finalizers": ["f"],
        },
        "spec": converter.unstructure(spec),
        "status": {"observedGeneration": 0, "conditions": []},
    }
    obj = Resource(
        THING.api_version,
        "Thing",
        attrs.evolve(meta, uid=uid, generation=1, finalizers=("f",)),
        spec,
        converter.structure(body["status"], ManagedStatus),
    )
    return log.write(meta.name, "Created", body), obj, body


async def _floor_converge(
    log: _FloorLog,
    converter: cattrs.Converter,
    cache: dict[str, Resource[ThingSpec, ManagedStatus]],
    declared: tuple[Resource[ThingSpec, ManagedStatus], dict[str, Any]],
) -> None:
    """One declared resource to Ready: its outcome (the create's request and success,
    the marker and the status with its two conditions) in one durable write."""
    obj, body = declared
    at = _utcnow()
    status = ManagedStatus(
        observed_generation=1,
        conditions=(
            Condition("Synced", ConditionStatus.TRUE, "ReconcileSuccess", "", at, 1),
            Condition("Ready", ConditionStatus.TRUE, "Available", "", at, 1),
        ),
    )
    done_meta = {**body["metadata"], "annotations": {"succeeded": at.isoformat()}}
    await log.write(
        obj.metadata.name,
        "StatusChanged",
        {**body, "metadata": done_meta, "status": converter.unstructure(status)},
    )
    cache[obj.metadata.name] = attrs.evolve(
        obj, metadata=attrs.evolve(obj.metadata, annotations=done_meta["annotations"]), status=status
    )


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def contract_floor(path: Path, count: int, workers: int) -> float:
    """A second reference: only the per-resource work the engine's contract requires, done
    as cheaply as Python allows. Typed admission (metadata and spec structured with
    cattrs and unstructured back), two durable writes per resource (the declaration with
    the managed finalizer, written in group commits as a bulk apply's are; the outcome,
    with the status and its two conditions, after the create), the typed object kept in a
    dict, ``workers`` asyncio tasks each awaiting its commit, group commit on the event
    loop's own thread. No validation rules, informer, watch, work queue, provider calls,
    events of actions, spans or metrics: what is left is the cost of typed objects, JSON
    and asyncio at two durable writes per resource."""
    log = _FloorLog(path)
    converter = make_converter()
    cache: dict[str, Resource[ThingSpec, ManagedStatus]] = {}
    task = asyncio.create_task(log.run())
    started = time.perf_counter()
    declared: list[tuple[Resource[ThingSpec, ManagedStatus], dict[str, Any]]] = []
    for first in range(0, count, 10_000):
        batch = [_floor_declare(log, converter, i) for i in range(first, min(count, first + 10_000))]
        await asyncio.gather(*(future for future, _, _ in batch))
        declared += [(obj, body) for _, obj, body in batch]
    work = iter(declared)

    async def worker() -> None:
        for item in work:
            await _floor_converge(log, converter, cache, item)

    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed = time.perf_counter() - started
    task.cancel()
    log.conn.close()
    assert len(cache) == count
    assert all(o.status.observed_generation == 1 for o in cache.values())
    return elapsed
