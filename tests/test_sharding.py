"""Shard leases and fencing on PostgreSQL, in one process: several stores open on one
database stand for several runners (the processes themselves: test_sharding_processes)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from helpers import running, settle, widget
from test_controller import Instant

from reconcile import Client, LockedError, ObjectKey, Runtime
from reconcile.cli import main
from reconcile.controller import Controller
from reconcile.errors import FencedError
from reconcile.runtime.sharding import Sharding, enqueue_shards
from reconcile.store import EventStore, Put, open_store
from reconcile.store.fencing import Fence, Leases, fenced, shard_of
from reconcile.testing import WIDGET, FakeClock, MemoryCloud, MemoryProvider

KEY = ObjectKey("test.reconcile.dev", "Thing", "default", "a")


def _put(name: str) -> Put:
    return Put("Applied", {"metadata": {"name": name, "uid": "u-" + name}})


async def _expire(url: str, holder: str) -> None:
    """Make ``holder``'s leases and membership expired now (what a pause past the lease
    duration does), without waiting for them."""
    base, _, query = url.partition("?")
    schema = query.removeprefix("search_path=")
    conn = await asyncpg.connect(base, server_settings={"search_path": schema})
    try:
        await conn.execute("UPDATE reconcile_shards SET expires = '-infinity' WHERE holder = $1", holder)
        await conn.execute("UPDATE reconcile_runners SET expires = '-infinity' WHERE holder = $1", holder)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[EventStore]:
    """A store opened on ``url``, closed on the way out."""
    store = await open_store(url)
    try:
        yield store
    finally:
        await store.close()


async def _renew(store: EventStore, name: str, last: dict[str, Leases]) -> set[int]:
    """A renewal as a Runtime makes it: what the last one held beyond the fair share is
    released now; the shards held after it."""
    before = last.get(name)
    surplus = [] if before is None else sorted(before.held)[before.fair :]
    leases = await store.lease_shards(name, about=name, duration=30, release=surplus)
    assert leases is not None
    last[name] = leases
    return set(leases.held)


class TestLeases:
    """Who holds which shard."""

    async def test_runners_split_the_shards_fairly_and_a_joiner_takes_a_share(
        self, postgres_url: str
    ) -> None:
        """Two runners hold ceil(64/2) each; a third joins and, after everyone renews
        (the others release their surplus first), each holds at most ceil(64/3), all 64
        held, none twice."""
        stores = [await open_store(postgres_url) for _ in range(3)]
        try:
            a, b, c = stores
            first = await a.lease_shards("a", about="A", duration=30)
            assert first is not None
            assert first.shards == 64
            assert len(first.held) == 64  # alone: everything
            last = {"a": first}
            held = {}
            for _ in range(3):
                for store, name in ((b, "b"), (a, "a")):
                    held[name] = await _renew(store, name, last)
            assert len(held["a"]) == len(held["b"]) == 32
            assert not held["a"] & held["b"]
            for _ in range(4):
                for store, name in ((a, "a"), (b, "b"), (c, "c")):
                    held[name] = await _renew(store, name, last)
            fair = math.ceil(64 / 3)
            assert all(len(h) <= fair for h in held.values())
            assert held["c"]
            assert set().union(*held.values()) == set(range(64))
            assert sum(len(h) for h in held.values()) == 64
            table = await a.shard_table()
            assert table is not None
            assert {k: set(v) for k, v in table.by_holder().items()} == held
            assert set(table.runners) == {"a", "b", "c"}
        finally:
            for store in stores:
                await store.close()

    async def test_expired_leases_move_with_a_new_epoch(self, postgres_url: str) -> None:
        """A runner that stopped renewing loses its shards to the one that renews, each
        under a higher epoch."""
        async with opened(postgres_url) as a, opened(postgres_url) as b:
            await a.lease_shards("a", about="A", duration=30)
            await b.lease_shards("b", about="B", duration=30)
            before = await a.lease_shards("a", about="A", duration=30)
            assert before is not None
            await _expire(postgres_url, "a")
            after = await b.lease_shards("b", about="B", duration=30)
            assert after is not None
            assert set(after.held) == set(range(64))
            for shard, epoch in before.held.items():
                assert after.held[shard] == epoch + 1

    async def test_the_shard_count_is_fixed_when_the_table_is_made(self, postgres_url: str) -> None:
        """The first runner's count sticks; a later one asking another gets the store's."""
        async with opened(postgres_url) as store:
            first = await store.lease_shards("a", about="A", duration=30, shards=8)
            later = await store.lease_shards("b", about="B", duration=30, shards=128)
            assert first is not None
            assert later is not None
            assert first.shards == later.shards == 8

    async def test_sqlite_does_not_shard(self, tmp_path: Path) -> None:
        """On SQLite the lease methods say "not sharing": None, and fences are ignored."""
        async with opened(f"sqlite:///{tmp_path}/s.db") as store:
            assert await store.lease_shards("a", about="A", duration=5) is None
            assert await store.shard_table() is None
            with fenced(Fence(0, 99, "nobody")):
                assert (await store.write(KEY, lambda _: _put("a"), actor="t")).written


class TestFencing:
    """Writes under a lease that moved on."""

    async def test_a_write_under_a_moved_lease_is_refused_and_recorded(self, postgres_url: str) -> None:
        """Runner a's write under its old epoch, after b took the shard, is refused with
        FencedError, stores nothing, and is counted in the lease table."""
        async with opened(postgres_url) as a, opened(postgres_url) as b:
            leases = await a.lease_shards("a", about="A", duration=30)
            assert leases is not None
            shard = shard_of(KEY, leases.shards)
            fence = Fence(shard, leases.held[shard], "a")
            with fenced(fence):
                assert (await a.write(KEY, lambda _: _put("a"), actor="engine")).written
            await _expire(postgres_url, "a")
            taken = await b.lease_shards("b", about="B", duration=30)
            assert taken is not None
            assert shard in taken.held
            with fenced(fence), pytest.raises(FencedError, match=f"shard {shard}"):
                await a.write(KEY, lambda _: _put("again"), actor="engine")
            events = await b.events(KEY)
            assert len(events) == 1  # nothing of the refused write
            table = await b.shard_table()
            assert table is not None
            assert table.refused == 1
            # b writes under its own fence; an unfenced write (a user's apply) is never refused.
            with fenced(Fence(shard, taken.held[shard], "b")):
                assert (await b.write(KEY, lambda _: _put("b"), actor="engine")).written
            assert (await a.write(KEY, lambda _: _put("user"), actor="cli")).written

    async def test_a_batch_refuses_only_the_fenced_writes(self, postgres_url: str) -> None:
        """In one group commit, the writes under a moved lease fail alone."""
        async with opened(postgres_url) as a, opened(postgres_url) as b:
            leases = await a.lease_shards("a", about="A", duration=30, shards=4)
            assert leases is not None
            keys = [ObjectKey("g", "K", "default", f"k{i}") for i in range(40)]
            fences = {k: Fence(shard_of(k, 4), leases.held[shard_of(k, 4)], "a") for k in keys}
            await _expire(postgres_url, "a")
            await b.lease_shards("b", about="B", duration=30)
            lost = set(range(4))
            futures = []
            for key in keys:
                with fenced(fences[key] if key.name != "k0" else None):
                    futures += a.submit_many([(key, lambda _, n=key.name: _put(n))], actor="engine")
            results = await asyncio.gather(*futures, return_exceptions=True)
            assert not isinstance(results[0], BaseException)
            assert all(isinstance(r, FencedError) and r.shard in lost for r in results[1:])

    async def test_one_shard_under_two_epochs_in_one_batch(self, postgres_url: str) -> None:
        """Writes of one shard in one group commit, some under its current epoch, some
        under another: only the others are refused (the fences are checked one by one
        in the statement that reserves the commit's revisions)."""
        async with opened(postgres_url) as a:
            leases = await a.lease_shards("a", about="A", duration=30, shards=4)
            assert leases is not None
            keys = [ObjectKey("g", "K", "default", f"k{i}") for i in range(40)]
            shard = shard_of(keys[0], 4)
            mine = [k for k in keys if shard_of(k, 4) == shard]
            epoch = leases.held[shard]
            futures = []
            for n, key in enumerate(mine):
                with fenced(Fence(shard, epoch if n % 2 == 0 else epoch + 1, "a")):
                    futures += a.submit_many([(key, lambda _, n=key.name: _put(n))], actor="engine")
            results = await asyncio.gather(*futures, return_exceptions=True)
            assert len(mine) >= 4
            assert all(not isinstance(r, BaseException) for r in results[::2])
            assert all(isinstance(r, FencedError) and r.epoch == epoch + 1 for r in results[1::2])


async def _until(what: str, check: Callable[[], bool], deadline: float = 30.0) -> None:
    """Wait until ``check()`` holds (polled: leases move on the database's clock)."""
    async with asyncio.timeout(deadline):
        while not check():  # noqa: ASYNC110 - the renewals' outcome, on the database's clock
            await asyncio.sleep(0.02)
    assert check(), what


class TestRuntimes:
    """Runtimes with ``sharding=True``."""

    async def test_two_runtimes_split_the_keys_and_each_object_is_made_once(self, postgres_url: str) -> None:
        """Two sharded Runtimes on one database hold 32 shards each (health() says so),
        converge 200 buckets together, each created once, the writes of each key's
        reconciles by the runner holding its shard."""
        cloud = MemoryCloud()
        options = {"sharding": True, "lease_duration": 2.0, "renew_interval": 0.2}
        first = Runtime(postgres_url, providers=[MemoryProvider(cloud)], **options)
        second = Runtime(postgres_url, providers=[MemoryProvider(cloud)], **options)
        async with first, second:
            await _until(
                "32 shards each",
                lambda: [len(rt.health().sharding.held) for rt in (first, second)] == [32, 32],  # type: ignore[union-attr]
            )
            health = first.health()
            assert health.sharding is not None
            assert health.as_dict()["sharding"]["shards"] == 64
            await first.apply_many(
                [
                    {
                        "apiVersion": "memory.reconcile.dev/v1",
                        "kind": "Bucket",
                        "metadata": {"name": f"b{i}"},
                        "spec": {"name": f"b{i}", "value": str(i)},
                    }
                    for i in range(200)
                ]
            )
            for rt in (first, second):
                state = await rt.wait_converged(timeout=30)
                assert state.converged
            runners = {rt.health().sharding.runner: rt for rt in (first, second)}  # type: ignore[union-attr]
            users: set[str] = set()
            for i in range(200):
                key = ObjectKey("memory.reconcile.dev", "Bucket", "default", f"b{i}")
                events = await first.client.store.events(key)
                assert [e.type for e in events].count("CreateSucceeded") == 1
                writers = {e.user for e in events if e.type == "CreateSucceeded"}
                users |= writers
                (writer,) = writers
                assert writer in runners
            assert users == set(runners), "both runners did part of the work"
        assert len(cloud.items) == 200

    async def test_on_sqlite_sharding_is_off_and_the_runner_lock_holds(self, tmp_path: Path) -> None:
        """sharding=True on SQLite: health() shows no shards; a second runner is refused."""
        url = f"sqlite:///{tmp_path}/one.db"
        async with Runtime(url, providers=[MemoryProvider()], sharding=True) as rt:
            assert rt.health().sharding is None
            assert rt.sharding is None
            with pytest.raises(LockedError):
                await Runtime(url, providers=[MemoryProvider()], sharding=True).start()


class TestStatusCommand:
    """``reconcile status``."""

    def test_status_shows_each_runners_shards(
        self, postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """After two runners renewed, status lists both with their shards, and the JSON
        form has every lease."""

        async def lease() -> None:
            async with opened(postgres_url) as store:
                first = await store.lease_shards("a", about="pid 1 on x", duration=60, shards=8)
                assert first is not None
                await store.lease_shards("b", about="pid 2 on y", duration=60)
                await store.lease_shards("a", about="pid 1 on x", duration=60, release=[4, 5, 6, 7])
                await store.lease_shards("b", about="pid 2 on y", duration=60)

        asyncio.run(lease())
        assert main(["--db", postgres_url, "status"]) == 0
        out = capsys.readouterr().out
        assert "8 shards, 2 live runner(s)" in out
        assert "a (pid 1 on x): 4 shards 0-3" in out
        assert "b (pid 2 on y): 4 shards 4-7" in out
        assert main(["--db", postgres_url, "status", "-o", "json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert [r["shards"] for r in document["runners"]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert len(document["leases"]) == 8

    def test_status_on_sqlite_says_one_runner(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A store nobody shards says so."""
        db = tmp_path / "s.db"
        asyncio.run(_create(db))
        assert main(["--db", str(db), "status"]) == 0
        assert "no shard leases" in capsys.readouterr().out


async def _create(db: Path) -> None:
    async with opened(f"sqlite:///{db}"):
        pass


class _Leasing:
    """A store's lease answers, scripted: a fake for :class:`Sharding` alone."""

    url = "fake://"

    def __init__(self, *answers: Leases) -> None:
        self.answers = list(answers)
        self.released: list[frozenset[int]] = []
        #: How long each renewal takes (fake seconds; none: at once), on ``clock``.
        self.takes: list[float] = []
        self.clock: FakeClock | None = None

    async def lease_shards(self, holder: str, **options: Any) -> Leases:
        del holder
        self.released.append(frozenset(options.get("release", ())))
        takes = self.takes.pop(0) if self.takes else 0.0
        if takes and self.clock is not None:
            await self.clock.sleep(takes)
        return self.answers.pop(0)


class TestSharding:
    """The runner's side of the leases, on a fake clock."""

    async def test_no_key_is_taken_past_the_lease_without_a_renewal(self) -> None:
        """Held shards' keys are owned until a lease duration passes since the last
        renewal began (a pause); the next renewal decides again."""
        clock = FakeClock()
        store = _Leasing(Leases(4, {0: 1, 1: 1, 2: 1, 3: 1}, 1, 4), Leases(4, {}, 2, 2))
        sharding = Sharding(store, clock=clock, lease_duration=2.0, renew_interval=0.5)  # type: ignore[arg-type]
        assert await sharding.start()
        assert sharding.owns(KEY)
        assert sharding.fence(KEY) == Fence(shard_of(KEY, 4), 1, sharding.runner)
        clock.advance(2.5)
        assert not sharding.owns(KEY)
        await sharding.renew_once()
        assert not sharding.owns(KEY)
        assert sharding.fence(KEY) == Fence(shard_of(KEY, 4), -1, sharding.runner)

    async def test_surplus_is_drained_then_released_at_the_next_renewal(self) -> None:
        """Beyond the fair share: the highest shards stop being taken at once and are
        given up at the next renewal; the shards gained and not drained are announced."""
        clock = FakeClock()
        store = _Leasing(Leases(4, {0: 1, 1: 1, 2: 1, 3: 1}, 2, 2), Leases(4, {0: 1, 1: 1}, 2, 2))
        sharding = Sharding(store, clock=clock, lease_duration=2.0, renew_interval=0.5)  # type: ignore[arg-type]
        gained: list[set[int]] = []
        sharding.on_gained(gained.append)
        assert await sharding.start()
        assert sharding.draining == {2, 3}
        await sharding.renew_once()
        assert store.released == [frozenset(), frozenset({2, 3})]
        assert set(sharding.held) == {0, 1}
        assert not sharding.draining
        assert gained == [{0, 1}]

    async def test_a_renewal_finishing_past_the_lease_announces_its_shards_again(self) -> None:
        """A renewal that begins within the lease but ends past it: in between, no key is
        owned (the keys taken are dropped), so every shard still held, same epoch, is
        announced again once it ends."""
        clock = FakeClock()
        store = _Leasing(Leases(4, {0: 1, 1: 1}, 1, 4), Leases(4, {0: 1, 1: 1}, 1, 4))
        store.takes = [0.0, 0.4]
        store.clock = clock
        sharding = Sharding(store, clock=clock, lease_duration=2.0, renew_interval=0.5)  # type: ignore[arg-type]
        gained: list[set[int]] = []
        sharding.on_gained(gained.append)
        assert await sharding.start()
        key = next(k for k in _keys() if shard_of(k, 4) == 0)
        clock.advance(1.9)
        renewal = asyncio.ensure_future(sharding.renew_once())
        await asyncio.sleep(0)
        clock.advance(0.2)  # past the lease since the last renewal began, still renewing
        assert not sharding.owns(key)
        clock.advance(0.2)
        await renewal
        assert sharding.owns(key)
        assert gained == [{0, 1}, {0, 1}]

    async def test_a_shard_that_stops_draining_is_announced_again(self) -> None:
        """A held shard drained (its keys dropped), then no longer beyond the fair share
        at the same epoch (a runner left): its keys are announced again."""
        clock = FakeClock()
        store = _Leasing(Leases(4, {0: 1, 1: 1, 2: 1, 3: 1}, 2, 2), Leases(4, {0: 1, 1: 1, 2: 1, 3: 1}, 1, 4))
        sharding = Sharding(store, clock=clock, lease_duration=2.0, renew_interval=0.5)  # type: ignore[arg-type]
        gained: list[set[int]] = []
        sharding.on_gained(gained.append)
        assert await sharding.start()
        key = next(k for k in _keys() if shard_of(k, 4) == 3)
        assert not sharding.owns(key)
        await sharding.renew_once()
        assert sharding.owns(key)
        assert gained == [{0, 1}, {2, 3}]


def _keys() -> list[ObjectKey]:
    return [ObjectKey("g", "K", "default", f"k{i}") for i in range(64)]


class TestGatedController:
    """A controller gated by a :class:`Sharding`: the keys dropped come back."""

    async def test_every_key_of_a_shard_that_stops_draining_is_reconciled(
        self, client: Client, clock: FakeClock
    ) -> None:
        """The keys of a draining shard are dropped when taken; once the shard is no
        longer drained (same epoch), each of them is reconciled, with no resync to help."""
        store = _Leasing(Leases(4, {0: 1, 1: 1, 2: 1, 3: 1}, 2, 2), Leases(4, {0: 1, 1: 1, 2: 1, 3: 1}, 1, 4))
        sharding = Sharding(store, clock=clock, lease_duration=2.0, renew_interval=0.5)  # type: ignore[arg-type]
        await client.apply_many([widget(f"w{i}") for i in range(40)])
        reconciler = Instant()
        controller = Controller(client, WIDGET, reconciler, clock=clock, resync_period=None)
        controller.gate = sharding
        sharding.on_gained(lambda shards: enqueue_shards([controller], sharding, shards))
        assert await sharding.start()
        keys = {ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}") for i in range(40)}
        drained = {k for k in keys if shard_of(k, 4) in {2, 3}}
        assert drained
        async with running(controller):
            await settle(lambda: set(reconciler.calls) == keys - drained)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
            assert set(reconciler.calls) == keys - drained
            await sharding.renew_once()
            await settle(lambda: set(reconciler.calls) == keys)


class _Moving:
    """A gate that owns every key until told otherwise, whose keys wait for a revision
    the cache has not reached (a shard just taken over from another runner)."""

    def __init__(self, behind: int) -> None:
        self.behind = behind
        self.owning = True
        self.asked = asyncio.Event()

    def owns(self, key: ObjectKey) -> bool:  # noqa: ARG002 - every key alike
        return self.owning

    def fence(self, key: ObjectKey) -> Fence | None:  # noqa: ARG002 - none
        return None

    def minimum(self, key: ObjectKey) -> int:  # noqa: ARG002 - every key alike
        self.asked.set()
        return self.behind


async def test_a_shard_lost_while_catching_up_is_not_reconciled(client: Client, clock: FakeClock) -> None:
    """A key waits for its shard's former holder's last writes; the shard moves on
    during that wait: the key is dropped, not reconciled (its provider calls would
    happen before the fence refused its writes)."""
    await client.apply(widget("w0"))
    head = await client.revision()
    reconciler = Instant()
    controller = Controller(client, WIDGET, reconciler, clock=clock, resync_period=None)
    gate = _Moving(head + 1)
    controller.gate = gate
    skipped: list[ObjectKey] = []
    controller.add_listener(lambda key, outcome: skipped.append(key) if outcome == "skipped" else None)
    async with running(controller):
        await asyncio.wait_for(gate.asked.wait(), 10)
        gate.owning = False
        await client.apply(widget("other"))  # the cache reaches the former holder's revision
        await settle(lambda: ObjectKey("example.reconcile.dev", "Widget", "default", "w0") in skipped)
        assert ObjectKey("example.reconcile.dev", "Widget", "default", "w0") not in reconciler.calls
