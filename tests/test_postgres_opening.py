"""Opening a PostgreSQL store while the server is away: a store opened while its server
is down (or starting up) waits for it, within the patience; a connection lost during the
schema steps is tried again from a new connection and leaves the schema whole; bad
input (wrong credentials, an unknown database, another application's tables) fails at
once, without waiting out the patience and without the password."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator

import asyncpg
import pytest
from postgres_cluster import Cluster, Proxy, cluster, in_thread
from postgres_server import execute

from reconcile import ObjectKey, Runtime, StoreError
from reconcile.store import Mutation, Put, open_store
from reconcile.store.postgres.schema import SCHEMA_VERSION
from reconcile.testing import MemoryCloud, MemoryProvider

#: Seconds a test waits for something that should happen in well under one.
DEADLINE = 60.0
#: The patience the stores of these tests are opened with: what "at once" is measured against.
PATIENCE = 30.0
#: Seconds a failure "at once" may take (a connection or two, on a loaded machine).
AT_ONCE = 5.0


@pytest.fixture(scope="module")
def server() -> Iterator[Cluster]:
    """A cluster of this module's own (stopped and started by its tests)."""
    with cluster("the PostgreSQL opening tests") as made:
        yield made


_schemas = iter(range(1, 1_000_000))


@pytest.fixture
async def url(server: Cluster) -> AsyncIterator[str]:
    """A fresh schema on the module's cluster."""
    schema = f"o{next(_schemas)}"
    await execute(server.url, f"CREATE SCHEMA {schema}")
    yield f"{server.url}?search_path={schema}"
    with contextlib.suppress(OSError, asyncpg.PostgresError):
        await execute(server.url, f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
async def proxy(server: Cluster) -> AsyncIterator[Proxy]:
    """A TCP proxy in front of the cluster."""
    made = await Proxy(server.port).start()
    yield made
    await made.close()


async def _until(what: str, condition: Callable[[], bool]) -> None:
    """Wait (yielding to the loop) until ``condition()`` holds, failing after DEADLINE."""
    try:
        async with asyncio.timeout(DEADLINE):
            while not condition():  # noqa: ASYNC110 - a store's attempts, polled
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"not within {DEADLINE:g}s: {what}")


def _key(name: str) -> ObjectKey:
    return ObjectKey("example.reconcile.dev", "Widget", "default", name)


def _put(name: str) -> Mutation:
    return lambda _current: Put("Applied", {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {}})


async def _schema_whole(url: str) -> None:
    """The store at ``url`` is at the current schema version, each of its tables there
    once, and it takes a write and a read."""
    connection = await asyncpg.connect(url)
    try:
        version = await connection.fetchval("SELECT value FROM reconcile_meta WHERE key = 'schema_version'")
        assert int(version) == SCHEMA_VERSION
        tables = await connection.fetch(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() GROUP BY tablename"
        )
        assert len(tables) == 7, tables  # events, objects, meta, commits, shards, runners, fenced
        assert all(row[0] == 1 for row in tables)
        marker = "SELECT count(*) FROM reconcile_meta WHERE key = 'application'"
        assert await connection.fetchval(marker) == 1
    finally:
        await connection.close()
    store = await open_store(url)
    try:
        result = await store.write(_key("w"), _put("w"), actor="t")
        assert result.written
        assert await store.read(_key("w")) is not None
    finally:
        await store.close()


class TestServerAway:
    """The server down, or lost mid-way, while a store opens."""

    async def test_an_open_waits_for_a_server_that_is_down(
        self, server: Cluster, url: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The cluster stopped, a store opens, the cluster starts a moment later (well
        within the patience): the open succeeds, a warning said it tried again."""
        caplog.set_level(logging.INFO, "reconcile.store")
        await in_thread(server.stop)
        try:
            opening = asyncio.ensure_future(open_store(url, patience=PATIENCE))
            await _until("an attempt failed", lambda: opening.done() or "lost the server" in caplog.text)
            assert not opening.done(), "the open did not wait for the server"
        finally:
            await in_thread(server.start)
        async with asyncio.timeout(DEADLINE):
            store = await opening
        try:
            assert await store.write(_key("a"), _put("a"), actor="t")
        finally:
            await store.close()
        assert "opening: lost the server" in caplog.text
        await _schema_whole(url)

    async def test_a_runtime_started_while_the_server_restarts_converges(
        self, server: Cluster, url: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A Runtime started while its server is down: it starts once the server is
        back, and converges."""
        await in_thread(server.stop)
        cloud = MemoryCloud()
        try:
            runtime = Runtime(url, providers=[MemoryProvider(cloud)], patience=PATIENCE)
            starting = asyncio.ensure_future(runtime.start())
            await _until("an attempt failed", lambda: starting.done() or "lost the server" in caplog.text)
            assert not starting.done(), "the runtime did not wait for the server"
        finally:
            await in_thread(server.start)
        async with asyncio.timeout(DEADLINE):
            await starting
        try:
            await runtime.apply(
                {
                    "apiVersion": "memory.reconcile.dev/v1",
                    "kind": "Bucket",
                    "metadata": {"name": "b"},
                    "spec": {"name": "b", "value": "1"},
                }
            )
            state = await runtime.wait_converged(timeout=DEADLINE)
            assert state.converged
        finally:
            await runtime.close()
        assert sorted(cloud.items) == ["b"]

    @pytest.mark.parametrize("after", [True, False], ids=["answer-lost", "commit-lost"])
    async def test_a_connection_lost_during_the_schema_steps(
        self, url: str, proxy: Proxy, after: bool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The connection making the schema cut at its COMMIT, after the server got it
        (the steps are done, the answer lost) or before (rolled back): the open tries
        again from a new connection and succeeds, the schema whole, made once."""
        proxy.cut_at_commit(after=after)  # the schema steps' transaction is the first COMMIT
        async with asyncio.timeout(DEADLINE):
            store = await open_store(proxy.url(url), patience=PATIENCE)
        await store.close()
        assert proxy.commit_cut.is_set()
        assert proxy.cuts == 1
        assert "opening: lost the server" in caplog.text
        await _schema_whole(url)

    async def test_a_connection_lost_in_the_middle_of_the_schema_steps(self, url: str, proxy: Proxy) -> None:
        """The connection cut while the steps run (the tables of step 1 made, in the
        transaction, a function next): it rolls back, the next attempt makes the whole
        schema once."""
        blocker = await asyncpg.connect(url)
        try:
            # CREATE FUNCTION writes pg_proc: with it locked, the steps stop at their first
            # function, after their first tables, inside their transaction.
            await blocker.execute("BEGIN")
            await blocker.execute("LOCK TABLE pg_catalog.pg_proc IN EXCLUSIVE MODE")
            opening = asyncio.ensure_future(open_store(proxy.url(url), patience=PATIENCE))
            async with asyncio.timeout(DEADLINE):
                waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'pg_proc'::regclass"
                while not await blocker.fetchval(waiting):  # noqa: ASYNC110 - the server's locks, polled
                    await asyncio.sleep(0.01)
            proxy.cut()
            await blocker.execute("ROLLBACK")
        finally:
            await blocker.close()
        async with asyncio.timeout(DEADLINE):
            store = await opening
        await store.close()
        assert proxy.cuts >= 1
        await _schema_whole(url)


@pytest.fixture(scope="module")
def scram_server() -> Iterator[str]:
    """A throwaway cluster that checks passwords (scram-sha-256); its URL with the right
    password."""
    with cluster("the wrong-password test", auth="scram-sha-256", password="right") as made:  # noqa: S106 - a test cluster's
        yield made.url


class TestBadInputAtOnce:
    """Bad input is not a server away: no retry, no waiting out the patience."""

    async def test_a_wrong_password_fails_at_once(
        self, scram_server: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The wrong password: StoreError ``authentication failed`` well before the
        patience, the password in no message and no log line."""
        wrong = scram_server.replace(":right@", ":wr0ngpw@")
        started = time.monotonic()
        with pytest.raises(StoreError, match="authentication failed") as caught:
            await open_store(wrong, patience=PATIENCE)
        took = time.monotonic() - started
        assert took < AT_ONCE, f"{took:.1f}s: the wrong password was tried again"
        assert "wr0ngpw" not in str(caught.value)
        assert "wr0ngpw" not in caplog.text
        assert "lost the server" not in caplog.text

    async def test_an_unknown_database_fails_at_once(self, server: Cluster) -> None:
        """A database that does not exist: said at once, nothing created."""
        started = time.monotonic()
        with pytest.raises(StoreError, match="does not exist"):
            await open_store(server.url.replace("/postgres", "/nosuchdb"), patience=PATIENCE)
        assert time.monotonic() - started < AT_ONCE

    async def test_another_applications_tables_fail_at_once(self, url: str) -> None:
        """A schema holding another application's table: refused by name at once,
        nothing created."""
        await execute(url, "CREATE TABLE invoices (id int)")
        started = time.monotonic()
        with pytest.raises(StoreError, match="invoices"):
            await open_store(url, patience=PATIENCE)
        assert time.monotonic() - started < AT_ONCE
        connection = await asyncpg.connect(url)
        try:
            tables = await connection.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        finally:
            await connection.close()
        assert [row[0] for row in tables] == ["invoices"]
