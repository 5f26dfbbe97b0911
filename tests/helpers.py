"""Manifests and waits shared by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from reconcile.api import Client
from reconcile.controller import Cache, CachedClient, Controller
from reconcile.testing import WIDGET, FakeClock, let_run

#: Real seconds a test waits for something that should happen almost at once.
DEADLINE = 20.0

#: The checkout these tests run from: its root and its providers' folder.
CHECKOUT = Path(__file__).parents[1]


def checkout_path(*more: str | Path) -> str:
    """A ``PYTHONPATH`` for a child process that imports this checkout's reconcile and
    built-in providers (not whichever checkout the virtualenv was installed from)."""
    return os.pathsep.join(str(p) for p in (*more, CHECKOUT, CHECKOUT / "providers"))


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


async def synced(controller: Controller, task: asyncio.Task[None]) -> None:
    """Wait until the controller's informer holds its first list, saying why not: at once
    when the first list fails (its retry waits on the clock, which a test that does not
    advance it never moves: it would hang) or the controller's run ends, and with the
    informer's and the queue's statistics when the deadline passes."""
    failures: list[BaseException] = []
    failed = asyncio.Event()

    def failing(exc: BaseException) -> None:
        failures.append(exc)
        failed.set()

    controller.informer.add_error_handler(failing)
    waits = [asyncio.ensure_future(controller.wait_synced()), asyncio.ensure_future(failed.wait())]
    try:
        await asyncio.wait([*waits, task], timeout=DEADLINE, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    if controller.informer.synced.is_set():
        return
    if failures:
        msg = f"{controller.name}: the informer's first list failed: {failures[0]!r}"
        raise AssertionError(msg) from failures[0]
    if task.done():
        msg = f"{controller.name}: the controller stopped before its first list"
        raise AssertionError(msg) from (None if task.cancelled() else task.exception())
    msg = (
        f"{controller.name}: not synced within {DEADLINE:g} s: {controller.informer.statistics()}, "
        f"{controller.queue.statistics()}"
    )
    raise AssertionError(msg)


def run_benchmark(
    name: str, size: int, tmp_path: Path, *arguments: str
) -> tuple[dict[str, dict[str, Any]], str]:
    """Run ``benchmarks/<name>.py --size <size> [arguments]``; its rows by phase, and what
    it printed."""
    out = tmp_path / f"{name}.json"
    script = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    result = subprocess.run(
        [sys.executable, str(script), "--size", str(size), "--json", str(out), *arguments],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return {row["phase"]: row for row in json.loads(out.read_text())["rows"]}, result.stdout


def widget(name: str, size: int = 1, **metadata: object) -> dict[str, object]:
    """A Widget manifest."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": {"size": size},
    }


@contextlib.asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[Controller]:
    """Run a controller for the duration of the block."""
    task = asyncio.create_task(controller.run())
    try:
        await synced(controller, task)
        yield controller
    finally:
        await controller.shutdown(deadline=DEADLINE)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def cached_widgets(
    client: Client, clock: FakeClock, manager: str = "children"
) -> AsyncIterator[CachedClient]:
    """A CachedClient over ``client`` with a running, synced Widget informer (stopped on leaving)."""
    cache = Cache(client, clock=clock)
    informer = cache.informer(WIDGET)
    task = asyncio.create_task(informer.run())
    try:
        await settle(informer.synced.is_set)
        yield CachedClient(client, cache, manager=manager)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
