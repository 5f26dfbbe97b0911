"""The garbage collector under sharding: a key is handled by the runner holding its
shard (a dependent whose owners are gone, by its own shard's holder), every write under
that shard's fence, so a stale runner's deletions are refused."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from helpers import DEADLINE, widget

from reconcile import Client, ObjectKey, Runtime, set_controller_reference
from reconcile.controller import COLLECTOR_MANAGER
from reconcile.controller.caching import Cache
from reconcile.controller.collecting import GarbageCollector
from reconcile.model.registry import KindRegistry
from reconcile.store import EventStore, open_store
from reconcile.store.fencing import Fence, shard_of
from reconcile.testing import FakeClock, example_kinds, let_run

CHILDREN = 40
RUNNERS = 2


class SplitGate:
    """A runner's share of keys split by ``shard_of(key, RUNNERS)`` (the KeyGate a
    Runtime's sharding is), with the fence its writes carry."""

    def __init__(self, shard: int, fence: Fence | None = None, behind: int = 0) -> None:
        self.shard = shard
        self.fenced_by = fence
        #: The revision a shard's former holder wrote up to (0: none taken over).
        self.behind = behind

    def owns(self, key: ObjectKey) -> bool:
        """Whether ``key`` is of this runner's half."""
        return shard_of(key, RUNNERS) == self.shard

    def fence(self, key: ObjectKey) -> Fence | None:  # noqa: ARG002 - one fence for all
        """The runner's fence."""
        return self.fenced_by

    def minimum(self, key: ObjectKey) -> int:  # noqa: ARG002 - the same for every key
        """The revision the former holder wrote up to."""
        return self.behind


class EveryKey(SplitGate):
    """Every key, under one fence."""

    def owns(self, key: ObjectKey) -> bool:  # noqa: ARG002 - every key
        """Every key is this runner's."""
        return True


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Let the loop run until ``check()`` holds, failing after a real deadline."""
    async with asyncio.timeout(DEADLINE):
        turn = 0
        while not await check():
            await let_run(turn)
            turn += 1


@contextlib.asynccontextmanager
async def collectors(
    store: EventStore, kinds: KindRegistry, clock: FakeClock, gates: Sequence[SplitGate]
) -> AsyncIterator[list[GarbageCollector]]:
    """A collector per gate over ``store``, each with its own client (``user``: the
    runner's name, ``runner-N``) and cache, running until the block ends."""
    running: list[GarbageCollector] = []
    for n, gate in enumerate(gates):
        client = Client(store, kinds, clock=clock, user=f"runner-{n}")
        collector = GarbageCollector(client, Cache(client, clock=clock), clock=clock)
        collector.gate = gate
        running.append(collector)
    tasks = [asyncio.create_task(c.run()) for c in running]
    try:
        yield running
    finally:
        for collector in running:
            collector.shut_down()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def orphaned_family(client: Client) -> list[ObjectKey]:
    """An owner Widget with CHILDREN dependents, the owner then deleted: the children's
    keys, theirs to collect."""
    owner = await client.apply(widget("owner"))
    children = [set_controller_reference(owner, widget(f"child-{i:03}")) for i in range(CHILDREN)]
    assert all(r.error is None for r in await client.apply_many(children))
    assert await client.delete("widget", "owner", propagation_policy="background") is None
    return [
        ObjectKey(owner.key.api_group, owner.key.kind, owner.key.namespace, f"child-{i:03}")
        for i in range(CHILDREN)
    ]


async def names(client: Client) -> set[str]:
    """The names of the Widgets stored."""
    return {o.metadata.name for o in (await client.list("widget")).items}


class TestSplit:
    """Two gated collectors over one store."""

    async def test_each_dependent_is_collected_once_by_its_shards_runner(
        self, store: EventStore, kinds: KindRegistry, clock: FakeClock
    ) -> None:
        """Every child is deleted exactly once, its GarbageCollected event and its
        deletion written by the runner whose gate admits the child's key; both runners
        did part of the work."""
        admin = Client(store, kinds, clock=clock)
        keys = await orphaned_family(admin)
        async with collectors(store, kinds, clock, [SplitGate(0), SplitGate(1)]):

            async def collected() -> bool:
                return not await names(admin)

            await until(collected)
        runners = set()
        for key in keys:
            history = await admin.history("widget", key.name)
            mine = [(e.type, e.user) for e in history if e.actor == COLLECTOR_MANAGER]
            runner = f"runner-{shard_of(key, RUNNERS)}"
            assert mine == [("GarbageCollected", runner), ("Deleted", runner)], key
            runners.add(runner)
        assert runners == {"runner-0", "runner-1"}, "both runners did part of the work"

    async def test_the_keys_of_a_shard_gained_are_looked_at_again(
        self, store: EventStore, kinds: KindRegistry, clock: FakeClock
    ) -> None:
        """Keys dropped while another runner held their shard are collected once the
        shard is gained and the collector revisits it (the Runtime does, at each gain)."""
        admin = Client(store, kinds, clock=clock)
        keys = await orphaned_family(admin)
        gate = SplitGate(RUNNERS)  # no shard of the two: every key another runner's
        async with collectors(store, kinds, clock, [gate]) as (collector,):
            await collector.wait_idle()
            assert await names(admin) == {k.name for k in keys}, "dropped, not collected"
            gate.shard = 0
            collector.revisit(lambda key: shard_of(key, RUNNERS) == 0)

            async def half_collected() -> bool:
                return await names(admin) == {k.name for k in keys if shard_of(k, RUNNERS) == 1}

            await until(half_collected)

    async def test_a_shard_taken_over_waits_for_its_former_holders_writes(
        self, store: EventStore, kinds: KindRegistry, clock: FakeClock
    ) -> None:
        """A key whose shard's former holder wrote past what the collector's cache of
        its kind holds is put off, not acted on; once the cache caught up, it is."""
        admin = Client(store, kinds, clock=clock)
        keys = await orphaned_family(admin)
        head = (await admin.list("widget")).resource_version
        gate = EveryKey(0, behind=head + 1)
        async with collectors(store, kinds, clock, [gate]) as (collector,):

            async def put_off() -> bool:
                return collector.queue.statistics().waiting == CHILDREN

            await until(put_off)
            assert await names(admin) == {k.name for k in keys}
            await admin.apply(widget("later"))  # the former holder's write, say
            (informer,) = (i for i in collector.informers if i.kind.kind == "Widget")

            async def caught_up() -> bool:
                return informer.revision > head

            await until(caught_up)
            clock.advance(1.0)

            async def collected() -> bool:
                return await names(admin) == {"later"}

            await until(collected)


class TestFenced:
    """A stale collector's writes are refused in their transaction (PostgreSQL leases)."""

    async def test_a_stale_collector_deletes_nothing(self, postgres_url: str, clock: FakeClock) -> None:
        """A collector whose fence names an epoch the lease moved past takes every key
        but writes nothing (each refusal recorded); the one holding the lease collects
        them all."""
        kinds = example_kinds()
        store = await open_store(postgres_url)
        try:
            admin = Client(store, kinds, clock=clock)
            keys = await orphaned_family(admin)
            leases = await store.lease_shards("live", about="test", duration=300, shards=1)
            assert leases is not None
            epoch = leases.held[0]
            stale = EveryKey(0, Fence(0, epoch - 1, "live"))
            async with collectors(store, kinds, clock, [stale]):

                async def refused() -> bool:
                    table = await store.shard_table()
                    return table is not None and table.refused >= 1

                await until(refused)
            assert await names(admin) == {k.name for k in keys}
            for key in keys:
                history = await admin.history("widget", key.name)
                assert all(e.actor != COLLECTOR_MANAGER for e in history), key
            live = EveryKey(0, Fence(0, epoch, "live"))
            async with collectors(store, kinds, clock, [live]):

                async def collected() -> bool:
                    return not await names(admin)

                await until(collected)
        finally:
            await store.close()


class TestRuntimes:
    """The Runtime gates its collector with its sharding."""

    async def test_two_sharded_runtimes_collect_each_dependent_once(self, postgres_url: str) -> None:
        """Two sharded Runtimes on one database: every child of a deleted owner is
        deleted once, by the runner holding its shard."""
        options = {"sharding": True, "lease_duration": 5.0, "renew_interval": 0.2, "shards": 4}
        first = Runtime(postgres_url, providers=[], kinds=example_kinds(), **options)
        second = Runtime(postgres_url, providers=[], kinds=example_kinds(), **options)
        async with first, second:

            async def split() -> bool:
                return [len(rt.health().sharding.held) for rt in (first, second)] == [2, 2]  # type: ignore[union-attr]

            await until_real(split)
            keys = await orphaned_family(first.client)

            async def collected() -> bool:
                return not await names(first.client)

            await until_real(collected)
            holders = {
                shard: rt.health().sharding.runner  # type: ignore[union-attr]
                for rt in (first, second)
                for shard in rt.health().sharding.held  # type: ignore[union-attr]
            }
            for key in keys:
                history = await first.client.history("widget", key.name)
                mine = [(e.type, e.user) for e in history if e.actor == COLLECTOR_MANAGER]
                runner = holders[shard_of(key, 4)]
                assert mine == [("GarbageCollected", runner), ("Deleted", runner)], key


async def until_real(check: Callable[[], Awaitable[bool]], deadline: float = 30.0) -> None:
    """Wait until ``check()`` holds: the leases move on the database's clock."""
    async with asyncio.timeout(deadline):
        while not await check():  # noqa: ASYNC110 - the leases move on the database's clock
            await asyncio.sleep(0.02)
