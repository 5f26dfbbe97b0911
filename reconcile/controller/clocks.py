"""Time for the controller layer: a monotonic ``now()`` and an awaitable ``sleep()``.

Every delay the engine takes (backoff, requeue_after, resync, poll intervals) goes
through a :class:`Clock`, so tests drive time by hand with
:class:`reconcile.testing.FakeClock` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

__all__ = ["Clock", "Expiry", "LoopClock"]


class Expiry(Protocol):
    """What a clock's timeout block yields: whether its deadline cut the block short."""

    def expired(self) -> bool:
        """True once the deadline passed and the block was cancelled for it."""


class Clock(Protocol):
    """Monotonic time in seconds, a way to wait for it to pass, and a deadline for a
    block of work."""

    def now(self) -> float:
        """The current monotonic time."""

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed."""

    def timeout(self, seconds: float) -> contextlib.AbstractAsyncContextManager[Expiry]:
        """``async with clock.timeout(s):`` cancels the block after ``s`` seconds and
        raises :class:`TimeoutError` in its place (``asyncio.timeout`` on this clock)."""


class LoopClock:
    """The running event loop's clock (the default)."""

    def now(self) -> float:
        """``time.monotonic()``, the clock asyncio's loop uses."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(max(seconds, 0.0))

    def timeout(self, seconds: float) -> contextlib.AbstractAsyncContextManager[Expiry]:
        """``asyncio.timeout``, relative to now."""
        return asyncio.timeout(seconds)
