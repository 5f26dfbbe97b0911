"""The recent tail of the log, kept in memory by the process that wrote it.

A watch that is nearly caught up (every controller's informer, most of the time) would
otherwise read each new event back from the database: a query on the reader thread and
a JSON parse per event, for bodies this process had in memory a moment before. The
writer appends each committed batch here, and watches serve themselves from it when it
covers their cursor.

The window is always *contiguous*: when a batch does not follow the last one (another
process committed in between), the window restarts at that batch, so a watch served from
it can never skip a revision. What is not in the window is read from the database as
before. The same rule lets the writer leave the window alone while no watch is open
(:attr:`RecentEvents.watches`; a store used without watches, a lone writer's): the first
batch written once one is open restarts it, and the watch reads what came before from
the database, as it would have.

Events are kept as the committed JSON text, not as parsed bodies: strings (and tuples of
them) are invisible to the cyclic garbage collector, so a window of thousands of events
costs it nothing; each watch parses what it takes, as it would from the database, minus
the query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import RawEvent

__all__ = ["EventRow", "RecentEvents"]


class EventRow(NamedTuple):
    """A committed event as the writer hands it over: named fields in one order. A
    NamedTuple rather than an attrs class on purpose: a tuple of strings and numbers is
    untracked by the cyclic garbage collector, so a window of thousands costs it nothing."""

    revision: int
    time: float
    type: str
    key: ObjectKey
    uid: str
    actor: str
    #: The snapshot's JSON text (None for a note).
    body: str | None
    #: The event data's JSON text, if any.
    data: str | None
    #: Who asked for the write, when the writer said.
    user: str | None = None


class RecentEvents:
    """A contiguous window of the latest events this process committed."""

    def __init__(self, capacity: int = 4096, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.capacity = capacity
        #: Bodies may be large (up to 1.5 MiB each): the window also keeps under this many
        #: bytes of text, dropping its oldest events first.
        self.max_bytes = max_bytes
        self._events: list[EventRow] = []
        self._bytes = 0
        #: How many watches are open (counted by the watch loop): while none is, the
        #: writer need not make the rows of the window.
        self.watches = 0

    @property
    def first(self) -> int:
        """The oldest revision in the window (0 when empty)."""
        return self._events[0].revision if self._events else 0

    @property
    def last(self) -> int:
        """The newest revision in the window (0 when empty)."""
        return self._events[-1].revision if self._events else 0

    def extend(self, events: Sequence[EventRow]) -> None:
        """Append a committed batch (in revision order)."""
        if not events:
            return
        if self._events and events[0].revision != self._events[-1].revision + 1:
            self.clear()  # somebody else committed in between: restart the window
        self._events.extend(events)
        self._bytes += sum(_size(event) for event in events)
        if len(self._events) > 2 * self.capacity or self._bytes > self.max_bytes:
            # Drop the oldest down to the capacity and half the byte budget, so trimming
            # happens once in many batches.
            start = max(0, len(self._events) - self.capacity)
            kept = sum(_size(event) for event in self._events[start:])
            while kept > self.max_bytes // 2 and start < len(self._events) - 1:
                kept -= _size(self._events[start])
                start += 1
            del self._events[:start]
            self._bytes = kept

    def after(
        self, cursor: int, *, matches: Callable[[ObjectKey], bool] | None = None
    ) -> list[RawEvent] | None:
        """Every event after ``cursor`` up to :attr:`last` whose key ``matches``, or None
        when the window does not start at or before ``cursor + 1`` (or ends before it):
        read the database. Bodies stay text until a watcher reads them."""
        events = self._events
        if not events:
            return None
        first = events[0].revision
        if not first <= cursor + 1 <= events[-1].revision + 1:
            return None
        return [
            RawEvent(revision, at, type_, key, uid, actor, text=text, data_text=data, user=user)
            for revision, at, type_, key, uid, actor, text, data, user in events[cursor + 1 - first :]
            if matches is None or matches(key)
        ]

    def clear(self) -> None:
        """Forget everything (after a compaction or a failure)."""
        self._events.clear()
        self._bytes = 0


def _size(event: EventRow) -> int:
    body, data = event.body, event.data
    return (len(body) if body else 0) + (len(data) if data else 0)
