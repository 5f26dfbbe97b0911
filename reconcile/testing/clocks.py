"""A clock that moves only when a test says so."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator

__all__ = ["FakeClock"]


class FakeClock:
    """Time that moves only when told to, for the store, the API and the controllers.

    ``clock()`` is the wall time (what ``time.time`` would say), ``now()`` the monotonic
    time, ``await clock.sleep(s)`` waits until :meth:`advance` has moved time past it.
    Nothing in a test ever sleeps for real.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._start = start
        #: Nanoseconds advanced so far: an exact sum, however many advances made it.
        self._elapsed = 0
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

    @contextlib.asynccontextmanager
    async def timeout(self, seconds: float) -> AsyncIterator[_Expiry]:
        """Cancel the block once the clock has been advanced past ``seconds`` from now and
        raise :class:`TimeoutError` instead (``asyncio.timeout``'s semantics, fake time)."""
        task = asyncio.current_task()
        assert task is not None, "clock.timeout() outside a task"
        expiry = _Expiry()
        deadline: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), deadline))

        def fire(done: asyncio.Future[None]) -> None:
            if expiry.active and not done.cancelled():
                expiry.fired = True
                task.cancel()

        deadline.add_done_callback(fire)
        try:
            yield expiry
        except asyncio.CancelledError:
            if expiry.fired and task.uncancel() == 0:
                raise TimeoutError from None
            raise
        finally:
            expiry.active = False
            deadline.cancel()

    def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose time has come.

        Time is kept as the start plus an exact count of nanoseconds, and a sleeper is
        due within :data:`_SLACK` of its deadline (time then reaches that deadline): at
        1.8e9 a float has a quarter of a microsecond's resolution, and three
        ``advance(0.1)`` summed in floats fell short of a ``sleep(0.3)``
        (1800000000.2999997 < 1800000000.3), which then missed its wake-up until the next
        advance; a deadline computed by the caller as ``now() + delay`` is rounded the
        same way."""
        self._elapsed += round(seconds * 1e9)
        self._now = max(self._now, self._start + self._elapsed / 1e9)
        due = self._now + _SLACK
        while self._sleepers and self._sleepers[0][0] <= due:
            deadline, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                # Time reaches the deadline it woke (at most a microsecond more than
                # asked): the sleeper that then compares its deadline with now() (the
                # work queue releasing what is due) finds it due.
                self._now = max(self._now, deadline)
                future.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """When the earliest pending sleep ends, or None."""
        pending = [deadline for deadline, _, f in self._sleepers if not f.done()]
        return min(pending, default=None)


#: Seconds within which a sleeper counts as due when the clock is advanced: a few times a
#: float's resolution at the default start (about 2.4e-7 s), far below any delay a test
#: means (the engine's shortest backoff is 5 ms).
_SLACK = 1e-6

#: Turns of a wait that only yield to the loop before :func:`let_run` starts sleeping.
SPIN_TURNS = 64


async def let_run(turn: int) -> None:
    """One turn of waiting on a condition in a fake-time test.

    The first :data:`SPIN_TURNS` turns only yield to the event loop, so no real time
    passes; later turns sleep a millisecond, so work on other threads (a provider's
    blocking I/O in ``asyncio.to_thread``, aiosqlite) gets the GIL instead of competing
    with a spinning loop.
    """
    await asyncio.sleep(0 if turn < SPIN_TURNS else 0.001)


class _Expiry:
    """A FakeClock timeout's state."""

    def __init__(self) -> None:
        self.active = True
        self.fired = False

    def expired(self) -> bool:
        """Whether the deadline cut the block short."""
        return self.fired
