"""What a PostgreSQL watch reads when another process commits: one statement per page
(the events and, in the same snapshot, the compaction horizon), the head taken from the
tail that a notification already moved; and a compaction is still never missed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from reconcile import Bookmark, ObjectKey
from reconcile.errors import ExpiredError
from reconcile.store import Put, RawEvent, StoredObject, open_store

KEY = ObjectKey("example.reconcile.dev", "Widget", "default", "w")


def _put(step: int) -> Callable[[StoredObject | None], Put]:
    def mutation(_current: StoredObject | None) -> Put:
        return Put("Changed", {"metadata": {"name": "w", "uid": "u-w"}, "spec": {"step": step}})

    return mutation


def _counted(calls: list[str], name: str, read: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
    async def counting() -> int:
        calls.append(name)
        return await read()

    return counting


async def test_a_watch_woken_by_another_process_reads_one_statement_a_page(postgres_url: str) -> None:
    """Five commits of another process, each awaited by the watch: five page reads and
    no read of the head or the horizon of the watch's own (the notification's read of
    the head is the tail's, shared by every watch of the process)."""
    watcher = await open_store(postgres_url, poll_interval=(60.0, 60.0))
    writer = await open_store(postgres_url)
    try:
        calls: list[str] = []
        watcher.revision = _counted(calls, "revision", watcher.revision)  # type: ignore[method-assign]
        watcher.horizon = _counted(calls, "horizon", watcher.horizon)  # type: ignore[method-assign]
        fetch = watcher._fetch  # type: ignore[attr-defined]

        async def fetching(sql: str, *params: Any) -> list[Any]:
            calls.append("page")
            return list(await fetch(sql, *params))

        watcher._fetch = fetching  # type: ignore[attr-defined]
        stream = aiter(watcher.watch(since=0))
        assert await anext(stream) == Bookmark(0)
        calls.clear()  # the start's reads (the horizon, the head, the empty page) are once
        for step in range(5):
            result = await writer.write(KEY, _put(step), actor="other")
            async with asyncio.timeout(10):
                event = await anext(stream)
                while not isinstance(event, RawEvent):
                    event = await anext(stream)
            assert event.revision == result.revision
        assert calls == ["page"] * 5
        # A commit of another kind wakes the watch too: its page is empty, and says the
        # horizon all the same.
        calls.clear()
        other = ObjectKey("example.reconcile.dev", "Gadget", "default", "g")
        stream = aiter(watcher.watch(since=result.revision, kind="Widget"))
        assert await anext(stream) == Bookmark(result.revision)
        calls.clear()
        gadget = await writer.write(other, _put(9), actor="other")
        async with asyncio.timeout(10):
            assert await anext(stream) == Bookmark(gadget.revision)
        assert calls == ["page"]
    finally:
        await writer.close()
        await watcher.close()


async def test_a_compaction_just_before_the_page_is_caught(postgres_url: str) -> None:
    """The history a watch starts from is compacted after its first look at the horizon
    and before its page: the page's own horizon says so (ExpiredError, not a silent
    skip of revisions 1 and 2)."""
    watcher = await open_store(postgres_url)
    writer = await open_store(postgres_url)
    try:
        for step in range(3):
            await writer.write(KEY, _put(step), actor="other")
        read = watcher.revision

        async def compacted_first() -> int:
            await writer.compact(3)
            return await read()

        watcher.revision = compacted_first  # type: ignore[method-assign]
        stream = aiter(watcher.watch(since=0))
        with pytest.raises(ExpiredError, match="compacted"):
            await asyncio.wait_for(anext(stream), 10)
    finally:
        await writer.close()
        await watcher.close()
