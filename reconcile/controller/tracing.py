"""How the controller traces a reconcile that somebody records: the span, named for why
the key was queued, opened before the worker's body and closed after it with the
outcome, and the reconcile's metrics (a base class of
:class:`~reconcile.controller.controlling.Controller`)."""

from __future__ import annotations

import contextlib
import sys
import time

import attrs
from opentelemetry import trace

from reconcile.controller.informing import Informer
from reconcile.controller.queueing import Priority, WorkQueue
from reconcile.controller.telemetry import NOT_RECORDING, Telemetry
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectKey

__all__ = ["Traced", "Tracing"]

_TRIGGERS = {Priority.CHANGE: "change", Priority.RETRY: "retry", Priority.RESYNC: "resync"}


@attrs.define(slots=True)
class Traced:
    """A recorded reconcile's span block (entered), its span, and when it began (None
    when nothing meters)."""

    block: contextlib.AbstractContextManager[trace.Span]
    span: trace.Span
    started: float | None


class Tracing:
    """The controller's spans and reconcile metrics (what the controller sets in its
    ``__init__`` is declared here)."""

    name: str
    kind: Kind
    queue: WorkQueue[ObjectKey]
    informer: Informer
    telemetry: Telemetry
    _requeued: set[ObjectKey]
    _attributes: dict[str, str]
    _outcomes: dict[str, dict[str, str]]

    def _traced(self, key: ObjectKey) -> Traced:
        """What a reconcile of ``key`` that somebody records opens before the worker's
        body: its span, named for why the key was queued (entered here), and, when
        metering, the queue wait recorded and the clock read."""
        queue = self.queue
        trigger = _TRIGGERS[queue.taken_priority]
        if queue.taken_after_delay and key in self._requeued:
            trigger = "requeue"
        started = None
        if self.telemetry.metering:
            started = time.perf_counter()
            self.telemetry.queue_wait.record(queue.waited, self._attributes)
        block = self._span(key, trigger)
        return Traced(block, block.__enter__(), started)

    def _untraced(self, traced: Traced, outcome: str) -> None:
        """Close what :meth:`_traced` opened, after the worker's body: the span, with the
        outcome (or the exception going through, as its ``with`` block would see it),
        and the reconcile's metrics."""
        propagating = sys.exc_info()
        traced.block.__exit__(*propagating)
        self._ended(traced, outcome, finished=propagating[1] is None)

    def _ended(self, traced: Traced, outcome: str, *, finished: bool = True) -> None:
        """End the span whose block was left (the worker leaves it at once when it goes
        on while the reconcile's last write lands, see
        :mod:`~reconcile.controller.landing`), with the outcome and the reconcile's
        metrics when it ``finished`` (was not cut short)."""
        span = traced.span
        if finished and span is not trace.INVALID_SPAN:
            span.set_attribute("reconcile.result", outcome)
        span.end()
        if finished and traced.started is not None:
            self.telemetry.reconcile_total.add(1, self._outcomes[outcome])
            self.telemetry.reconcile_time.record(time.perf_counter() - traced.started, self._attributes)

    def _span(self, key: ObjectKey, trigger: str) -> contextlib.AbstractContextManager[trace.Span]:
        if not self.telemetry.recording:
            # Nothing records spans: no attributes built, a shared no-op span (a resync of
            # 100,000 objects is made of this path).
            return NOT_RECORDING
        cached = self.informer.get(key)
        attributes = {
            "reconcile.controller": self.name,
            "reconcile.kind": self.kind.kind,
            "reconcile.key": f"{key.namespace}/{key.name}",
            "reconcile.generation": cached.metadata.generation if cached is not None else 0,
            "reconcile.trigger": trigger,
        }
        # Ended by _ended, not by leaving the block: a reconcile whose last write is still
        # landing leaves the block in the worker and ends the span when the write lands.
        return self.telemetry.span("reconcile", attributes, end_on_exit=False)
