"""The recent tail of the log, kept in memory by the process that wrote it.

A watch that is nearly caught up (every controller's informer, most of the time) would
otherwise read each new event back from the database: a query on the reader thread and
a JSON parse per event, for bodies this process had in memory a moment before. The
writer appends each committed batch here, and watches serve themselves from it when it
covers their cursor.

The window is always *contiguous*: when a batch does not follow the last one (another
process committed in between), the window restarts at that batch, so a watch served from
it can never skip a revision. What is not in the window is read from the database as
before.

Events are kept as the committed JSON text, not as parsed bodies, each in a plain tuple
of strings and numbers, the key's four parts among them: the cyclic garbage collector
stops tracking such a tuple at its first pass, so a window of thousands of events costs
it nothing. (A named tuple, the writers' :class:`EventRow` or an ObjectKey, stays
tracked for good: kept, one per write, they were promoted to the oldest generation by
the thousand and brought on its full passes, 37 ms each in a process of 190,000
objects.) Each watch parses what it takes, as it would from the database, minus the
query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import RawEvent

__all__ = ["EventRow", "RecentEvents"]


class EventRow(NamedTuple):
    """A committed event as the writer hands it over: named fields in one order (the
    window keeps its fields in a plain tuple: see the module's story)."""

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


#: An event as the window keeps it: an :class:`EventRow`'s fields, the key's four parts
#: (group, kind, namespace, name) in its place, in a plain tuple.
_Kept = tuple[int, float, str, str, str, str, str, str, str, str | None, str | None, str | None]


class RecentEvents:
    """A contiguous window of the latest events this process committed."""

    def __init__(self, capacity: int = 4096, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.capacity = capacity
        #: Bodies may be large (up to 1.5 MiB each): the window also keeps under this many
        #: bytes of text, dropping its oldest events first.
        self.max_bytes = max_bytes
        self._events: list[_Kept] = []
        self._bytes = 0

    @property
    def first(self) -> int:
        """The oldest revision in the window (0 when empty)."""
        return self._events[0][0] if self._events else 0

    @property
    def last(self) -> int:
        """The newest revision in the window (0 when empty)."""
        return self._events[-1][0] if self._events else 0

    def extend(self, events: Sequence[EventRow]) -> None:
        """Append a committed batch (in revision order)."""
        if not events:
            return
        if self._events and events[0].revision != self._events[-1][0] + 1:
            self.clear()  # somebody else committed in between: restart the window
        rows: list[_Kept] = [
            (revision, at, type_, *key, uid, actor, body, data, user)
            for revision, at, type_, key, uid, actor, body, data, user in events
        ]
        self._events.extend(rows)
        self._bytes += sum(_size(row) for row in rows)
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
        first = events[0][0]
        if not first <= cursor + 1 <= events[-1][0] + 1:
            return None
        served = []
        for revision, at, type_, group, kind, namespace, name, uid, actor, text, data, user in events[
            cursor + 1 - first :
        ]:
            key = ObjectKey(group, kind, namespace, name)
            if matches is None or matches(key):
                served.append(
                    RawEvent(revision, at, type_, key, uid, actor, text=text, data_text=data, user=user)
                )
        return served

    def clear(self) -> None:
        """Forget everything (after a compaction or a failure)."""
        self._events.clear()
        self._bytes = 0


def _size(event: _Kept) -> int:
    body, data = event[9], event[10]
    return (len(body) if body else 0) + (len(data) if data else 0)
