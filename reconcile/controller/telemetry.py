"""Tracing and metrics through opentelemetry-api only: no-ops unless the host process
installs an SDK (or passes providers in, as tests do).

One span per reconcile (``reconcile``, with the kind, key, generation, trigger and
result) and child spans for provider calls and store writes. Metrics are named like
controller-runtime's, with a ``controller`` attribute: ``reconcile_total{result}``,
``reconcile_errors_total``, ``reconcile_time_seconds``, ``workqueue_depth``,
``workqueue_adds_total``, ``workqueue_retries_total``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import metrics, trace

__all__ = ["INSTRUMENTATION_NAME", "NOT_RECORDING", "Telemetry"]

INSTRUMENTATION_NAME = "reconcile"
#: The shared no-op span block: what callers enter instead of a span when nothing records
#: spans (no name or attributes to build for nobody).
NOT_RECORDING = contextlib.nullcontext(trace.INVALID_SPAN)


class Telemetry:
    """The tracer and instruments a controller records with."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
        self._explicit = tracer_provider is not None and not isinstance(
            tracer_provider, trace.NoOpTracerProvider
        )
        self._global = False
        self._checked_at = -1e9
        self.meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self.reconcile_total = self.meter.create_counter(
            "reconcile_total", description="Reconciles, by controller and result"
        )
        self.reconcile_errors = self.meter.create_counter(
            "reconcile_errors_total", description="Reconciles that ended in an error"
        )
        self.reconcile_time = self.meter.create_histogram(
            "reconcile_time_seconds", unit="s", description="Time per reconcile"
        )
        self.queue_adds = self.meter.create_counter("workqueue_adds_total", description="Keys added")
        self.queue_retries = self.meter.create_counter(
            "workqueue_retries_total", description="Rate-limited re-adds"
        )
        self._depths: dict[str, Callable[[], int]] = {}
        self.meter.create_observable_gauge(
            "workqueue_depth", callbacks=[self._observe_depths], description="Keys ready in the queue"
        )

    @property
    def recording(self) -> bool:
        """Whether spans go anywhere: a provider was passed in, or the host installed one
        (looked up at most once a second: the lookup reads the environment)."""
        if self._explicit:
            return True
        now = time.monotonic()
        if now - self._checked_at > 1.0:
            self._checked_at = now
            self._global = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        return self._global

    def span(
        self, name: str, attributes: Mapping[str, Any] | None = None
    ) -> contextlib.AbstractContextManager[trace.Span]:
        """A span made current for the block; a shared no-op when nothing records spans
        (the API's no-op span still costs several microseconds per reconcile)."""
        if not self.recording:
            return NOT_RECORDING
        return self.tracer.start_as_current_span(name, attributes=attributes)

    def watch_depth(self, controller: str, depth: Callable[[], int]) -> None:
        """Report ``depth()`` as ``workqueue_depth{controller}``."""
        self._depths[controller] = depth

    def forget_depth(self, controller: str) -> None:
        """Stop reporting a controller's depth."""
        self._depths.pop(controller, None)

    def _observe_depths(self, _options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [
            metrics.Observation(depth(), {"controller": name}) for name, depth in list(self._depths.items())
        ]
