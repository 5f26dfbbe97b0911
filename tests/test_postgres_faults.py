"""Faults on PostgreSQL, survived with nothing lost: a connection cut (by a TCP proxy in
front of a throwaway cluster), a COMMIT whose answer is lost, a server restart in the
middle of writes and of a convergence, a read-only server, and the command line against
a server that is down. Every write is checked in the log: exactly once, at the revision
its writer was told."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from postgres_cluster import Cluster, Proxy, cluster

from reconcile import ObjectKey, StoreUnavailableError
from reconcile.store import Mutation, Put, RawEvent, WriteResult, open_store

#: Seconds a test waits for something that should happen in well under one.
DEADLINE = 60.0


def _put(name: str) -> Mutation:
    """A write of a new object ``name``."""
    return lambda _current: Put("Applied", {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {}})


def _key(name: str) -> ObjectKey:
    return ObjectKey("example.reconcile.dev", "Widget", "default", name)


@pytest.fixture(scope="module")
def server() -> Iterator[Cluster]:
    """A cluster of this module's own (restarted by its tests)."""
    with cluster("the PostgreSQL fault tests") as made:
        yield made


async def _execute(url: str, *statements: str) -> None:
    connection = await asyncpg.connect(url)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


_schemas = iter(range(1, 1_000_000))


@pytest.fixture
async def url(server: Cluster) -> AsyncIterator[str]:
    """A fresh schema on the module's cluster."""
    schema = f"f{next(_schemas)}"
    await _execute(server.url, f"CREATE SCHEMA {schema}")
    yield f"{server.url}?search_path={schema}"
    with contextlib.suppress(OSError, asyncpg.PostgresError):
        await _execute(server.url, f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
async def proxy(server: Cluster) -> AsyncIterator[Proxy]:
    """A TCP proxy in front of the cluster."""
    made = await Proxy(server.port).start()
    yield made
    await made.close()


async def _in_thread(call: object) -> None:
    """Run a blocking call (pg_ctl) without stopping the loop the store runs on."""
    assert callable(call)
    await asyncio.get_running_loop().run_in_executor(None, call)


async def _check_log(url: str, results: dict[str, WriteResult]) -> None:
    """Every write in ``results`` is in the log exactly once, at the revision its writer
    was told, and nothing else is."""
    store = await open_store(url, read_only=True)
    try:
        for name, result in results.items():
            events = await store.events(_key(name))
            assert [e.revision for e in events] == [result.revision], name
        (kind,) = await store.kinds()
        assert kind[2] == len(results)
    finally:
        await store.close()


class TestCuts:
    """A connection cut by the network: retried, never lost, never doubled."""

    @pytest.mark.parametrize("after", [True, False], ids=["answer-lost", "commit-lost"])
    async def test_a_cut_at_commit_is_resolved_by_the_idempotency_key(
        self, url: str, proxy: Proxy, after: bool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The writer's connection cut exactly at COMMIT, after the server got it (it
        committed; the answer is lost) or before: the write succeeds once, at the
        revision in the log, and the next one too."""
        store = await open_store(proxy.url(url))
        try:
            results = {"warm": await store.write(_key("warm"), _put("warm"), actor="t")}
            proxy.cut_at_commit(after=after)
            results["w"] = await store.write(_key("w"), _put("w"), actor="t")
            assert proxy.commit_cut.is_set()
            assert proxy.cuts == 1
            results["next"] = await store.write(_key("next"), _put("next"), actor="t")
            assert results["w"].object is not None
            assert results["w"].object.resource_version == results["w"].revision
        finally:
            await store.close()
        await _check_log(url, results)
        assert "lost the server" in caplog.text

    async def test_a_group_cut_at_commit_is_all_there_once(self, url: str, proxy: Proxy) -> None:
        """write_many (all or nothing) whose COMMIT answer is lost: every write of the
        group once, at the revisions reported."""
        store = await open_store(proxy.url(url))
        try:
            results = {"warm": await store.write(_key("warm"), _put("warm"), actor="t")}
            proxy.cut_at_commit(after=True)
            group = await store.write_many([(_key(f"g{i}"), _put(f"g{i}")) for i in range(5)], actor="t")
            assert proxy.commit_cut.is_set()
        finally:
            await store.close()
        await _check_log(url, results | {f"g{i}": result for i, result in enumerate(group)})

    async def test_writes_go_on_through_repeated_cuts(self, url: str, proxy: Proxy) -> None:
        """Three hundred writes in flight while every connection is cut, again and again
        (some at COMMIT): each lands exactly once; reads and the watch come back too."""
        store = await open_store(proxy.url(url))
        seen: list[int] = []
        moved = asyncio.Event()

        async def watch() -> None:
            async for item in store.watch():
                if isinstance(item, RawEvent):
                    seen.append(item.revision)
                    moved.set()

        watcher = asyncio.create_task(watch())
        try:
            results = {"warm": await store.write(_key("warm"), _put("warm"), actor="t")}
            names = [f"n{i}" for i in range(300)]
            futures = {}
            for round_ in range(3):
                batch = names[round_ * 100 : (round_ + 1) * 100]
                futures |= dict(
                    zip(batch, store.submit_many([(_key(n), _put(n)) for n in batch], actor="t"), strict=True)
                )
                proxy.cut_at_commit(after=round_ % 2 == 0)
                await asyncio.sleep(0)
                proxy.cut()
            async with asyncio.timeout(DEADLINE):
                for name, future in futures.items():
                    results[name] = await future
            assert proxy.cuts >= 3
            assert await store.read(_key("n299")) is not None
            async with asyncio.timeout(DEADLINE):
                while not seen or seen[-1] < max(r.revision for r in results.values()):
                    moved.clear()
                    await moved.wait()
            assert len(seen) == len(set(seen)) == len(results)
        finally:
            watcher.cancel()
            await store.close()
        await _check_log(url, results)


class TestRestart:
    """The server restarted under a store."""

    async def test_writes_and_the_watch_survive_a_restart(self, server: Cluster, url: str) -> None:
        """Writes queued while the server restarts all land, once; the watch started
        before hears the ones after (its LISTEN connection came back)."""
        store = await open_store(url)
        heard: asyncio.Queue[str] = asyncio.Queue()

        async def watch() -> None:
            async for item in store.watch(since=await store.revision()):
                if isinstance(item, RawEvent):
                    heard.put_nowait(item.key.name)

        watcher = asyncio.create_task(watch())
        try:
            results = {"before": await store.write(_key("before"), _put("before"), actor="t")}
            restarting = asyncio.create_task(_in_thread(server.restart))
            futures = {}
            while not restarting.done():
                name = f"r{len(futures)}"
                futures[name] = store.submit_many([(_key(name), _put(name))], actor="t")[0]
                await asyncio.sleep(0.005)
            await restarting
            async with asyncio.timeout(DEADLINE):
                for name, future in futures.items():
                    results[name] = await future
                results["after"] = await store.write(_key("after"), _put("after"), actor="t")
                names = set()
                while "after" not in names:
                    names.add(await heard.get())
        finally:
            watcher.cancel()
            await store.close()
        await _check_log(url, results)


class TestReadOnly:
    """A read-only server (a standby, a failover not finished)."""

    async def test_writes_fail_clearly_and_resume(self, server: Cluster, url: str) -> None:
        """default_transaction_read_only on: a write fails at once with
        StoreUnavailableError naming the server read-only, reads go on; off again, the
        next write lands."""
        store = await open_store(url, patience=2.0)
        try:
            await store.write(_key("a"), _put("a"), actor="t")
            await _read_only(server, on=True)
            with pytest.raises(StoreUnavailableError, match="the server is read-only") as caught:
                await store.write(_key("b"), _put("b"), actor="t")
            assert "127.0.0.1" in str(caught.value)
            assert await store.read(_key("a")) is not None
            await _read_only(server, on=False)
            result = await store.write(_key("b"), _put("b"), actor="t")
            assert result.written
        finally:
            await _read_only(server, on=False)
            await store.close()


async def _read_only(server: Cluster, *, on: bool) -> None:
    """Make the whole server read-only, or writable again (a reload: every session)."""
    value = "on" if on else "off"
    await _execute(
        server.url,
        "SET default_transaction_read_only = off",
        f"ALTER SYSTEM SET default_transaction_read_only = {value}",
        "SELECT pg_reload_conf()",
    )
    # The reload reaches every session at its next command: wait until a new one sees it.
    async with asyncio.timeout(DEADLINE):
        while True:
            connection = await asyncpg.connect(server.url)
            try:
                if await connection.fetchval("SHOW default_transaction_read_only") == value:
                    return
            finally:
                await connection.close()
            await asyncio.sleep(0.01)
