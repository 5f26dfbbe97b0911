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
        """``await function(*args)`` within the deadline (see :meth:`guard`)."""
        with self.guard(name):
            return await function(*args)

    def guard(self, name: str) -> _Guard:
        """``with deadlines.guard("create"): await ...``: the block is cancelled after the
        deadline and raises :class:`DeadlineExceededError` ("provider create did not answer
        within 60 s") instead. A plain context manager: no coroutine frame of its own, for
        a call made once per object at every resync."""
        return _Guard(self, name)

    def _enter(self) -> asyncio.Task[Any]:
        task = asyncio.current_task()
        assert task is not None, "a deadline outside a task"
        self._inflight[task] = self.clock.now() + self.seconds
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(), name="reconcile-deadlines")
        return task

    def _leave(self, task: asyncio.Task[Any], name: str, cancelled: bool) -> None:
        del self._inflight[task]
        if not self._expired or task not in self._expired:
            return
        self._expired.discard(task)
        # Cancelled for its deadline: take that cancellation back; unless something else
        # asked to cancel the task too, the block raises DeadlineExceededError instead (if
        # the call swallowed the cancellation and returned, its result stands).
        if task.uncancel() == 0 and cancelled:
            message = f"{self.what} {name} did not answer within {self.seconds:g} s"
            raise DeadlineExceededError(message) from None

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


class _Guard:
    """One guarded block (see :meth:`Deadlines.guard`)."""

    __slots__ = ("_deadlines", "_name", "_task")

    def __init__(self, deadlines: Deadlines, name: str) -> None:
        self._deadlines = deadlines
        self._name = name

    def __enter__(self) -> None:
        self._task = self._deadlines._enter()  # noqa: SLF001 - the guard is part of Deadlines

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._deadlines._leave(self._task, self._name, kind is asyncio.CancelledError)  # noqa: SLF001
