"""The floor of ``store.write``: the least a write through the store's contract must cost
beyond SQLite's own rows, done as cheaply as asyncio and Python allow, for
``benchmarks/store.py`` to measure beside the store.

What the contract asks of each write and the off-the-loop limit
(``raw_rows_off_loop``: the store's rows, their JSON made from the same payloads, one
call per transaction on aiosqlite's connection thread) does not do:

* the caller awaits its own write: a future per write, resolved when its commit is
  durable, and a writer task resumed by it (the limit writes from one loop, no waiting);
* the write is a *mutation* of the current object: the object's current row is read in
  the write's transaction (one statement for the batch, by key), and the mutation, a
  Python callable, is called with it; its new body is then encoded (the limit encodes the
  same payloads too);
* its revision is assigned in the transaction, and its caller gets a result (the
  revision and the stored body).

No validation, no idempotency or precondition checks, no event rows kept for watches, no
metrics: every write of a batch queued while the previous commit ran goes in the next
one, as the store's group commit does, and each batch is one call on the connection's
thread (BEGIN IMMEDIATE, the head, the current rows, the mutations, the JSON, the rows,
COMMIT) where the store runs the batch's Python on the loop and only SQLite on the
thread: the same CPU, in one hop instead of two.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import orjson

from reconcile.store.encoding import dumps
from reconcile.store.sqlite.schema import prepare

__all__ = ["write_floor"]

#: A write: its key (kind, namespace, name), its mutation, its future.
Mutation = Callable[[dict[str, Any] | None], dict[str, Any]]
Write = tuple[tuple[str, str, str], Mutation, "asyncio.Future[tuple[int, dict[str, Any]]]"]

GROUP = "example.reconcile.dev"


def _commit(conn: sqlite3.Connection, batch: list[tuple[tuple[str, str, str], Mutation]]) -> list[Any]:
    """One batch's transaction, on the connection's thread: each write's result (its
    revision and body), or the exception its mutation raised."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        head, last_id = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'revision'), "
            "(SELECT coalesce(max(id), 0) FROM objects)"
        ).fetchone()
        names = [name for (_, _, name) in (key for key, _ in batch)]
        marks = ",".join("?" * len(names))
        current = {
            name: (object_id, body)
            for object_id, name, body in conn.execute(
                "SELECT o.id, o.name, e.body FROM objects o JOIN events e ON e.revision = o.resource_version "
                "WHERE o.api_group = ? AND o.kind = 'Widget' AND o.namespace = 'default' "
                f"AND o.name IN ({marks})",
                [GROUP, *names],
            )
        }
        results: list[Any] = []
        new_objects, changed, events = [], [], []
        now = time.time()
        for (_kind, _namespace, name), mutation in batch:
            found = current.get(name)
            try:
                body = mutation(None if found is None else _loads(found[1]))
            except Exception as exc:  # noqa: BLE001 - the write's own failure
                results.append(exc)
                continue
            head += 1
            uid = body["metadata"]["uid"]
            if found is None:
                last_id += 1
                object_id = last_id
                new_objects.append((object_id, name, uid, head))
                current[name] = (object_id, "")
            else:
                object_id = found[0]
                changed.append((head, object_id))
            events.append((head, now, object_id, uid, dumps(body)))
            results.append((head, body))
        conn.executemany(
            "INSERT INTO objects (id, api_group, kind, namespace, name, uid, resource_version, live) "
            f"VALUES (?, '{GROUP}', 'Widget', 'default', ?, ?, ?, 1)",
            new_objects,
        )
        conn.executemany("UPDATE objects SET resource_version = ? WHERE id = ?", changed)
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, 'Created', 'bench', ?, NULL, NULL)", events)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (head,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return results


def _loads(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads(text)
    return loaded


class _Floor:
    """The group commit, bare: writes queue, one task commits them a batch at a time."""

    def __init__(self, run: Callable[..., Any], conn: sqlite3.Connection) -> None:
        self._run, self._conn = run, conn
        self._queue: list[Write] = []
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._committing())

    async def write(self, key: tuple[str, str, str], mutation: Mutation) -> tuple[int, dict[str, Any]]:
        future: asyncio.Future[tuple[int, dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._queue.append((key, mutation, future))
        self._wake.set()
        return await future

    async def _committing(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                taken, self._queue = self._queue, []
                results = await self._run(
                    _commit, self._conn, [(key, mutation) for key, mutation, _ in taken]
                )
                for (_, _, future), result in zip(taken, results, strict=True):
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
                # The writers released take their turn before the next batch is taken,
                # as the store's do.
                await asyncio.sleep(0)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def write_floor(
    path: Path, size: int, synchronous: str, writers: int, payload: Callable[[int], dict[str, Any]]
) -> float:
    """Writes/s of ``size`` new objects (``payload(i)`` each) by ``writers`` tasks at once
    through the bare group commit (see the module)."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        # aiosqlite's own way to run a function on its connection thread (the store's too).
        run, raw = conn._execute, conn._conn  # noqa: SLF001
        await run(prepare, raw, str(path), synchronous)
        floor = _Floor(run, raw)
        work = iter([(("Widget", "default", f"w{i}"), payload(i)) for i in range(size)])

        async def writer() -> None:
            for key, body in work:
                await floor.write(key, lambda _current, body=body: body)

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - started
        await floor.close()
    return size / elapsed
