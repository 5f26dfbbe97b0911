"""Manifests and waits shared by the tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from reconcile.controller import Controller
from reconcile.testing import let_run

#: Real seconds a test waits for something that should happen almost at once.
DEADLINE = 20.0


async def settle(predicate: Callable[[], bool]) -> None:
    """Let the event loop run until ``predicate()`` holds, failing after a real deadline.

    This yields to the loop (and, after many turns, lets other threads run): any time
    that must pass is fake time the test advances.
    """
    async with asyncio.timeout(DEADLINE):
        turn = 0
        while not predicate():
            await let_run(turn)
            turn += 1


def widget(name: str, size: int = 1, **metadata: object) -> dict[str, object]:
    """A Widget manifest."""
    return {
        "api_version": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": {"size": size},
    }


@contextlib.asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[Controller]:
    """Run a controller for the duration of the block."""
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.wait_synced(), DEADLINE)
        yield controller
    finally:
        await controller.shutdown(deadline=DEADLINE)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
