"""The live edge of the log: polling for other processes' commits, not for our own."""

from __future__ import annotations

import asyncio

from helpers import settle

from reconcile.store.watching import Tail


async def test_a_head_read_during_our_own_commit_is_set_aside() -> None:
    """While this process commits, a moved head is the writer's to announce (it has the
    events in memory); once no commit of ours is in flight, a moved head is another
    process's and the poll announces it."""
    database = {"head": 0, "reads": 0}

    async def read_head() -> int:
        database["reads"] += 1
        return database["head"]

    tail = Tail(read_head, fast=0.0001, slow=0.0001)
    waiter = asyncio.create_task(tail.wait_beyond(0))
    with tail.local_commit():
        database["head"] = 5  # our commit landed; the writer has not advanced yet
        reads = database["reads"]
        await settle(lambda: database["reads"] >= reads + 3)
        assert tail.head == 0
        assert not waiter.done()
    # Nobody advanced: from now on the moved head can only be somebody else's.
    await settle(lambda: tail.head == 5)
    assert await asyncio.wait_for(waiter, 5)
    await tail.close()


async def test_the_writer_advances_and_wakes_waiters() -> None:
    """advance() inside a local commit wakes waiters at once, without a poll."""

    async def read_head() -> int:
        return 0

    tail = Tail(read_head, fast=10, slow=10)
    waiter = asyncio.create_task(tail.wait_beyond(3))
    with tail.local_commit():
        tail.advance(4)
    assert await asyncio.wait_for(waiter, 5)
    assert tail.head == 4
    await tail.close()
