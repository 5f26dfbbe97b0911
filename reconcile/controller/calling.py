"""How the managed reconciler calls a provider: in a span, within a deadline, and with a
few quick retries of transient failures (tenacity) before the work queue's backoff takes
over across reconciles."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import tenacity

from reconcile.controller.clocks import Clock
from reconcile.controller.deadlines import Deadlines
from reconcile.controller.telemetry import Telemetry
from reconcile.errors import ConflictError, PermanentError, TerminalError

__all__ = ["ProviderCalls"]


def _unbounded(_name: str, function: Callable[..., Awaitable[Any]], *args: Any) -> Awaitable[Any]:
    """An attempt without a deadline: the call's own awaitable (no frame of ours)."""
    return function(*args)


def retryable(exc: BaseException) -> bool:
    """Whether retrying within the reconcile may help (not a permanent or a conflict)."""
    return not isinstance(exc, PermanentError | ConflictError | TerminalError)


class ProviderCalls:
    """Calls one kind's provider: ``await calls.call("create", client.create, obj)``."""

    def __init__(
        self, kind: str, clock: Clock, telemetry: Telemetry, *, attempts: int, timeout: float | None
    ) -> None:
        self.kind = kind
        self.clock = clock
        self.telemetry = telemetry
        #: Tries of a call that fails transiently, within one reconcile.
        self.attempts = attempts
        #: Seconds one call may take before it counts as a transient failure (None: no limit).
        self.timeout = timeout
        self._deadlines = None if timeout is None else Deadlines(clock, timeout, "provider")
        # One attempt: ``await function(*args)``, under the deadline when there is one. A
        # call that hangs (a dead connection, a server that never answers) raises
        # DeadlineExceededError instead of holding a worker for good; a create cut short
        # may or may not have happened: the managed reconciler keeps its pending marker.
        self._attempt: Callable[..., Awaitable[Any]] = (
            _unbounded if self._deadlines is None else self._deadlines.call
        )
        # Whether spans record, asked of the telemetry once per 64 calls (as the
        # controller's workers do; the host may install an SDK while we run).
        self._recording = False
        self._asked = 0

    def call(self, operation: str, function: Callable[..., Awaitable[Any]], *args: Any) -> Awaitable[Any]:
        """``await function(*args)`` in a ``provider.<operation>`` span, cut short after the
        timeout (DeadlineExceededError), a transient failure retried a few times.

        A plain function that hands back the coroutine to await: when no span records
        (a resync of 100,000 objects makes 100,000 of these calls), that is
        :meth:`_attempts` itself, with no frame of ours around it."""
        if not self._asked:
            self._asked, self._recording = 64, self.telemetry.recording
        self._asked -= 1
        if self._recording:
            return self._spanned(operation, function, args)
        return self._attempts(operation, function, args)

    async def _spanned(
        self, operation: str, function: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
    ) -> Any:
        with self.telemetry.span(f"provider.{operation}", {"provider.kind": self.kind}):
            return await self._attempts(operation, function, args)

    async def _attempts(
        self, operation: str, function: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
    ) -> Any:
        """The first attempt, then :meth:`_retried` after a transient failure."""
        try:
            return await self._attempt(operation, function, *args)
        except Exception as exc:
            if self.attempts <= 1 or not retryable(exc):
                raise
        return await self._retried(operation, function, args)

    async def _retried(
        self, operation: str, function: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
    ) -> Any:
        """The first attempt failed transiently: tenacity takes over for the rest (the
        common, successful call does not pay for building a retrier)."""
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.attempts - 1),
            wait=tenacity.wait_exponential(multiplier=0.01, max=1.0),
            retry=tenacity.retry_if_exception(retryable),
            sleep=self.clock.sleep,
            reraise=True,
        )
        await self.clock.sleep(0.01)
        async for attempt in retrying:
            with attempt:
                return await self._attempt(operation, function, *args)
        raise AssertionError  # pragma: no cover - reraise=True always returns or raises

    async def close(self) -> None:
        """Stop the deadline watchdog."""
        if self._deadlines is not None:
            await self._deadlines.close()
