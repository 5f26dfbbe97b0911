"""Group commit: how the writers (SQLite's, PostgreSQL's) gather concurrent writes into
one transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from reconcile import ObjectKey
from reconcile.store import EventStore, Put, SQLiteStore, open_store
from reconcile.store.postgres import writing as postgres_writing
from reconcile.store.sqlite import writing

CHAINS = 32
STEPS = 8


def _key(i: int) -> ObjectKey:
    return ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}")


async def test_released_writers_join_the_next_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of 32 writers makes 8 writes in a row, starting at different moments. A commit
    waits for the writers the previous commit released to ask again (one turn of the
    event loop), so the chains fall into step: one commit per step, not a second one
    for a straggler (every commit costs an fsync, and a small commit wastes it).

    How many commits the staggered start takes depends on how fast the writer's thread
    commits against the loop's turns (a loaded machine differs); what is counted is the
    commits once every chain has asked: the one in flight then, one that merges the
    groups, and one per step."""
    batches: list[int] = []
    settled: list[int] = []  # the batches committed once every chain has asked
    started = [0]
    commit = writing.commit_batch

    def counting(conn: Any, prepared: Any) -> Any:
        batches.append(len(prepared.results))
        if started[0] == CHAINS:
            settled.append(len(prepared.results))
        return commit(conn, prepared)

    monkeypatch.setattr(writing, "commit_batch", counting)

    async def chain(i: int, store: EventStore) -> None:
        for _ in range(i):  # start i turns of the loop late
            await asyncio.sleep(0)
        for step in range(STEPS):
            body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {"step": step}}
            written = store.write(_key(i), lambda _current, b=body: Put("SpecChanged", b), actor="t")
            started[0] += step == 0
            await written

    async with SQLiteStore(tmp_path / "state.db") as store:
        await asyncio.gather(*(chain(i, store) for i in range(CHAINS)))
        assert await store.revision() == CHAINS * STEPS
    assert sum(batches) == CHAINS * STEPS
    # Without the turn of the loop a straggler commits on its own at every step
    # ([1, 31, 1, 31, ...]: two commits per step); with it, one commit per step
    # once the chains are in step ([2, 32, 32, ..., 30]).
    assert len(settled) <= STEPS + 2, batches


async def test_released_writers_join_the_next_commit_on_postgres(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL: one transaction per step once the chains are in step."""
    batches: list[int] = []
    settled: list[int] = []
    started = [0]
    commit = postgres_writing.commit_batch

    async def counting(conn: Any, batch: Sequence[Any], now: float, **options: Any) -> Any:
        batches.append(len(batch))
        if started[0] == CHAINS:
            settled.append(len(batch))
        return await commit(conn, batch, now, **options)

    monkeypatch.setattr(postgres_writing, "commit_batch", counting)

    async def chain(i: int, store: EventStore) -> None:
        for _ in range(i):
            await asyncio.sleep(0)
        for step in range(STEPS):
            body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {"step": step}}
            written = store.write(_key(i), lambda _current, b=body: Put("SpecChanged", b), actor="t")
            started[0] += step == 0
            await written

    store = await open_store(postgres_url)
    try:
        await asyncio.gather(*(chain(i, store) for i in range(CHAINS)))
        assert await store.revision() == CHAINS * STEPS
    finally:
        await store.close()
    assert sum(batches) == CHAINS * STEPS
    assert len(settled) <= STEPS + 2, batches


async def test_a_commit_waits_for_another_connections_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the database's write lock: the batch is not prepared on the
    loop around it (the loop never waits for a lock), it waits for the lock on the
    writer's thread, then commits; and the loop keeps serving meanwhile."""
    path = tmp_path / "state.db"
    waiting = asyncio.Event()
    loop = asyncio.get_running_loop()
    begin_waiting = writing.begin_waiting

    def noticed(conn: Any, wait_ms: int) -> None:
        loop.call_soon_threadsafe(waiting.set)
        begin_waiting(conn, wait_ms)

    monkeypatch.setattr(writing, "begin_waiting", noticed)
    async with SQLiteStore(path) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        body = {"metadata": {"name": "w0", "uid": "u0"}, "spec": {}}
        write = asyncio.ensure_future(store.write(_key(0), lambda _: Put("Created", body), actor="t"))
        await waiting.wait()
        assert await store.read(_key(0)) is None  # the loop still answers
        other.execute("COMMIT")
        other.close()
        result = await write
        assert (result.revision, result.written) == (1, True)
        assert (await store.read(_key(0))) is not None
