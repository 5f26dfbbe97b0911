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


def hole(events_: list[EventRow], revision: int) -> list[EventRow]:
    """``events_`` without ``revision`` (a sequence value nobody committed)."""
    return [e for e in events_ if e.revision != revision]


class TestFilledFromTheDatabase:
    """Another process's commits, read once for every watch (``fill``)."""

    def test_a_fill_that_follows_the_window_extends_it(self) -> None:
        """Our commits 5..9, then the others' 10..12 read up to the head 12."""
        recent = RecentEvents()
        recent.extend(events(5, 9))
        assert recent.fill(9, 12, events(10, 12), epoch=recent.epoch)
        served = recent.after(8)
        assert served is not None
        assert [e.revision for e in served] == [9, 10, 11, 12]
        assert recent.last == 12

    def test_holes_and_a_head_past_the_last_event_are_covered(self) -> None:
        """Revision 11 was never committed and the head read, 14, lies past the last
        event: the window covers up to 14 all the same, and serves every cursor in it."""
        recent = RecentEvents()
        recent.extend(events(5, 9))
        assert recent.fill(9, 14, hole(events(10, 13), 11), epoch=recent.epoch)
        assert recent.last == 14
        for cursor, expected in ((9, [10, 12, 13]), (10, [12, 13]), (11, [12, 13]), (13, []), (14, [])):
            served = recent.after(cursor)
            assert served is not None
            assert [e.revision for e in served] == expected, cursor
        assert recent.after(15) is None
        # Our next commit follows the head the fill read, not its last event.
        recent.extend(events(15, 15))
        served = recent.after(12)
        assert served is not None
        assert [e.revision for e in served] == [13, 15]

    def test_a_fill_that_does_not_follow_is_refused(self) -> None:
        """Our own commit landed while the fill read (the window moved on): its read
        is dropped, never put after newer revisions."""
        recent = RecentEvents()
        recent.extend(events(5, 9))
        recent.extend(events(13, 14))  # another process's 10..12 came between: restarted
        assert not recent.fill(9, 12, events(10, 12), epoch=recent.epoch)
        assert recent.after(9) is None
        served = recent.after(12)
        assert served is not None
        assert [e.revision for e in served] == [13, 14]
        assert not recent.fill(14, 14, [], epoch=recent.epoch)  # an empty range changes nothing

    def test_an_empty_window_starts_at_the_fill(self) -> None:
        """Nothing committed here yet: the fill starts the window at the head the
        watches were given."""
        recent = RecentEvents()
        assert recent.fill(20, 25, hole(events(21, 25), 23), epoch=recent.epoch)
        assert recent.after(19) is None
        served = recent.after(20)
        assert served is not None
        assert [e.revision for e in served] == [21, 22, 24, 25]

    def test_trimming_keeps_the_start_exact(self) -> None:
        """Past its capacity the window drops its oldest events; a cursor before what is
        left goes to the database, one at its start is served."""
        recent = RecentEvents(capacity=4)
        recent.extend(events(1, 3))
        assert recent.fill(3, 12, hole(events(4, 12), 6), epoch=recent.epoch)
        first = recent.first
        assert first > 1
        assert recent.after(first - 2) is None
        served = recent.after(first - 1)
        assert served is not None
        assert [e.revision for e in served] == [r for r in range(first, 13) if r != 6]

    def test_our_batch_beyond_a_gap_waits_for_the_fill(self) -> None:
        """A store that fills (PostgreSQL): our commit 13..14 lands before the others'
        10..12 are read; the window keeps its end at 9 (the watches behind it are served
        once the fill comes) and takes our batch after the fill closes the gap."""
        recent = RecentEvents(filled=True)
        recent.extend(events(5, 9))
        recent.extend(events(13, 14))
        assert recent.last == 9
        served = recent.after(9)
        assert served == []
        recent.extend(events(15, 15))  # and the next, contiguous with the held batch
        assert recent.fill(9, 12, events(10, 12), epoch=recent.epoch)
        assert recent.last == 15
        served = recent.after(8)
        assert served is not None
        assert [e.revision for e in served] == list(range(9, 16))

    def test_a_fill_past_the_held_batch_takes_the_database_copy(self) -> None:
        """The fill read up to 14, our held 13..14 among it: nothing twice."""
        recent = RecentEvents(filled=True)
        recent.extend(events(5, 9))
        recent.extend(events(13, 14))
        assert recent.fill(9, 14, events(10, 14), epoch=recent.epoch)
        served = recent.after(9)
        assert served is not None
        assert [e.revision for e in served] == [10, 11, 12, 13, 14]
        recent.extend(events(15, 16))
        assert recent.last == 16

    def test_a_fill_short_of_the_held_batch_keeps_it_held(self) -> None:
        """The fill reached 11, our batch starts at 13: held still, until 12 is read."""
        recent = RecentEvents(filled=True)
        recent.extend(events(5, 9))
        recent.extend(events(13, 14))
        assert recent.fill(9, 11, events(10, 11), epoch=recent.epoch)
        assert recent.last == 11
        assert recent.fill(11, 12, events(12, 12), epoch=recent.epoch)
        assert recent.last == 14

    def test_too_much_held_restarts_the_window(self) -> None:
        """No fill comes (nobody watches): past the capacity held, the window restarts at
        our commits, as a store that does not fill does at every gap."""
        recent = RecentEvents(capacity=4, filled=True)
        recent.extend(events(1, 2))
        recent.extend(events(5, 7))
        assert recent.last == 2
        recent.extend(events(8, 9))
        assert recent.after(2) is None
        assert recent.last == 9
        served = recent.after(7)
        assert served is not None
        assert [e.revision for e in served] == [8, 9]


class TestFillingSafely:
    """A fill that raced with something else: refused, or starting the window again."""

    def test_a_window_fallen_behind_starts_again_at_the_fill(self) -> None:
        """The window ends at 9 but the watches were given 20 (read for themselves): a
        fill of (20, 25] restarts the window there, rather than reading 10..20 again."""
        recent = RecentEvents(filled=True)
        recent.extend(events(5, 9))
        assert recent.fill(20, 25, events(21, 25), epoch=recent.epoch)
        assert recent.after(9) is None
        served = recent.after(20)
        assert served is not None
        assert [e.revision for e in served] == [21, 22, 23, 24, 25]

    def test_a_fill_read_before_a_clear_is_refused(self) -> None:
        """A compaction cleared the window while a fill was reading: what it read is
        not put in (a watch behind the new horizon must find out from the database)."""
        recent = RecentEvents(filled=True)
        recent.extend(events(5, 9))
        epoch = recent.epoch
        recent.clear()
        assert not recent.fill(9, 12, events(10, 12), epoch=epoch)
        assert recent.last == 0
        assert recent.fill(9, 12, events(10, 12), epoch=recent.epoch)

    def test_a_second_fill_from_the_same_end_is_refused(self) -> None:
        """Two reads from the same end (the poll's and a notification's): the second
        finds the window moved on and changes nothing."""
        recent = RecentEvents(filled=True)
        recent.extend(events(5, 9))
        epoch = recent.epoch
        assert recent.fill(9, 12, events(10, 12), epoch=epoch)
        assert not recent.fill(9, 11, events(10, 11), epoch=epoch)
        assert recent.last == 12
