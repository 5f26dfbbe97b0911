"""The ``run`` printer (the actions ``reconcile run`` prints by watching the store) goes
on after a compaction overtakes it, as an informer relists, instead of dying silently
until SIGTERM shows its ExpiredError."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from helpers import widget

from reconcile import Runtime
from reconcile.cli.running import print_actions
from reconcile.testing import example_kinds

DEADLINE = 30.0


class TestPrinter:
    """What the printer does when the history it has not printed yet is compacted away."""

    async def test_a_compaction_that_overtook_it_is_said_and_printing_goes_on(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Watching from a compacted revision: one line on stderr naming the lost
        revisions, then every later action printed."""
        printed: list[str] = []
        async with Runtime(tmp_path / "state.db", providers=[], kinds=example_kinds()) as runtime:
            client = runtime.client
            for size in (1, 2, 3, 4):
                await client.apply(widget("churn", size=size))
            head = await client.revision()
            await client.compact(head)
            printer = asyncio.create_task(print_actions(runtime, printed.append, since=0))
            try:
                await client.apply(widget("after"))
                async with asyncio.timeout(DEADLINE):
                    while not any("Widget default/after" in line for line in printed):
                        assert not printer.done(), printer.exception()
                        await asyncio.sleep(0.01)  # polls the printer's output, with a deadline
            finally:
                printer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await printer
        assert f"revisions 1 to {head - 1} were compacted before they were printed" in capsys.readouterr().err
        # From the horizon on, in order: the churn's last change (kept), then the new one.
        assert [line.split(" ", 1)[1] for line in printed] == [
            "Widget default/churn SpecChanged (reconcile)",
            "Widget default/after Created (reconcile)",
        ]
