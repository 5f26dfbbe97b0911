"""Faults on PostgreSQL, survived with nothing lost: a connection cut (by a TCP proxy in
front of a throwaway cluster), a COMMIT whose answer is lost, a server restart in the
middle of writes and of a convergence, a read-only server, and the command line against
a server that is down. Every write is checked in the log: exactly once, at the revision
its writer was told."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest
from postgres_cluster import Cluster, Proxy, cluster, in_thread
from postgres_server import execute

from reconcile import LockedError, ObjectKey, Runtime, StoreUnavailableError
from reconcile.cli import main
from reconcile.store import Mutation, Put, RawEvent, WriteResult, open_store
from reconcile.store.postgres.claims import AdvisoryClaim
from reconcile.testing import MemoryCloud, MemoryProvider

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


_schemas = iter(range(1, 1_000_000))


@pytest.fixture
async def url(server: Cluster) -> AsyncIterator[str]:
    """A fresh schema on the module's cluster."""
    schema = f"f{next(_schemas)}"
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

    async def test_a_lost_commit_still_open_on_the_server_is_waited_out(
        self, url: str, proxy: Proxy, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The writer's side cut before COMMIT, the server's side left open and silent
        (its transaction holds the key): the probe does not guess, it asks again until
        the server ends that transaction (rolled back), then the batch runs again: the
        write lands once."""
        caplog.set_level(logging.INFO, "reconcile.store")
        store = await open_store(proxy.url(url))
        try:
            results = {"warm": await store.write(_key("warm"), _put("warm"), actor="t")}
            proxy.cut_at_commit(after=False, hold=True)
            writing = asyncio.ensure_future(store.write(_key("w"), _put("w"), actor="t"))
            await _until("the cut", proxy.commit_cut.is_set)
            await _until("a probe timed out", lambda: "still running on the server" in caplog.text)
            assert not writing.done()
            proxy.release()
            async with asyncio.timeout(DEADLINE):
                results["w"] = await writing
        finally:
            await store.close()
        await _check_log(url, results)

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
            restarting = asyncio.create_task(in_thread(server.restart))
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
    await execute(
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


def _buckets(count: int) -> list[dict[str, object]]:
    return [
        {
            "apiVersion": "memory.reconcile.dev/v1",
            "kind": "Bucket",
            "metadata": {"name": f"b{i}"},
            "spec": {"name": f"b{i}", "value": str(i)},
        }
        for i in range(count)
    ]


def _bucket(i: int) -> ObjectKey:
    return ObjectKey("memory.reconcile.dev", "Bucket", "default", f"b{i}")


async def _until(what: str, condition: Callable[[], bool]) -> None:
    """Wait (yielding to the loop) until ``condition()`` holds, failing after DEADLINE."""
    try:
        async with asyncio.timeout(DEADLINE):
            while not condition():  # noqa: ASYNC110 - a real server's and a runner's progress, polled
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"not within {DEADLINE:g}s: {what}")


class TestRuntime:
    """A runner converging while its server restarts, or turns read-only."""

    async def test_a_restart_mid_convergence_loses_and_doubles_nothing(
        self, server: Cluster, url: str
    ) -> None:
        """Three hundred buckets, the server restarted while they converge: every one
        converges, made once in the cloud, and its log holds each step once."""
        cloud = MemoryCloud()
        cloud.latency = 0.005  # each call: so the restart lands mid-way
        async with Runtime(url, providers=[MemoryProvider(cloud)], patience=60.0) as rt:
            await rt.apply_many(_buckets(300))
            await _until("a first part made", lambda: len(cloud.items) >= 30)
            await in_thread(server.restart)
            assert len(cloud.items) < 300, "the restart came after the convergence"
            state = await rt.wait_converged(timeout=DEADLINE)
            assert state.converged
            health = rt.health()
            assert health.ready, health.problems()
            assert all(c.crashes == 0 for c in health.controllers)
            await _check_buckets(rt, 300)
        assert sorted(cloud.items) == sorted(f"b{i}" for i in range(300))
        assert cloud.calls["create"] == 300

    async def test_cuts_at_commit_under_a_runner_lose_and_double_nothing(
        self, url: str, proxy: Proxy
    ) -> None:
        """A runner behind the proxy: its writer cut at COMMIT (answer lost, then
        commit lost) and every connection cut while two hundred buckets converge: all
        converge, each made once, its log without a repeated step."""
        cloud = MemoryCloud()
        cloud.latency = 0.005
        async with Runtime(proxy.url(url), providers=[MemoryProvider(cloud)], patience=60.0) as rt:
            await rt.apply_many(_buckets(200))
            for after in (True, False):
                proxy.cut_at_commit(after=after)
                await _until("a cut at COMMIT", proxy.commit_cut.is_set)
            proxy.cut()
            state = await rt.wait_converged(timeout=DEADLINE)
            assert state.converged
            await _check_buckets(rt, 200)
        assert sorted(cloud.items) == sorted(f"b{i}" for i in range(200))
        assert cloud.calls["create"] == 200

    async def test_a_read_only_server_is_said_and_waited_out(
        self, server: Cluster, url: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The server turns read-only mid-convergence: the runner is not ready, its
        problems name the read-only server, nothing crashes (no traceback); writable
        again, it converges."""
        cloud = MemoryCloud()
        cloud.latency = 0.005
        try:
            async with Runtime(url, providers=[MemoryProvider(cloud)], patience=5.0) as rt:
                await rt.apply_many(_buckets(100))
                await _until("a first part made", lambda: len(cloud.items) >= 10)
                await _read_only(server, on=True)
                await _until("read-only said", lambda: not rt.health().ready)
                health = rt.health()
                assert any("the server is read-only" in p for p in health.problems()), health.problems()
                assert health.healthy
                assert all(c.crashes == 0 for c in health.controllers)
                await _read_only(server, on=False)
                state = await rt.wait_converged(timeout=DEADLINE)
                assert state.converged
                await _until("ready again", lambda: rt.health().ready)
                await _check_buckets(rt, 100)
        finally:
            await _read_only(server, on=False)
        assert "Traceback" not in caplog.text
        assert "read-only" in caplog.text


async def _check_buckets(rt: Runtime, count: int) -> None:
    """Each bucket's log: created once, no step repeated."""
    for i in range(count):
        events = await rt.client.store.events(_bucket(i))
        types = [e.type for e in events]
        for once in ("Created", "CreateRequested", "CreateSucceeded"):
            assert types.count(once) == 1, (i, types)
        # A doubled write would repeat its event exactly (but for its revision).
        steps = [(e.type, (e.body_text or "").replace(str(e.revision), ""), e.data_text) for e in events]
        assert all(a != b for a, b in itertools.pairwise(steps)), (i, types)


class TestCommandLine:
    """The command line against a server that is down or read-only."""

    def test_a_server_down_or_read_only_is_said_plainly(
        self,
        server: Cluster,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``apply`` on a read-only server, ``get`` on a stopped one: a message naming
        the server and why, a non-zero exit, no traceback, no password."""
        secret = "s3cret"  # noqa: S105 - trust auth ignores it; what must not be shown
        monkeypatch.setenv("RECONCILE_DB", server.url.replace("postgres@", f"postgres:{secret}@"))
        site = tmp_path / "site"
        site.mkdir()
        for name in ("a", "b"):
            (tmp_path / f"{name}.yaml").write_text(
                f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: {name}}}\n"
                f"spec: {{path: {name}.txt, content: hello}}\n"
            )

        def run(*args: str) -> tuple[int, str]:
            capsys.readouterr()
            code = main(["--root", str(site), *args])
            captured = capsys.readouterr()
            out = captured.out + captured.err
            assert secret not in out
            assert "Traceback" not in out
            return code, out

        assert run("apply", "-f", str(tmp_path / "a.yaml"))[0] == 0
        assert "writes refused" not in run("status")[1]
        asyncio.run(_read_only(server, on=True))
        try:
            code, out = run("apply", "-f", str(tmp_path / "b.yaml"))
            assert code != 0
            assert "the server is read-only" in out
            assert "postgres:***@127.0.0.1" in out
            assert run("get", "file")[0] == 0  # reads go on
            code, out = run("status")
            assert code == 0
            assert "writes refused: postgresql://postgres:***@127.0.0.1" in out
            assert "the server is read-only (default_transaction_read_only is on)" in out
        finally:
            asyncio.run(_read_only(server, on=False))
        server.stop()
        try:
            code, out = run("get", "file")
            assert code != 0
            assert "cannot reach the server" in out
            assert "postgres:***@127.0.0.1" in out
        finally:
            server.start()


class TestRunnerLock:
    """The runner lock (a session advisory lock) across a restart."""

    async def test_the_lock_is_taken_again_after_a_restart(self, server: Cluster, url: str) -> None:
        """The restart drops the lock with its session; the claim takes it again on a
        new one, so a second claim is refused again, naming this process."""
        store = await open_store(url)
        try:
            claim = await store.claim("runner")
            assert isinstance(claim, AdvisoryClaim)
            session = claim.pid
            await in_thread(server.restart)
            await _until("the lock taken again", lambda: claim.pid != session)
            other = await open_store(url)
            try:
                with pytest.raises(LockedError) as caught:
                    await other.claim("runner")
                assert f"pid {os.getpid()}" in caught.value.holder
            finally:
                await other.close()
            assert claim.lost is None
            claim.release()
        finally:
            await store.close()

    async def test_a_lock_taken_by_another_meanwhile_is_said(
        self, url: str, proxy: Proxy, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The claim's connection lost, and another process took the lock before the
        server was in reach again: the claim says who (``lost``) and logs an error,
        instead of believing it is alone."""
        store = await open_store(proxy.url(url))
        thief = await asyncpg.connect(url, server_settings={"application_name": "reconcile: pid 1 on thief"})
        try:
            claim = await store.claim("runner")
            assert isinstance(claim, AdvisoryClaim)
            key = store._layout.claim_key("runner")  # type: ignore[attr-defined]
            proxy.refusing = True
            proxy.cut()
            await thief.execute("SELECT pg_advisory_lock($1)", key)  # once the lost session is gone
            proxy.refusing = False
            await _until("the loss said", lambda: claim.lost is not None)
            assert claim.lost.startswith("pid 1 on thief since ")
            assert "took it: this runner is no longer alone" in caplog.text
            claim.release()
        finally:
            await thief.close()
            await store.close()
