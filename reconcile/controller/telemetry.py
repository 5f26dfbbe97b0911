"""Tracing and metrics through opentelemetry-api only: no-ops unless the host process
installs an SDK (or passes providers in, as tests do).

One span per reconcile (``reconcile``, with the kind, key, generation, trigger and
result) and child spans for provider calls and store writes. Metrics are named like
controller-runtime's, with a ``controller`` attribute: ``reconcile_total{result}``,
``reconcile_errors_total``, ``reconcile_time_seconds``, ``workqueue_depth``,
``workqueue_adds_total``, ``workqueue_retries_total``, ``workqueue_queue_duration_seconds``,
``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``,
``controller_runtime_active_workers`` and ``controller_runtime_max_concurrent_reconciles``.
The gauges, and the work queue's two counters (the queue counts its adds and retries
itself), are read only when a metric reader collects: nothing is called per key for them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from opentelemetry import metrics, trace

__all__ = ["INSTRUMENTATION_NAME", "NOT_RECORDING", "Telemetry"]

INSTRUMENTATION_NAME = "reconcile"
#: The shared no-op span block: what callers enter instead of a span when nothing records
#: spans (no name or attributes to build for nobody).
NOT_RECORDING = contextlib.nullcontext(trace.INVALID_SPAN)


class WatchedQueue(Protocol):
    """What the gauges read from a controller's work queue."""

    def __len__(self) -> int: ...

    def processing_times(self) -> list[float]: ...

    def statistics(self) -> Any: ...  # a QueueStatistics (adds, retries)


class Telemetry:
    """The tracer and instruments a controller records with."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
        self._tracing = _Installed(
            tracer_provider is not None and not isinstance(tracer_provider, trace.NoOpTracerProvider),
            lambda: not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider),
        )
        self.meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self._metering = _Installed(
            meter_provider is not None and not isinstance(meter_provider, metrics.NoOpMeterProvider),
            _global_meter_provider,
        )
        self.reconcile_total = self.meter.create_counter(
            "reconcile_total", description="Reconciles, by controller and result"
        )
        self.reconcile_errors = self.meter.create_counter(
            "reconcile_errors_total", description="Reconciles that ended in an error"
        )
        self.reconcile_time = self.meter.create_histogram(
            "reconcile_time_seconds", unit="s", description="Time per reconcile"
        )
        self.queue_wait = self.meter.create_histogram(
            "workqueue_queue_duration_seconds",
            unit="s",
            description="How long a key waited in the queue, from its first add to a worker taking it",
        )
        self._queues: dict[str, tuple[WatchedQueue, int]] = {}
        gauges: list[tuple[str, str, Callable[[WatchedQueue, int], float]]] = [
            ("workqueue_depth", "Keys ready in the queue", lambda q, _: len(q)),
            (
                "workqueue_unfinished_work_seconds",
                "Seconds of work in flight not yet done (large values: stuck reconciles)",
                lambda q, _: sum(q.processing_times()),
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How long the longest reconcile in flight has been running",
                lambda q, _: max(q.processing_times(), default=0.0),
            ),
            (
                "controller_runtime_active_workers",
                "Workers reconciling now",
                lambda q, _: len(q.processing_times()),
            ),
            ("controller_runtime_max_concurrent_reconciles", "Workers of the controller", lambda _, w: w),
        ]
        for name, description, read in gauges:
            self.meter.create_observable_gauge(name, callbacks=[self._reader(read)], description=description)
        counters: list[tuple[str, str, Callable[[WatchedQueue, int], float]]] = [
            ("workqueue_adds_total", "Keys added", lambda q, _: q.statistics().adds),
            ("workqueue_retries_total", "Rate-limited re-adds", lambda q, _: q.statistics().retries),
        ]
        for name, description, read in counters:
            self.meter.create_observable_counter(
                name, callbacks=[self._reader(read)], description=description
            )

    @property
    def recording(self) -> bool:
        """Whether spans go anywhere: a provider was passed in, or the host installed one
        (see :class:`_Installed`)."""
        return self._tracing.answer()

    @property
    def metering(self) -> bool:
        """Whether metrics go anywhere, as :attr:`recording` for spans. When not, the
        per-key counters and histograms are not called at all: the API's proxy
        instruments cost a call each for nobody, several per reconcile."""
        return self._metering.answer()

    def span(
        self, name: str, attributes: Mapping[str, Any] | None = None, *, end_on_exit: bool = True
    ) -> contextlib.AbstractContextManager[trace.Span]:
        """A span made current for the block; a shared no-op when nothing records spans
        (the API's no-op span still costs several microseconds per reconcile). Without
        ``end_on_exit``, the block only makes it current: the caller ends it, later."""
        if not self.recording:
            return NOT_RECORDING
        return self.tracer.start_as_current_span(name, attributes=attributes, end_on_exit=end_on_exit)

    def watch_queue(self, controller: str, queue: WatchedQueue, workers: int) -> None:
        """Report the gauges of ``controller``'s queue and workers."""
        self._queues[controller] = (queue, workers)

    def forget_queue(self, controller: str) -> None:
        """Stop reporting a controller's gauges."""
        self._queues.pop(controller, None)

    def _reader(
        self, read: Callable[[WatchedQueue, int], float]
    ) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            return [
                metrics.Observation(read(queue, workers), {"controller": name})
                for name, (queue, workers) in list(self._queues.items())
            ]

        return observe


def _global_meter_provider() -> bool:
    """Whether the host installed a meter provider (not the API's proxy or no-op one)."""
    provider = metrics.get_meter_provider()
    return not isinstance(provider, metrics.NoOpMeterProvider) and (
        type(provider).__name__ != "_ProxyMeterProvider"
    )


class _Installed:
    """Whether a telemetry provider records: always, when one was passed in; otherwise
    whether the host installed one globally, looked up at most once a second and once
    per 64 questions (the lookup reads the environment; the clock is read once per 64)."""

    __slots__ = ("_asked", "_checked_at", "_explicit", "_global", "_look")

    def __init__(self, explicit: bool, look: Callable[[], bool]) -> None:
        self._explicit = explicit
        self._look = look
        self._global = False
        self._checked_at = -1e9
        self._asked = -1  # the first question looks

    def answer(self) -> bool:
        """The answer, cached as described."""
        if self._explicit:
            return True
        self._asked += 1
        if self._asked & 63:
            return self._global
        now = time.monotonic()
        if now - self._checked_at > 1.0:
            self._checked_at = now
            self._global = self._look()
        return self._global
