"""Deadlines for many short calls: one watchdog task for every call in flight.

``asyncio.timeout`` arms a timer per call (about 5 µs for entering and leaving it); a
resync of 100,000 objects makes 100,000 provider calls that almost all return at once.
Here a call costs a dictionary entry; one task sleeps until the earliest deadline in
flight, cancels the calls past it, and parks when nothing is left to watch (woken by the
next call, not started again for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from reconcile.controller.clocks import Clock, LoopClock
from reconcile.errors import DeadlineExceededError

__all__ = ["Deadlines"]


class Deadlines:
    """Cancels calls that outlive ``seconds`` on ``clock``; ``what`` names them in the error."""

    def __init__(self, clock: Clock, seconds: float, what: str = "call") -> None:
        self.clock = clock
        # The loop's own clock read without a frame of ours (once per guarded call).
        self._now: Callable[[], float] = time.monotonic if type(clock) is LoopClock else clock.now
        self.seconds = seconds
        self.what = what
        self._inflight: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.Task[None] | None = None
        #: Set (with the deadline to check at) when a call enters while the watchdog is
        #: parked; None while it sleeps toward a deadline, when a call needs nothing.
        self._wake: asyncio.Event | None = None
        self._check_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    async def call(self, name: str, function: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await function(*args)``, cancelled after the deadline: it raises
        :class:`DeadlineExceededError` ("provider create did not answer within 60 s")
        instead. The one guarded call (a provider's every attempt is one): no context
        manager or frame besides its own, for a call made once per object at every
        resync."""
        # current_task(loop) with the loop known skips get_running_loop(): once per
        # provider call, that lookup was a tenth of a resync's reconcile (measured).
        loop = self._loop
        task = None if loop is None else asyncio.current_task(loop)
        if task is None:
            loop = self._loop = asyncio.get_running_loop()
            task = asyncio.current_task(loop)
        assert task is not None, "a deadline outside a task"
        assert loop is not None
        deadline = self._inflight[task] = self._now() + self.seconds
        if self._wake is not None:
            # The watchdog is parked: it checks at this deadline (no call in flight can
            # expire before it: every deadline is its entry time plus the same seconds).
            self._check_at = deadline
            self._wake.set()
            self._wake = None
        elif self._watchdog is None:
            self._check_at = deadline
            self._watchdog = loop.create_task(self._watch(), name="reconcile-deadlines")
        cancelled = False
        try:
            return await function(*args)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            del self._inflight[task]
            if self._expired and task in self._expired:
                self._expired.discard(task)
                self._took_back(task, name, cancelled=cancelled)

    def _took_back(self, task: asyncio.Task[Any], name: str, *, cancelled: bool) -> None:
        """The call ``task`` made was cancelled for its deadline: take that cancellation
        back; unless something else asked to cancel the task too, the call raises
        DeadlineExceededError instead (if it swallowed the cancellation and returned, its
        result stands)."""
        if task.uncancel() == 0 and cancelled:
            message = f"{self.what} {name} did not answer within {self.seconds:g} s"
            raise DeadlineExceededError(message) from None

    async def _watch(self) -> None:
        """Sleep until the deadline of the first call that came while nothing was watched,
        cancel what is past its deadline then, and go on to the next; park when nothing is
        in flight. Calls that come and go between two checks cost the watchdog nothing:
        it wakes once per deadline period, not once per call."""
        try:
            while True:
                await self.clock.sleep(self._check_at - self._now())
                now = self._now()
                waiting = None
                for task, deadline in list(self._inflight.items()):
                    if deadline <= now:
                        if task not in self._expired:
                            self._expired.add(task)
                            task.cancel()
                    elif waiting is None or deadline < waiting:
                        waiting = deadline
                if waiting is not None:
                    self._check_at = waiting
                    continue
                wake = self._wake = asyncio.Event()
                await wake.wait()
        finally:
            if self._watchdog is asyncio.current_task():
                self._watchdog = None
                self._wake = None

    async def close(self) -> None:
        """Stop the watchdog (the calls in flight are left alone)."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
