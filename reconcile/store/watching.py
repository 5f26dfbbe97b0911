"""The live edge of the log, shared by every watch of one store.

A watch reads the log from its cursor until caught up, then waits here until the store's
head moves past the cursor. The head moves when this process commits (the writer calls
:meth:`Tail.advance` at once) and when another process commits, which we learn by polling
the head revision: every ``fast`` seconds while changes keep coming (until ``linger``
seconds have passed without one), then backing off to ``slow``, and only while somebody is
waiting. Polling is the price of several processes on
one SQLite file. PostgreSQL's notifications call :meth:`Tail.refresh` at once, and a
slow poll backs them up (a lost notification only delays). Before the head moves on to
other processes' commits, a store may read their events once for all its watches (the
tail's ``fill``: PostgreSQL's does, into the recent window) rather than each watch
reading its own page of them.

A head read while this process's own commit was in flight says nothing about other
processes (the writer is about to advance the head itself, with the events in memory):
it is set aside, so a busy writer neither keeps the poll fast nor sends watches to the
database for events the recent window is about to serve. A backend whose commits learn
their revisions before they commit (PostgreSQL's, ``capped=True``) says so
(:meth:`Tail.reserved`), and a head read during its commit is then cut below them instead
of set aside: under a steady stream of its own commits it still hears of the others'.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["Tail"]


class Tail:
    """Tracks the head revision and wakes waiters when it advances."""

    def __init__(
        self,
        read_head: Callable[[], Awaitable[int]],
        *,
        fast: float = 0.001,
        slow: float = 0.01,
        linger: float = 0.5,
        capped: bool = False,
        fill: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self._read_head = read_head
        self._fill = fill
        self._fast = fast
        self._slow = slow
        self._linger = linger
        self.head = 0
        self._moved = asyncio.Event()
        self._waiters = 0
        #: Watches following this tail now (waiting or not): a ``fill`` is for them.
        self.watches = 0
        self._refresher: asyncio.Task[None] | None = None
        self._refresh_again = False
        self._poller: asyncio.Task[None] | None = None
        self.closed = False
        self._local_started = 0
        self._local_in_flight = 0
        self._capped = capped
        #: The first revision of this process's commit in flight, once it holds them.
        self._floor: int | None = None
        self._local = _LocalCommit(self)

    def local_commit(self) -> contextlib.AbstractContextManager[None]:
        """Wrap this process's own commit (which ends by advancing the head)."""
        return self._local

    def _local_began(self) -> None:
        self._local_started += 1
        self._local_in_flight += 1

    def _local_ended(self) -> None:
        self._local_in_flight -= 1
        self._floor = None

    def reserved(self, first: int) -> None:
        """Our commit in flight holds the revisions from ``first`` on (until it
        ends): a head read meanwhile may go up to ``first - 1`` and no further."""
        self._floor = first

    def _cut(self, head: int) -> int:
        """``head`` as far as a watch may trust it while our commit is in flight: below
        the revisions it holds (before it holds any, a head read cannot include it)."""
        if self._local_in_flight and self._floor is not None:
            return min(head, self._floor - 1)
        return head

    async def refresh(self) -> None:
        """Read the head now (a notification says another commit landed) and advance to
        it, cut below this process's commit in flight (for ``capped`` stores)."""
        try:
            head = self._cut(await self._read_head())
        except Exception:  # noqa: BLE001 - the poll tries again; close() ends it
            return
        await self._filled(head)
        if not self.closed:
            self.advance(head)

    def refresh_soon(self) -> None:
        """:meth:`refresh` in the background, one read at a time: asked again while one
        is in flight (notifications of other commits, our own commits after a gap), one
        more read follows it, however often it was asked."""
        if self.closed:
            return
        if self._refresher is not None and not self._refresher.done():
            self._refresh_again = True
            return
        self._refresher = asyncio.get_running_loop().create_task(
            self._refreshing(), name="reconcile-store-refresh"
        )

    async def _refreshing(self) -> None:
        while True:
            self._refresh_again = False
            await self.refresh()
            if not self._refresh_again or self.closed:
                return

    async def _filled(self, head: int) -> None:
        """Before the head moves to ``head`` past what this process committed: let the
        store read the new events once for every watch waiting here (``fill``), so they
        serve themselves from memory. Revisions allocated after ``head`` was read all lie
        beyond it, so moving to it afterwards stays safe."""
        if self._fill is not None and self.watches and head > self.head and not self.closed:
            await self._fill(head)

    def advance(self, revision: int) -> None:
        """The head is now at least ``revision``; wake everyone behind it."""
        if revision > self.head:
            self.head = revision
            # With nobody waiting the event is kept: a waiter takes it, after looking at
            # the head, with no await in between (a new event per commit adds up).
            if self._waiters:
                moved, self._moved = self._moved, asyncio.Event()
                moved.set()

    def readable(self, head: int) -> int:
        """How far a watch may read of a database whose head is ``head``: while this
        process's own commit is landing (committed in the database, perhaps, its writers
        not told yet), no further than the head this process has announced. A watch that
        read the new events first would deliver them before the writers' results, and a
        cache that puts in its own writes as they land would decode them once more; the
        writer announces them, in memory, a moment later."""
        if self._capped:
            return self._cut(head)
        return min(head, self.head) if self._local_in_flight else head

    async def wait_beyond(self, revision: int) -> bool:
        """Wait until the head passes ``revision``; False when the store closed."""
        while self.head <= revision and not self.closed:
            moved = self._moved
            self._waiters += 1
            if self._poller is None or self._poller.done():
                self._poller = asyncio.get_running_loop().create_task(
                    self._poll(), name="reconcile-store-tail"
                )
            try:
                await moved.wait()
            finally:
                self._waiters -= 1
        return not self.closed

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        interval, last_change = self._fast, loop.time()
        while self._waiters > 0 and not self.closed:
            await asyncio.sleep(interval)
            started = self._local_started
            busy = self._local_in_flight > 0
            try:
                head = await self._read_head()
            except Exception:  # noqa: BLE001 - the next poll retries; close() ends us
                head = self.head
            if self._capped:
                head = self._cut(head)
                ours = False
            else:
                ours = busy or self._local_in_flight > 0 or self._local_started != started
            if head > self.head and not ours:  # (ours: the writer advances the head itself)
                await self._filled(head)
                self.advance(head)
                interval, last_change = self._fast, loop.time()
            elif loop.time() - last_change > self._linger:
                interval = min(interval * 2, self._slow)

    async def close(self) -> None:
        """Wake every waiter with the news that the store closed, and stop polling."""
        self.closed = True
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()
        for task in (self._poller, self._refresher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class _LocalCommit:
    """:meth:`Tail.local_commit`'s context manager: one per tail, entered at every
    commit (a generator's would be made anew each time)."""

    __slots__ = ("_tail",)

    def __init__(self, tail: Tail) -> None:
        self._tail = tail

    def __enter__(self) -> None:
        self._tail._local_began()  # noqa: SLF001 - the tail's own helper

    def __exit__(self, *exc_info: object) -> None:
        self._tail._local_ended()  # noqa: SLF001 - the tail's own helper
