"""What one watcher has read from the store and not yet sent: a bounded queue of event
lines between the task that reads the store and the task that writes the socket.

The bound is what keeps a slow watcher from costing memory without end: the reader
puts a line with :meth:`Backlog.put`, which answers False once the backlog holds more
than its events or bytes allow (never for a lone line: an object may be larger than the
byte bound, and one event must always fit); the watch then cuts the watcher off. The
initial events of a watch (the list it starts with) wait for room instead
(:meth:`Backlog.put_waiting`): a large list is sent at the pace of the client, as the
apiserver does, not refused.

Besides lines the backlog holds *marks*: "the store was caught up to revision N here".
Once every line before a mark is taken, N is a revision the watcher has seen all of, the
one its bookmarks may name. Consecutive marks are merged, so marks add at most one entry
per line.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

__all__ = ["Backlog"]


class Backlog:
    """A bounded queue of encoded events (and marks) for one watcher."""

    def __init__(self, *, max_events: int, max_bytes: int) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        #: (line, revision) entries; a mark is (None, revision).
        self._entries: collections.deque[tuple[bytes | None, int]] = collections.deque()
        self._lines = 0
        self._bytes = 0
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        #: Set once no more entries come: the sender sends what is left, then stops.
        self.finished = False

    @property
    def lines(self) -> int:
        """How many event lines wait to be sent."""
        return self._lines

    @property
    def size(self) -> int:
        """How many bytes of event lines wait to be sent."""
        return self._bytes

    def _full(self) -> bool:
        return self._lines > 1 and (self._lines > self.max_events or self._bytes > self.max_bytes)

    def put(self, line: bytes, revision: int) -> bool:
        """Queue an event line; False when the backlog is now over its bound (the line
        is queued all the same: the caller cuts the watcher off and drops it all)."""
        self._entries.append((line, revision))
        self._lines += 1
        self._bytes += len(line)
        self._ready.set()
        if self._full():
            self._room.clear()
            return False
        return True

    async def put_waiting(self, line: bytes, revision: int) -> None:
        """Queue an event line once there is room for it."""
        while self._lines and (self._lines >= self.max_events or self._bytes + len(line) > self.max_bytes):
            self._room.clear()
            await self._room.wait()
        self.put(line, revision)

    def mark(self, revision: int) -> None:
        """The store was caught up to ``revision`` after the lines queued so far."""
        if self._entries and self._entries[-1][0] is None:
            self._entries[-1] = (None, max(revision, self._entries[-1][1]))
        else:
            self._entries.append((None, revision))
        self._ready.set()

    def take(self) -> tuple[list[bytes], int]:
        """Every queued line, in order, and the latest revision among them and their
        marks (0 when none)."""
        lines = [line for line, _ in self._entries if line is not None]
        revision = self._entries[-1][1] if self._entries else 0
        self._entries.clear()
        self._lines = self._bytes = 0
        self._ready.clear()
        self._room.set()
        return lines, revision

    def clear(self) -> None:
        """Drop everything queued (a watcher cut off)."""
        self.take()

    def finish(self) -> None:
        """No more entries come: wake the sender to send what is left and stop."""
        self.finished = True
        self._ready.set()

    @property
    def empty(self) -> bool:
        """Whether nothing is queued."""
        return not self._entries

    async def wait(self, seconds: float | None) -> None:
        """Wait until something is queued (or the backlog finished), at most ``seconds``
        (None: without end)."""
        if self._entries or self.finished:
            return
        if seconds is None:
            await self._ready.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(seconds, 0.0)):
                await self._ready.wait()
