"""Several ``reconcile run --sharding`` processes on one PostgreSQL database: they split the
keys, a killed one's shards move, a paused one's stale writes are refused and recorded,
and a joiner takes a share; nothing is done twice."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
from helpers import checkout_path

from reconcile import ObjectKey
from reconcile.cli import main
from reconcile.store import open_store
from reconcile.store.fencing import ShardTable, shard_of

COUNT = 3000
LEASE = 1.5
RENEW = 0.3
DEADLINE = 45.0
#: How many of its keys a runner must still have to converge when it is paused.
TO_GO = 30
#: How long to look for such a moment before pausing it whenever it writes.
PREFER = 15.0


def _runner(url: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """``reconcile run --sharding`` with short leases, its output in ``log``."""
    env = {**os.environ, "PYTHONPATH": checkout_path(), "PYTHONUNBUFFERED": "1"}
    args = ["run", "--sharding", "--lease-duration", str(LEASE), "--renew-interval", str(RENEW)]
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "reconcile", "--db", url, *args, "--workers", "4", "-q"],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


async def _table(url: str) -> tuple[ShardTable, dict[str, Any]]:
    """The lease table, and how many files are Ready."""
    store = await open_store(url, read_only=True)
    try:
        table = await store.shard_table() or ShardTable((), {}, 0)  # None: no runner yet
        ready = 0
        unready: collections.Counter[int] = collections.Counter()  # shard -> files not Ready
        after: tuple[str, str] | None = None
        while True:
            page = await store.list("files.reconcile.dev", "File", after=after, limit=1000)
            for obj in page.items:
                conditions = obj.body.get("status", {}).get("conditions", [])
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    ready += 1
                else:
                    unready[shard_of(obj.key, len(table.leases) or 64)] += 1
            if page.next_after is None:
                break
            after = page.next_after
        return table, {"ready": ready, "unready": unready}
    finally:
        await store.close()


async def _history(url: str) -> tuple[collections.Counter[str], dict[str, list[str]]]:
    """Per file: how many CreateSucceeded, and the runners (the events' user) of the
    engine's events in order."""
    store = await open_store(url, read_only=True)
    try:
        created: collections.Counter[str] = collections.Counter()
        runners: dict[str, list[str]] = {}
        creators: dict[str, list[str]] = {}
        async for event in store.watch(since=0, kind="File"):
            if not hasattr(event, "key"):
                break  # the first bookmark: caught up
            name = event.key.name
            if event.type == "CreateSucceeded":
                created[name] += 1
                creators.setdefault(name, []).append(f"{event.user}@{event.revision}")
            if event.actor != "reconcile" and event.user is not None:
                seq = runners.setdefault(name, [])
                if not seq or seq[-1] != event.user:
                    seq.append(event.user)
        doubled = {name: creators[name] for name, n in created.items() if n > 1}
        assert not doubled, f"created twice (runner@revision): {dict(list(doubled.items())[:5])}"
        return created, runners
    finally:
        await store.close()


async def _count(url: str, sql: str, holder: str) -> int:
    base, _, query = url.partition("?")
    conn = await asyncpg.connect(base, server_settings={"search_path": query.removeprefix("search_path=")})
    try:
        return int(await conn.fetchval(sql, holder))
    finally:
        await conn.close()


def _refused_by(url: str, holder: str) -> int:
    """How many writes of ``holder`` the store refused (its ``reconcile_fenced`` rows)."""
    return asyncio.run(_count(url, "SELECT count(*) FROM reconcile_fenced WHERE holder = $1", holder))


def _written_by(url: str, holder: str) -> int:
    """How many events ``holder``'s controllers wrote (their ``user``)."""
    return asyncio.run(_count(url, 'SELECT count(*) FROM reconcile_events WHERE "user" = $1', holder))


def _wait(what: str, check: Callable[[], bool], deadline: float = DEADLINE) -> float:
    """Wait until ``check()`` holds (polled: the state is other processes'); seconds taken."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > deadline:
            msg = f"not within {deadline} s: {what}"
            raise AssertionError(msg)
        time.sleep(0.05)
    return time.monotonic() - start


def test_three_runners_share_survive_a_kill_and_a_pause_and_take_a_joiner(
    postgres_url: str, tmp_path: Path
) -> None:
    """Three runners converge 3,000 files; SIGKILL one (its shards move within the lease
    duration), SIGSTOP another past its lease and SIGCONT it (its writes are refused and
    recorded), a fourth joins and takes a share; every file is made once, each key's
    runner changes only as its shard's lease did."""
    manifest = tmp_path / "many.yaml"
    manifest.write_text(
        "---\n".join(
            f"apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {{name: f{i}}}\n"
            f"spec: {{path: 'www/d{i % 20}/f{i}.txt', content: 'file {i}'}}\n"
            for i in range(COUNT)
        )
    )
    assert main(["--db", postgres_url, "apply", "-f", str(manifest)]) == 0
    state: dict[str, Any] = {}

    def look() -> ShardTable:
        table, state["objects"] = asyncio.run(_table(postgres_url))
        state["table"] = table
        return table

    runners = [_runner(postgres_url, tmp_path, tmp_path / f"r{i}.log") for i in range(3)]
    try:
        started = time.monotonic()
        _wait("three runners hold shards", lambda: len(look().by_holder()) == 3)
        holders = {r.split(":")[1]: r for r in state["table"].by_holder()}
        victim = holders[str(runners[1].pid)]
        runners[1].send_signal(signal.SIGKILL)
        runners[1].wait()
        moved = _wait(
            "the killed runner's shards move",
            lambda: (
                victim not in look().by_holder() and sum(map(len, state["table"].by_holder().values())) == 64
            ),
        )
        paused = holders[str(runners[2].pid)]
        refused_before, mid_work = _pause_past_lease(
            postgres_url, runners[2], paused, holders[str(runners[0].pid)], look
        )
        runners[2].send_signal(signal.SIGCONT)
        runners.append(_runner(postgres_url, tmp_path, tmp_path / "r3.log"))
        _wait(
            "the joiner takes a share",
            lambda: any(r.split(":")[1] == str(runners[3].pid) for r in look().by_holder()),
        )
        _wait("all Ready", lambda: look() is not None and state["objects"]["ready"] == COUNT, 60.0)
        converged = time.monotonic() - started
        table = state["table"]
        created, sequences = asyncio.run(_history(postgres_url))
        refused_after = _refused_by(postgres_url, paused)
    finally:
        for runner in runners:
            if runner.poll() is None:
                runner.send_signal(signal.SIGCONT)
                runner.send_signal(signal.SIGTERM)
        for runner in runners:
            try:
                runner.wait(timeout=15)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait()
    _assert_done_once(tmp_path, table, created, sequences)
    log = (tmp_path / "r2.log").read_text()
    print(f"\nshards moved {moved:.2f} s after the SIGKILL; 3,000 converged in {converged:.1f} s")  # noqa: T201
    print(f"fenced writes recorded: {table.refused}, {refused_after - refused_before} of the paused runner")  # noqa: T201
    # Whether the paused runner had a write in flight when it was stopped is up to the
    # scheduler: keys still to converge in its shards may be waiting for its cache (a
    # shard just taken from the killed runner), so a refusal cannot be forced from
    # outside (seen: 30+ keys to go and nothing in flight). What must hold whatever
    # happened is checked above: nothing made twice, and no key's runner changing more
    # often than its shard's lease did. The refusal itself is proven deterministically
    # in test_sharding.py (test_a_write_under_a_moved_lease_is_refused_and_recorded).
    print(  # noqa: T201
        f"paused with {'keys' if mid_work else 'no keys'} of its shards to go; "
        f"its writes refused: {refused_after - refused_before}"
    )
    if refused_after > refused_before:  # each refusal is said in the runner's log
        assert "refused" in log


def _key(name: str) -> ObjectKey:
    return ObjectKey("files.reconcile.dev", "File", "default", name)


def _assert_done_once(
    tmp_path: Path, table: ShardTable, created: collections.Counter[str], sequences: dict[str, list[str]]
) -> None:
    """Every file made once with its content, one CreateSucceeded per object, and each
    object's runner (its engine events' user) changing no more often than its shard's
    lease changed hands (the epoch counts the acquisitions): never two at once."""
    files = [p for p in (tmp_path / "www").rglob("*") if p.is_file()]
    assert len(files) == COUNT, "every file once, no temporaries left behind"
    assert all(p.read_text() == f"file {p.stem[1:]}" for p in files)
    assert set(created.values()) == {1}, "a create recorded twice"
    assert len(created) == COUNT
    epochs = {lease.shard: lease.epoch for lease in table.leases}
    for name, seq in sequences.items():
        key_shard = shard_of(_key(name), len(table.leases))
        assert len(seq) - 1 <= epochs[key_shard] - 1, f"{name}: runners {seq} beyond its shard's epochs"


def _pause_past_lease(
    url: str, runner: subprocess.Popen[bytes], paused: str, survivor_id: str, look: Callable[[], ShardTable]
) -> tuple[int, bool]:
    """SIGSTOP ``runner`` while it writes, until the survivor took some of its shards;
    the refusals of its writes before, and whether it was paused with keys of its
    shards still to converge (SIGCONT is the caller's)."""
    refused_before = _refused_by(url, paused)
    seen = [_written_by(url, paused)]
    looking_since = time.monotonic()
    to_go = [0]

    def busy() -> bool:
        """Writing now, preferably with keys of its shards still to converge: reconciles
        in flight to be refused later (a runner seen writing may have just finished its
        share, and a pause then catches it idle, with nothing to refuse). A share that
        converges before such a moment is seen (a fast machine) is paused writing, and
        one that converged before the first look (nothing of its shards to go, nothing
        written since) is paused idle: its shards must move all the same."""
        seen.append(_written_by(url, paused))
        table, objects = asyncio.run(_table(url))
        to_go[0] = sum(objects["unready"][shard] for shard in table.by_holder().get(paused, ()))
        waited = time.monotonic() - looking_since
        preferred = to_go[0] >= TO_GO or waited > PREFER
        done = to_go[0] == 0 and seen[-1] == seen[0] and waited > PREFER
        return (seen[-1] > seen[-2] and preferred) or done

    try:
        _wait("the runner to pause is at work", busy)
    except AssertionError as exc:
        msg = f"{exc} (keys of its shards to go: {to_go[0]}; its events, as seen: {seen[:3]}..{seen[-3:]})"
        raise AssertionError(msg) from None
    before_pause = set(look().by_holder().get(paused, ()))
    runner.send_signal(signal.SIGSTOP)
    survivor = survivor_id

    def moved_on() -> bool:
        # Expired, and taken by the survivor: an expired lease nobody took yet is still
        # the paused runner's (its writes would rightly pass), and a shard whose row a
        # commit paused mid-way holds locked is skipped until that commit ends.
        held = look().by_holder()
        return paused not in held and bool(set(held.get(survivor, ())) & before_pause)

    _wait("the paused runner's shards move", moved_on)
    return refused_before, to_go[0] >= TO_GO
