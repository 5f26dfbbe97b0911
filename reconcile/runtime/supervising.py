"""Supervision: a controller that crashes is restarted with backoff, and the crash is
reported (logged with its traceback, counted, passed to crash handlers): never a silent
death, never a hot restart loop."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

from reconcile.controller.clocks import Clock

__all__ = ["Supervisor"]

LOG = logging.getLogger("reconcile.runtime")


class Supervisor:
    """Runs named coroutines, restarting crashed ones with exponential backoff."""

    def __init__(self, clock: Clock, *, initial_backoff: float = 0.1, max_backoff: float = 30.0) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.crashes: collections.Counter[str] = collections.Counter()
        #: Names waiting to be restarted after a crash.
        self.down: set[str] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.stopping = False

    def start(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Run ``run()`` under supervision as ``name``."""
        self._tasks[name] = asyncio.get_running_loop().create_task(
            self._keep(name, run), name=f"supervise-{name}"
        )

    async def _keep(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        backoff = self.initial_backoff
        while not self.stopping:
            self.down.discard(name)
            try:
                await run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - every crash is reported and restarted
                self._report(name, exc)
            else:
                if self.stopping:
                    return
                self._report(name, RuntimeError(f"{name} returned while the runtime was running"))
            await self.clock.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    def _report(self, name: str, exc: BaseException) -> None:
        self.crashes[name] += 1
        self.down.add(name)
        LOG.error("%s crashed (%d so far); restarting", name, self.crashes[name], exc_info=exc)

    async def stop(self) -> None:
        """Stop restarting; cancel what still runs and wait for it."""
        self.stopping = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()
