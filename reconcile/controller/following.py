"""How the controller follows a reconcile's end: a result (a requeue, now or later), or
a failure retried with the key's backoff and said at WARNING, rate-limited per key (a
base class of :class:`~reconcile.controller.controlling.Controller`)."""

from __future__ import annotations

import logging

from opentelemetry import trace

from reconcile.controller.clocks import Clock
from reconcile.controller.informing import Informer
from reconcile.controller.queueing import Priority, WorkQueue
from reconcile.controller.reconciling import Result
from reconcile.controller.telemetry import Telemetry
from reconcile.errors import FencedError, NotFoundError, ReconcileError, StoreError, TransientError
from reconcile.model.meta import ObjectKey

__all__ = ["Following"]

LOG = logging.getLogger("reconcile.controller")

#: Seconds between two warnings about one key's failing reconciles (the first failure of
#: a streak is said at once; the others within this time only at INFO).
_WARN_EVERY = 60.0


class Following:
    """The controller's retries and failure reports (what the controller sets in its
    ``__init__`` is declared here)."""

    name: str
    clock: Clock
    queue: WorkQueue[ObjectKey]
    informer: Informer
    telemetry: Telemetry
    failures: dict[ObjectKey, str]
    gave_up: dict[ObjectKey, str]
    _requeued: set[ObjectKey]
    _store_failure: str | None
    _warned: dict[ObjectKey, tuple[float, int]]
    _attributes: dict[str, str]

    def _errored(self, key: ObjectKey, exc: Exception, span: trace.Span) -> str:
        """Any other failure: retry with the key's backoff.

        But a reconciler that reads its own object (``get(request.key)``) and lets
        NotFoundError out, when the cache no longer holds the key: the object is gone
        and there is nothing to retry (controller-runtime's IgnoreNotFound)."""
        if isinstance(exc, NotFoundError) and self.informer.get(key) is None:
            return self._follow(key, None)
        if isinstance(exc, FencedError):
            # Its shard's lease moved on: the key is another runner's now; drop it.
            self.queue.forget(key)
            self.failures.pop(key, None)
            LOG.info("%s: %s dropped: %s", self.name, key, exc)
            return "fenced"
        self._retry(key, exc)
        span.record_exception(exc)
        span.set_status(trace.StatusCode.ERROR, str(exc))
        self.telemetry.reconcile_errors.add(1, self._attributes)
        return "error"

    def _follow(self, key: ObjectKey, result: Result | None) -> str:
        """Act on a reconcile's result; return the outcome's name (the worker's done()
        forgets the key's failures after the outcomes in :data:`_FORGETTING`)."""
        if self.failures:
            self.failures.pop(key, None)
            self._warned.pop(key, None)  # the streak ended: its next failure is said at once
            if not self.failures:
                self._store_failure = None
        if self.gave_up:
            self.gave_up.pop(key, None)
        if result is None:
            return "success"
        if result.requeue_after is not None:
            self._requeued.add(key)
            self.queue.add_after(key, result.requeue_after, Priority.RESYNC)
            return "requeue_after"
        if result.requeue:
            self._requeued.add(key)
            self.queue.add_rate_limited(key)
            return "requeue"
        return "success"

    def _retry(self, key: ObjectKey, exc: Exception) -> None:
        self._requeued.discard(key)
        retry_after = exc.retry_after if isinstance(exc, TransientError) else None
        delay = self.queue.add_rate_limited(key, at_least=retry_after or 0.0)
        self.failures[key] = message = " ".join((str(exc) or type(exc).__name__).split())
        if isinstance(exc, StoreError):
            if message != self._store_failure:
                self._store_failure = message
                LOG.warning("%s: the store failed: %s; reconciles retry with backoff", self.name, message)
            LOG.info("%s: %s failed (%s); retry in %.3fs", self.name, key, exc, delay)
            return
        self._warn(key, exc, message, delay)

    def _warn(self, key: ObjectKey, exc: Exception, message: str, delay: float) -> None:
        """Say a reconcile failed, at WARNING, rate-limited per key: the first failure of
        a streak at once, then at most once per :data:`_WARN_EVERY` seconds of the clock
        with the number of failures not said since; the others at INFO, as before. A
        failure that is not one of ours (a reconciler's bug: a TypeError, a KeyError) has
        its traceback logged at DEBUG beside the warning: the command line shows warnings
        as one plain line each, and everything under ``--debug``."""
        now = self.clock.now()
        warned = self._warned.get(key)
        if warned is not None and now - warned[0] < _WARN_EVERY:
            self._warned[key] = (warned[0], warned[1] + 1)
            LOG.info("%s: %s failed (%s); retry in %.3fs", self.name, key, message, delay)
            return
        self._warned[key] = (now, 0)
        if warned is None:
            LOG.warning("%s: %s failed: %s; retry in %.3fs", self.name, key, message, delay)
            if not isinstance(exc, ReconcileError):
                LOG.debug("%s: %s: the reconciler raised", self.name, key, exc_info=exc)
        else:
            LOG.warning(
                "%s: %s failed again: %s; %d more failures since the last warning; retry in %.3fs",
                self.name,
                key,
                message,
                warned[1],
                delay,
            )
