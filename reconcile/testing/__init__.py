"""Helpers for tests of reconcile and of code built on it: fakes, not mocks.

* :class:`FakeClock` -- time that moves only when told to.
* Example kinds (``Widget``, ``RecordSet``) for the resource API.
* :class:`MemoryProvider` over a :class:`MemoryCloud` that can be slow, flaky, eventually
  consistent, and changed behind the engine's back.
* :mod:`reconcile.testing.conformance` -- the checks every provider must pass.
"""

from reconcile.testing.clocks import FakeClock, let_run
from reconcile.testing.kinds import RECORD_SET, WIDGET, Record, RecordSetSpec, WidgetSpec, example_kinds
from reconcile.testing.memory import BUCKET, NOTE, BucketSpec, MemoryCloud, MemoryProvider, NoteSpec

__all__ = [
    "BUCKET",
    "NOTE",
    "RECORD_SET",
    "WIDGET",
    "BucketSpec",
    "FakeClock",
    "MemoryCloud",
    "MemoryProvider",
    "NoteSpec",
    "Record",
    "RecordSetSpec",
    "WidgetSpec",
    "example_kinds",
    "let_run",
]
