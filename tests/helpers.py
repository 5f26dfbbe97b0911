"""Manifests and waits shared by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

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
