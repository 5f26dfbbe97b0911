"""The runner lock of an unsharded runner on PostgreSQL, lost and acted on as a lost
leader election is: another runner that takes the lock fences the first one's writes
(refused in their transaction, recorded), the first one's claim says it lost the lock,
its Runtime stops reconciling and ``run_until_stopped`` raises LockedError, and
``reconcile run`` exits 1 saying so. A lock taken back by the same runner, nobody having
held it meanwhile, keeps its fence."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest
from helpers import checkout_path
from postgres_cluster import Proxy

from reconcile import FencedError, LockedError, ObjectKey, Runtime
from reconcile.cli import main
from reconcile.store import EventStore, Mutation, Put, fenced, open_store
from reconcile.store.fencing import RUNNER_LOCK, Fence
from reconcile.store.postgres.claims import AdvisoryClaim
from reconcile.testing import MemoryCloud, MemoryProvider

#: Seconds a test waits for something that should happen in well under one.
DEADLINE = 60.0


def _put(name: str) -> Mutation:
    return lambda _current: Put("Applied", {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {}})


def _key(name: str) -> ObjectKey:
    return ObjectKey("example.reconcile.dev", "Widget", "default", name)


@pytest.fixture
async def proxy(postgres_url: str) -> AsyncIterator[Proxy]:
    """A TCP proxy in front of the shared server (its cuts end only connections through it)."""
    port = int(postgres_url.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    made = await Proxy(port).start()
    yield made
    await made.close()


async def _until(what: str, condition: Callable[[], bool]) -> None:
    try:
        async with asyncio.timeout(DEADLINE):
            while not condition():  # noqa: ASYNC110 - a server's and a claim's progress, polled
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"not within {DEADLINE:g}s: {what}")


async def _take_over(url: str, proxy: Proxy) -> tuple[EventStore, AdvisoryClaim, Fence]:
    """Cut every connection through ``proxy`` and keep it refusing until a store on
    ``url`` (not through it) holds the runner lock, fenced; the store, claim and fence."""
    other = await open_store(url)
    proxy.refusing = True
    proxy.cut()
    try:
        async with asyncio.timeout(DEADLINE):
            while True:  # until the server has ended the cut session (and its lock)
                try:
                    claim = await other.claim("runner")
                    break
                except LockedError:
                    await asyncio.sleep(0.01)
        assert isinstance(claim, AdvisoryClaim)
        fence = await claim.fence()
    finally:
        proxy.refusing = False
    return other, claim, fence


async def _refusals(url: str) -> list[tuple[int, int, str, str]]:
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch("SELECT shard, epoch, holder, name FROM reconcile_fenced ORDER BY id")
    finally:
        await connection.close()
    return [(int(s), int(e), str(h), str(n)) for s, e, h, n in rows]


class TestClaimFence:
    """The claim's fence, in one process (two stores stand for two runners)."""

    async def test_writes_fenced_by_a_lock_taken_over_are_refused_and_recorded(
        self, postgres_url: str, proxy: Proxy
    ) -> None:
        """Runner A's lock is lost with its connection and B takes it: A's claim is
        lost (its listener told B's name), A's next fenced write is refused with
        FencedError and recorded, nothing of it stored; B's writes go through."""
        first = await open_store(proxy.url(postgres_url))
        told: list[str] = []
        try:
            claim = await first.claim("runner")
            assert isinstance(claim, AdvisoryClaim)
            claim.on_lost(told.append)
            fence = await claim.fence()
            assert fence.shard == RUNNER_LOCK
            assert f"pid {os.getpid()}" in fence.holder
            with fenced(fence):
                assert (await first.write(_key("before"), _put("before"), actor="a")).written
            second, taken, theirs = await _take_over(postgres_url, proxy)
            try:
                assert theirs.epoch == fence.epoch + 1
                await _until("A finds its lock lost", lambda: claim.lost is not None)
                assert told == [claim.lost]
                assert claim.lost is not None
                assert claim.lost.startswith(f"pid {os.getpid()} on ")
                with fenced(fence), pytest.raises(FencedError, match="the runner lock moved on") as caught:
                    await first.write(_key("stale"), _put("stale"), actor="a")
                assert caught.value.shard == RUNNER_LOCK
                assert await first.read(_key("stale")) is None
                with fenced(theirs):
                    assert (await second.write(_key("theirs"), _put("theirs"), actor="b")).written
            finally:
                taken.release()
                await second.close()
        finally:
            claim.release()
            await first.close()
        assert await _refusals(postgres_url) == [(RUNNER_LOCK, fence.epoch, fence.holder, "stale")]

    async def test_a_lock_held_by_another_meanwhile_is_lost_even_if_free_again(
        self, postgres_url: str, proxy: Proxy
    ) -> None:
        """B takes A's lost lock and releases it before A comes back: A can take the
        lock again, but its epoch has moved on, so A does not keep it: lost, and the
        lock left free for a runner that starts anew."""
        first = await open_store(proxy.url(postgres_url))
        try:
            claim = await first.claim("runner")
            assert isinstance(claim, AdvisoryClaim)
            fence = await claim.fence()
            proxy.refusing = True  # A stays cut off until B is gone again
            second, taken, _ = await _take_over(postgres_url, proxy)
            proxy.refusing = True
            taken.release()
            await second.close()
            proxy.refusing = False
            await _until("A finds its lock lost", lambda: claim.lost is not None)
            assert "(epoch " in (claim.lost or "")
            with fenced(fence), pytest.raises(FencedError):
                await first.write(_key("stale"), _put("stale"), actor="a")
            again = await open_store(postgres_url)
            try:
                (await again.claim("runner")).release()  # free: A let it go
            finally:
                await again.close()
        finally:
            claim.release()
            await first.close()

    async def test_a_lock_taken_back_by_its_runner_keeps_its_fence(
        self, postgres_url: str, proxy: Proxy
    ) -> None:
        """A's connection cut and nobody else takes the lock: A takes it back on a new
        session, is not lost, and its fenced writes still go through."""
        store = await open_store(proxy.url(postgres_url))
        try:
            claim = await store.claim("runner")
            assert isinstance(claim, AdvisoryClaim)
            fence = await claim.fence()
            session = claim.pid
            proxy.cut()
            await _until("the lock taken back", lambda: claim.pid != session)
            assert claim.lost is None
            with fenced(fence):
                assert (await store.write(_key("after"), _put("after"), actor="a")).written
            claim.release()
        finally:
            await store.close()
        assert await _refusals(postgres_url) == []


class TestRuntime:
    """A Runtime whose runner lock is lost stops, as a controller manager whose leader
    election is lost."""

    async def test_a_runtime_that_loses_its_lock_stops_and_says_so(
        self, postgres_url: str, proxy: Proxy
    ) -> None:
        """A Runtime behind the proxy converges, then loses its lock to another runner:
        run_until_stopped raises LockedError naming it, the runtime reconciles nothing
        more (a bucket applied afterwards is not made), and its close does not wait out
        the shutdown deadline."""
        cloud = MemoryCloud()
        runtime = Runtime(
            proxy.url(postgres_url), providers=[MemoryProvider(cloud)], patience=60.0, shutdown_deadline=60.0
        )
        await runtime.start()
        try:
            await runtime.apply(_bucket("b0"))
            assert (await runtime.wait_converged(timeout=DEADLINE)).converged
            assert runtime.client.user is not None
            assert f"pid {os.getpid()}" in runtime.client.user
            second, taken, theirs = await _take_over(postgres_url, proxy)
            try:
                async with asyncio.timeout(DEADLINE):
                    with pytest.raises(LockedError, match="lost the runner lock to pid ") as caught:
                        await runtime.run_until_stopped()
                assert caught.value.holder.startswith(f"pid {os.getpid()} on ")
                assert runtime.lock_lost is caught.value
                health = runtime.health()
                assert not health.ready
                assert not health.healthy
                assert health.problems()[0] == str(caught.value)
                gates = [c.gate for c in runtime.controllers.values()]
                assert gates, "no controller"
                b1 = ObjectKey("memory.reconcile.dev", "Bucket", "default", "b1")
                assert all(gate is not None and not gate.owns(b1) for gate in gates)
                assert runtime.collector is not None
                assert runtime.collector.gate is gates[0]
                started = time.monotonic()
                await runtime.close()
                assert time.monotonic() - started < 10, "the close waited for a graceful drain"
            finally:
                taken.release()
                await second.close()
        finally:
            await runtime.close()
        assert theirs.epoch > 1


def _bucket(name: str) -> dict[str, object]:
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"name": name, "value": "1"},
    }


# -- two `reconcile run` processes ------------------------------------------------------------

COUNT = 1500


def _runner(url: str, cwd: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``reconcile run`` (unsharded), its output in ``log``."""
    env = {**os.environ, "PYTHONPATH": checkout_path(), "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "reconcile", "--db", url, "run", *args, "--workers", "4", "-q"],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


async def _sql(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(url)
    try:
        return list(await connection.fetch(sql, *args))
    finally:
        await connection.close()


def _query(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    return asyncio.run(_sql(url, sql, *args))


def _wait(what: str, check: Callable[[], bool], deadline: float = DEADLINE) -> None:
    """Wait until ``check()`` holds (polled: the state is other processes')."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > deadline:
            msg = f"not within {deadline} s: {what}"
            raise AssertionError(msg)
        time.sleep(0.05)


def _written(url: str, pid: int) -> int:
    rows = _query(url, 'SELECT count(*) FROM reconcile_events WHERE "user" LIKE $1', f"pid {pid} on %")
    return int(rows[0][0])


def _holds_lock(url: str, pid: int) -> bool:
    """Whether a session of process ``pid`` (its claim's application_name) holds an
    advisory lock in this database."""
    rows = _query(
        url,
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() "
        "AND a.application_name LIKE $1",
        f"reconcile: pid {pid} on %",
    )
    return int(rows[0][0]) > 0


def test_a_paused_runner_whose_lock_moved_on_is_fenced_and_exits(postgres_url: str, tmp_path: Path) -> None:
    """Runner A at work, a --standby B waiting. A is paused (SIGSTOP) and its lock's
    session ended meanwhile (what a network cut or the server's keepalive does to a
    paused process), so B takes the lock. A resumed (SIGCONT): its writes since B took
    over are refused and recorded, it exits 1 saying it lost the runner lock, and B
    converges everything: every file made once, every write of A before B's first."""
    manifest = tmp_path / "many.yaml"
    manifest.write_text(
        "---\n".join(
            f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: f{i}}}\n"
            f"spec: {{path: 'www/d{i % 20}/f{i}.txt', content: 'file {i}'}}\n"
            for i in range(COUNT)
        )
    )
    assert main(["--db", postgres_url, "apply", "-f", str(manifest)]) == 0
    first = _runner(postgres_url, tmp_path, tmp_path / "a.log")
    standby: subprocess.Popen[bytes] | None = None
    try:
        _wait("A holds the lock", lambda: _holds_lock(postgres_url, first.pid))
        standby = _runner(postgres_url, tmp_path, tmp_path / "b.log", "--standby")
        seen = [_written(postgres_url, first.pid)]

        def busy() -> bool:  # A writing now: it has reconciles in flight when paused
            seen.append(_written(postgres_url, first.pid))
            return seen[-1] > seen[-2] > 0

        _wait("A at work", busy)
        first.send_signal(signal.SIGSTOP)
        _query(
            postgres_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE $1",
            f"reconcile: pid {first.pid} on %",
        )
        pid = standby.pid
        _wait("B takes the lock", lambda: _holds_lock(postgres_url, pid))
        first.send_signal(signal.SIGCONT)
        try:
            code = first.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail("the runner that lost its lock did not exit")
        _wait("B converges everything", lambda: _created(postgres_url) == COUNT, 120.0)
        refused = _query(
            postgres_url,
            "SELECT count(*) FROM reconcile_fenced WHERE shard = -1 AND holder LIKE $1",
            f"pid {first.pid} on %",
        )[0][0]
        last_of_a = _query(
            postgres_url,
            'SELECT max(revision) FROM reconcile_events WHERE "user" LIKE $1',
            f"pid {first.pid} on %",
        )[0][0]
        first_of_b = _query(
            postgres_url, 'SELECT min(revision) FROM reconcile_events WHERE "user" LIKE $1', f"pid {pid} on %"
        )[0][0]
        doubled = _query(
            postgres_url,
            "SELECT o.name, count(*) FROM reconcile_events e JOIN reconcile_objects o ON o.id = e.object_id "
            "WHERE e.type = 'CreateSucceeded' GROUP BY 1 HAVING count(*) > 1",
        )
    finally:
        for runner in (first, standby):
            if runner is not None and runner.poll() is None:
                runner.send_signal(signal.SIGCONT)
                runner.send_signal(signal.SIGTERM)
        for runner in (first, standby):
            if runner is None:
                continue
            try:
                runner.wait(timeout=15)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait()
    log = (tmp_path / "a.log").read_text()
    print(f"\nA's writes refused after B took over: {refused}")  # noqa: T201
    assert code == 1, log[-2000:]
    assert "lost the runner lock" in log, log[-2000:]
    assert f"pid {pid} on " in log, log[-2000:]
    assert "Traceback" not in log, log[-2000:]
    assert last_of_a < first_of_b, "A wrote after B began"
    assert refused > 0, f"A's writes in flight were not refused: {log[-2000:]}"
    assert doubled == []
    files = [p for p in (tmp_path / "www").rglob("*") if p.is_file()]
    assert len(files) == COUNT, "every file once, no temporaries left behind"


def _created(url: str) -> int:
    """How many files have a CreateSucceeded event."""
    rows = _query(
        url,
        "SELECT count(DISTINCT e.object_id) FROM reconcile_events e WHERE e.type = 'CreateSucceeded'",
    )
    return int(rows[0][0])
