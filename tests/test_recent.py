"""The store's in-memory window of recent events: always contiguous, never a gap."""

from __future__ import annotations

import gc

from reconcile.model import ObjectKey
from reconcile.store.contract import RawEvent
from reconcile.store.recent import EventRow, RecentEvents

KEY = ObjectKey("example.reconcile.dev", "Widget", "default", "w")


def events(first: int, last: int) -> list[EventRow]:
    """Committed events (as the writer hands them over) with revisions first..last."""
    return [
        EventRow(r, 0.0, "Noted", KEY, "uid", "test", None, f'{{"n": {r}}}') for r in range(first, last + 1)
    ]


class TestRecentEvents:
    """What a watch may take from memory."""

    def test_serves_after_a_cursor_inside_the_window(self) -> None:
        """Every event after the cursor, in order."""
        recent = RecentEvents()
        recent.extend(events(5, 9))
        served = recent.after(6)
        assert served is not None
        assert [e.revision for e in served] == [7, 8, 9]
        assert served[0] == RawEvent(7, 0.0, "Noted", KEY, "uid", "test", data={"n": 7})
        assert not served[0].has_body
        assert recent.after(9) == []

    def test_refuses_what_it_does_not_cover(self) -> None:
        """A cursor before the window, or beyond it: the database answers."""
        recent = RecentEvents()
        assert recent.after(0) is None
        recent.extend(events(5, 9))
        assert recent.after(3) is None
        assert recent.after(10) is None

    def test_a_gap_restarts_the_window(self) -> None:
        """Another process committed 10..11: what came before can no longer be served."""
        recent = RecentEvents()
        recent.extend(events(5, 9))
        recent.extend(events(12, 13))
        assert recent.after(8) is None
        assert (recent.first, recent.last) == (12, 13)
        served = recent.after(11)
        assert served is not None
        assert [e.revision for e in served] == [12, 13]

    def test_capacity_keeps_the_newest(self) -> None:
        """Past twice the capacity the oldest are dropped; the rest stays contiguous."""
        recent = RecentEvents(capacity=4)
        for revision in range(1, 20):
            recent.extend(events(revision, revision))
        assert recent.last == 19
        assert 19 - recent.first + 1 <= 8
        served = recent.after(recent.first - 1)
        assert served is not None
        assert [e.revision for e in served] == list(range(recent.first, 20))
        recent.clear()
        assert recent.after(18) is None

    def test_a_byte_budget_bounds_large_bodies(self) -> None:
        """Large bodies: the window keeps under its byte budget, newest first, contiguous."""
        recent = RecentEvents(capacity=100, max_bytes=1000)
        big = "x" * 300
        for revision in range(1, 30):
            recent.extend([EventRow(revision, 0.0, "Noted", KEY, "uid", "test", f'"{big}"', None)])
        assert recent.last == 29
        served = recent.after(recent.first - 1)
        assert served is not None
        assert len(served) * 302 <= 1000
        assert [e.revision for e in served] == list(range(recent.first, 30))

    def test_the_window_is_nothing_to_the_cyclic_collector(self) -> None:
        """After one pass of the collector, no event the window keeps is tracked by it
        (named tuples, the writers' rows and the keys, always are): a window of
        thousands never grows the collector's oldest generation."""
        recent = RecentEvents()
        recent.extend(
            [
                EventRow(r, 0.0, "Created", ObjectKey("g", "Kind", "ns", f"k{r}"), "uid", "test", "{}", None)
                for r in range(1, 101)
            ]
        )
        gc.collect()
        kept = recent._events  # what the window holds, as the collector sees it
        assert len(kept) == 100
        assert not [row for row in kept if gc.is_tracked(row)]
        served = recent.after(0)
        assert served is not None
        assert [e.key for e in served] == [ObjectKey("g", "Kind", "ns", f"k{r}") for r in range(1, 101)]
