"""The watch loop both backends share: events after a cursor, in order, then live.

A watch serves what it can from memory (this process's own latest commits, contiguous:
:class:`~reconcile.store.recent.RecentEvents`), reads the rest from the database a page
at a time up to the head the :class:`~reconcile.store.watching.Tail` lets it read, says
a bookmark whenever caught up, and waits on the tail until the head moves past its
cursor. A backend gives only how a page of rows is read and how a row becomes an event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from reconcile.errors import ExpiredError
from reconcile.model.events import Bookmark
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import RawEvent
from reconcile.store.recent import RecentEvents
from reconcile.store.watching import Tail

__all__ = ["WATCH_PAGE", "follow", "matcher"]

WATCH_PAGE = 1000

#: Read the rows of revisions in (cursor, head], oldest first, at most ``limit`` of them;
#: a row's first column is its revision.
Fetch = Callable[[int, int, int], Awaitable[Sequence[Any]]]


def matcher(api_group: str | None, kind: str | None, namespace: str | None) -> Callable[[ObjectKey], bool]:
    """Whether a key is one a watch with these filters wants (None: any)."""

    def matches(key: ObjectKey) -> bool:
        return (
            (api_group is None or key.api_group == api_group)
            and (kind is None or key.kind == kind)
            and (namespace is None or key.namespace == namespace)
        )

    return matches


async def follow(
    *,
    since: int,
    matches: Callable[[ObjectKey], bool],
    tail: Tail,
    recent: RecentEvents,
    revision: Callable[[], Awaitable[int]],
    horizon: Callable[[], Awaitable[int]],
    fetch: Fetch,
    event: Callable[[Any], RawEvent],
) -> AsyncIterator[RawEvent | Bookmark]:
    """Events with revision > ``since`` in order, then live; a bookmark whenever caught
    up. Ends when the tail closes; ExpiredError when ``since`` has been compacted."""

    async def check_horizon(since: int) -> None:
        first = await horizon()
        if since < first - 1:
            raise ExpiredError(
                f"revision {since} has been compacted (history starts at {first}); relist",
                horizon=first,
            )

    tail.watches += 1
    try:
        cursor = since
        await check_horizon(cursor)
        while True:
            served, last = recent.after(cursor, matches=matches), recent.last
            if served is not None:
                # Served from memory: the latest commits, this process's own and those it
                # read once for all its watches (a fill), contiguous. The
                # window's end is taken with them: while we yield, the consumer may await
                # and more commits extend the window; those come next, never skipped.
                for one in served:
                    yield one
                cursor = max(cursor, last)
                if tail.head <= cursor:
                    yield Bookmark(cursor)
                    if not await tail.wait_beyond(cursor):
                        return
                    continue
                if recent.last > cursor:
                    continue  # the window grew while we yielded: serve on from it
            head = tail.readable(await revision())
            rows = await fetch(cursor, head, WATCH_PAGE)
            # A compaction racing with the read could have removed part of the range:
            # checking after the read catches it, so a watch never silently skips.
            await check_horizon(cursor)
            for row in rows:
                yield event(row)
            if len(rows) == WATCH_PAGE:
                cursor = rows[-1][0]
                continue
            cursor = max(cursor, head)
            yield Bookmark(cursor)
            tail.advance(head)
            if not await tail.wait_beyond(cursor):
                return
    finally:
        tail.watches -= 1
