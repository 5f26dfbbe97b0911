"""Time for the controller layer: a monotonic ``now()`` and an awaitable ``sleep()``.

Every delay the engine takes (backoff, requeue_after, resync, poll intervals) goes
through a :class:`Clock`, so tests drive time by hand with
:class:`reconcile.testing.FakeClock` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "LoopClock"]


class Clock(Protocol):
    """Monotonic time in seconds and a way to wait for it to pass."""

    def now(self) -> float:
        """The current monotonic time."""

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed."""


class LoopClock:
    """The running event loop's clock (the default)."""

    def now(self) -> float:
        """``time.monotonic()``, the clock asyncio's loop uses."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(max(seconds, 0.0))
