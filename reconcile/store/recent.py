"""The recent tail of the log, kept in memory by the process that wrote it.

A watch that is nearly caught up (every controller's informer, most of the time) would
otherwise read each new event back from the database: a query on the reader thread and
a JSON parse per event, for bodies this process had in memory a moment before. The
writer appends each committed batch here, and watches serve themselves from it when it
covers their cursor.

The window is always *contiguous*: it covers every revision from its start to its end
(:attr:`RecentEvents.last`). When a batch does not follow the end (another process
committed in between), the window restarts at that batch, so a watch served from it can
never skip a revision. What is not in the window is read from the database as before.
The same rule lets the writer leave the window alone while no watch is open (the
tail's ``watches``; a store used without watches, a lone writer's): the first batch
written once one is open restarts the window, and the watch reads what came before from
the database, as it would have.

Another process's commits can join the window too (:meth:`RecentEvents.fill`): a store
whose watches learn of them at once (PostgreSQL's notifications) reads the new events
once, every kind, and appends them, so its watches serve themselves from memory instead
of each reading its own page of the same revisions. The range read is the window's end
to a safe head, so the coverage stays whole even where a revision was never committed
(a sequence value of a rolled-back transaction): the window's end is the head it read
up to, not its last event's revision.

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

import bisect
import operator
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


#: A kept event's revision, or an EventRow's: the first field of either tuple.
_REVISION = operator.itemgetter(0)


class RecentEvents:
    """A contiguous window of the latest events this process committed."""

    def __init__(
        self, capacity: int = 4096, max_bytes: int = 32 * 1024 * 1024, *, filled: bool = False
    ) -> None:
        self.capacity = capacity
        #: The store fills the window with other processes' commits (:meth:`fill`): a
        #: batch of ours after a gap waits for the fill that closes the gap, rather than
        #: restarting the window (the watches still behind it would each read the gap).
        self.filled = filled
        #: Our batches beyond a gap, contiguous among themselves, until a fill reaches them.
        self._pending: list[EventRow] = []
        #: Counts the clears: a fill whose read began before one is refused.
        self.epoch = 0
        #: Bodies may be large (up to 1.5 MiB each): the window also keeps under this many
        #: bytes of text, dropping its oldest events first.
        self.max_bytes = max_bytes
        self._events: list[_Kept] = []
        self._bytes = 0
        #: The window covers revisions (_start, _end]: every event in that range is in
        #: ``_events`` (_end is 0 when nothing is covered).
        self._start = 0
        self._end = 0

    @property
    def first(self) -> int:
        """The oldest revision in the window (0 when empty)."""
        return self._events[0][0] if self._events else 0

    @property
    def last(self) -> int:
        """The newest revision the window covers (0 when empty): its last event's, or
        further when a :meth:`fill` read up to a head past it."""
        return self._end

    def extend(self, events: Sequence[EventRow]) -> None:
        """Append a committed batch (in revision order)."""
        if not events:
            return
        if self._end and events[0].revision != self._end + 1:
            # Somebody else committed in between.
            if self.filled and self._held(events):
                return
            self.clear()  # restart the window
        if not self._end:
            self._start = events[0].revision - 1
        self._append(events, events[-1].revision)

    def fill(self, after: int, through: int, events: Sequence[EventRow], *, epoch: int) -> bool:
        """Append another process's events: ``events`` are *every* event in revisions
        (``after``, ``through``], in order, read from the database up to a safe head,
        by a read that began at ``epoch`` (:attr:`epoch`). Taken when they follow the
        window's end, or start past it (the window fell behind: it restarts at
        ``after``), or the window is empty; False when the window moved on meanwhile
        (this process committed past ``after``, or it was cleared: a compaction)."""
        if through <= after or epoch != self.epoch or (self._end and after < self._end):
            return False
        if self._end and after > self._end:
            self.clear()  # fallen behind (the head moved on without it): start again here
        if not self._end:
            self._start = after
        self._append(events, through)
        pending, self._pending = self._pending, []
        # What the read brought back of the held batches is taken from the database.
        pending = pending[bisect.bisect_right(pending, through, key=_REVISION) :]
        if pending and pending[0].revision == through + 1:
            self._append(pending, pending[-1].revision)
        else:
            self._pending = pending  # still beyond a gap
        return True

    def _held(self, events: Sequence[EventRow]) -> bool:
        """Keep a batch of ours that lies beyond a gap until a fill reaches it; False
        when too much is held already (restart the window instead)."""
        pending = self._pending
        if pending and events[0].revision != pending[-1].revision + 1:
            pending.clear()  # another gap: the older batches are read back by the fill
        if len(pending) + len(events) > self.capacity:
            pending.clear()
            return False
        pending.extend(events)
        return True

    def _append(self, events: Sequence[EventRow], end: int) -> None:
        self._end = end
        if not events:
            return
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
            if start:
                self._start = self._events[start - 1][0]
            del self._events[:start]
            self._bytes = kept

    def after(
        self, cursor: int, *, matches: Callable[[ObjectKey], bool] | None = None
    ) -> list[RawEvent] | None:
        """Every event after ``cursor`` up to :attr:`last` whose key ``matches``, or None
        when the window does not start at or before ``cursor + 1`` (or ends before it):
        read the database. Bodies stay text until a watcher reads them."""
        if not self._end or not self._start <= cursor <= self._end:
            return None
        events = self._events
        served = []
        for revision, at, type_, group, kind, namespace, name, uid, actor, text, data, user in events[
            _after(events, cursor) :
        ]:
            key = ObjectKey(group, kind, namespace, name)
            if matches is None or matches(key):
                served.append(
                    RawEvent(revision, at, type_, key, uid, actor, text=text, data_text=data, user=user)
                )
        return served

    def clear(self) -> None:
        """Forget everything (after a compaction or a failure); a fill read before it is
        refused (:attr:`epoch`)."""
        self.epoch += 1
        self._events.clear()
        self._pending.clear()
        self._bytes = 0
        self._start = self._end = 0


def _after(events: list[_Kept], cursor: int) -> int:
    """The index of the first of ``events`` (in revision order) after ``cursor``."""
    if not events or events[0][0] > cursor:
        return 0
    # Revisions are dense but for the holes of a fill (never-committed sequence values):
    # the guess by difference is right but for them, then a bisection.
    guess = cursor + 1 - events[0][0]
    if guess < len(events) and events[guess][0] == cursor + 1:
        return guess
    return bisect.bisect_right(events, cursor, key=_REVISION)


def _size(event: _Kept) -> int:
    body, data = event[9], event[10]
    return (len(body) if body else 0) + (len(data) if data else 0)
