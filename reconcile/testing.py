"""Helpers for tests of reconcile itself and of code built on it: fakes, not mocks."""

from __future__ import annotations

import asyncio
import heapq
import itertools

import attrs

from reconcile.errors import FieldError
from reconcile.model.kinds import Kind, KindRegistry

__all__ = [
    "RECORD_SET",
    "WIDGET",
    "FakeClock",
    "Record",
    "RecordSetSpec",
    "WidgetSpec",
    "example_kinds",
]


class FakeClock:
    """Time that moves only when told to, for the store, the API and the controllers.

    ``clock()`` is the wall time (what ``time.time`` would say), ``now()`` the monotonic
    time, ``await clock.sleep(s)`` waits until :meth:`advance` has moved time past it.
    Nothing in a test ever sleeps for real.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def __call__(self) -> float:
        """The current fake wall time."""
        return self._now

    def now(self) -> float:
        """The current fake monotonic time."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been advanced by ``seconds``."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose time has come."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """When the earliest pending sleep ends, or None."""
        pending = [deadline for deadline, _, f in self._sleepers if not f.done()]
        return min(pending, default=None)


# -- example kinds ------------------------------------------------------------------------
# Small kinds for tests, examples and benchmarks, in the group example.reconcile.dev.


@attrs.frozen
class WidgetSpec:
    """A widget: a size, a colour and tags."""

    size: int = attrs.field(validator=attrs.validators.ge(0))
    color: str = "blue"
    tags: tuple[str, ...] = ()


@attrs.frozen
class Record:
    """One record of a record set."""

    name: str
    type: str = attrs.field(validator=attrs.validators.in_(("A", "AAAA", "CNAME", "TXT")))
    ttl: int = attrs.field(default=300, validator=attrs.validators.ge(0))
    value: str = ""


@attrs.frozen
class RecordSetSpec:
    """A list of records, for nested field paths (``spec.records[2].ttl``)."""

    zone: str
    records: tuple[Record, ...] = ()


def _validate_record_set(spec: RecordSetSpec) -> list[FieldError]:
    seen: set[tuple[str, str]] = set()
    errors = []
    for index, record in enumerate(spec.records):
        if (record.name, record.type) in seen:
            errors.append(FieldError(f"records[{index}]", f"duplicate {record.type} record {record.name!r}"))
        seen.add((record.name, record.type))
    return errors


WIDGET = Kind("example.reconcile.dev/v1", "Widget", WidgetSpec, short_names=("wd",))
RECORD_SET = Kind(
    "example.reconcile.dev/v1",
    "RecordSet",
    RecordSetSpec,
    validate=_validate_record_set,
    deterministic_identity=True,
)


def example_kinds() -> KindRegistry:
    """A registry holding the example kinds."""
    return KindRegistry([WIDGET, RECORD_SET])
