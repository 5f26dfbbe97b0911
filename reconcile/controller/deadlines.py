"""Deadlines for many short calls: one watchdog task for every call in flight.

``asyncio.timeout`` arms a timer per call (about 5 µs for entering and leaving it); a
resync of 100,000 objects makes 100,000 provider calls that almost all return at once.
Here a call costs a dictionary entry; one task sleeps until the earliest deadline in
flight, cancels the calls past it, and ends when nothing is left to watch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from reconcile.controller.clocks import Clock
from reconcile.errors import DeadlineExceededError

__all__ = ["Deadlines"]


class Deadlines:
    """Cancels calls that outlive ``seconds`` on ``clock``; ``what`` names them in the error."""

    def __init__(self, clock: Clock, seconds: float, what: str = "call") -> None:
        self.clock = clock
        self.seconds = seconds
        self.what = what
        self._inflight: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def call(self, name: str, function: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await function(*args)``, cancelled after the deadline: then
        :class:`DeadlineExceededError` ("provider create did not answer within 60 s").

        The same as ``enter``, ``await``, ``cut`` on CancelledError, ``leave``, which a
        caller on a hot path writes out to save this coroutine's frame."""
        task = self.enter()
        try:
            return await function(*args)
        except asyncio.CancelledError:
            self.cut(task, name)
            raise
        finally:
            self.leave(task)

    def enter(self) -> asyncio.Task[Any]:
        """A call of the current task starts now; returns the task."""
        task = asyncio.current_task()
        assert task is not None, "a deadline outside a task"
        self._inflight[task] = self.clock.now() + self.seconds
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(), name="reconcile-deadlines")
        return task

    def cut(self, task: asyncio.Task[Any], name: str) -> None:
        """On CancelledError: raise DeadlineExceededError instead when the deadline was the
        cause (and nothing else asked to cancel the task); otherwise return, and the caller
        re-raises the cancellation."""
        if task in self._expired:
            self._expired.discard(task)
            if task.uncancel() == 0:
                message = f"{self.what} {name} did not answer within {self.seconds:g} s"
                raise DeadlineExceededError(message) from None

    def leave(self, task: asyncio.Task[Any]) -> None:
        """The call of ``task`` ended (however)."""
        del self._inflight[task]
        if self._expired and task in self._expired:
            # Cancelled for its deadline, but the call swallowed the cancellation.
            self._expired.discard(task)
            task.uncancel()

    async def _watch(self) -> None:
        try:
            while True:
                now = self.clock.now()
                due = [task for task, deadline in self._inflight.items() if deadline <= now]
                for task in due:
                    if task not in self._expired:
                        self._expired.add(task)
                        task.cancel()
                waiting = [d for t, d in self._inflight.items() if t not in self._expired]
                if not waiting:
                    return  # the next call starts a new watchdog
                await self.clock.sleep(min(waiting) - now)
        finally:
            if self._watchdog is asyncio.current_task():
                self._watchdog = None

    async def close(self) -> None:
        """Stop the watchdog (the calls in flight are left alone)."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
