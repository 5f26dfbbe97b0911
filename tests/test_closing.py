"""Closing a Runtime or a store cut short by a cancellation: the clean-up still finishes,
a second ``close()`` waits for it, and no aiosqlite thread is left to keep the process
from exiting."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import aiosqlite
import pytest

from reconcile import Runtime, StoreError
from reconcile.store import SQLiteStore
from reconcile.store.finishing import finish
from reconcile_providers.files import FilesProvider

ROOT = Path(__file__).parents[1]


def store_threads() -> list[threading.Thread]:
    """aiosqlite connection threads still running."""
    return [t for t in threading.enumerate() if isinstance(t, aiosqlite.Connection) and t.is_alive()]


async def cancel_soon(coroutine_task: asyncio.Task[object], turns: int) -> None:
    """Cancel a task after ``turns`` turns of the loop, and wait for it to end."""
    for _ in range(turns):
        await asyncio.sleep(0)
    coroutine_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await coroutine_task


class TestCancelledClose:
    """close() cancelled at different points."""

    @pytest.mark.parametrize("turns", [0, 1, 3, 10])
    async def test_runtime_close_finishes_and_a_second_close_waits(self, tmp_path: Path, turns: int) -> None:
        """A cancelled close keeps closing; the second one returns once all is closed and
        no store thread is left."""
        before = set(store_threads())
        runtime = Runtime(
            tmp_path / "state.db",
            providers=[FilesProvider()],
            provider_config={"files": {"roots": [str(tmp_path)]}},
        )
        await runtime.start()
        await cancel_soon(asyncio.create_task(runtime.close()), turns)
        assert await asyncio.wait_for(runtime.close(), 20) in (True, False)
        assert set(store_threads()) <= before
        assert await runtime.close() in (True, False), "a third close is a no-op"

    @pytest.mark.parametrize("turns", [0, 1, 3])
    async def test_store_close_finishes(self, tmp_path: Path, turns: int) -> None:
        """The same for a store on its own."""
        before = set(store_threads())
        store = SQLiteStore(tmp_path / "state.db")
        await store.open()
        await cancel_soon(asyncio.create_task(store.close()), turns)
        await asyncio.wait_for(store.close(), 20)
        assert set(store_threads()) <= before

    async def test_finish_reraises_the_cancellation_after_the_work(self) -> None:
        """finish(): the caller's cancellation comes back only once the task is done."""
        release = asyncio.Event()
        done: list[str] = []

        async def work() -> str:
            await release.wait()
            done.append("work")
            return "closed"

        task = asyncio.create_task(work())
        waiter = asyncio.create_task(finish(task))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.sleep(0)
        assert not waiter.done(), "the waiter stays until the work is done"
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert done == ["work"]
        assert await finish(task) == "closed"


SCRIPT = """
import asyncio, sys
from reconcile_providers.files import FilesProvider
from reconcile import Runtime, StoreError

async def main():
    config = {"files": {"roots": [sys.argv[2]]}}
    runtime = Runtime(sys.argv[1], providers=[FilesProvider()], provider_config=config)
    await runtime.start()
    await runtime.apply({"apiVersion": "files.reconcile.dev/v1", "kind": "File",
                         "metadata": {"name": "a"}, "spec": {"path": "a.txt", "content": "x"}})
    closing = asyncio.create_task(runtime.close())
    for _ in range(int(sys.argv[3])):
        await asyncio.sleep(0)
    closing.cancel()  # and nobody closes again: asyncio.run's own clean-up is all there is

asyncio.run(main())
print("exited")
"""


@pytest.mark.parametrize("turns", [0, 1, 2, 5, 20])
def test_a_process_with_a_cancelled_close_exits(tmp_path: Path, turns: int) -> None:
    """The process whose only close() was cancelled still exits (it used to hang at exit
    on aiosqlite's threads in 3 runs of 5)."""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "state.db"), str(tmp_path), str(turns)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exited"
    assert "Event loop is closed" not in result.stderr


@pytest.fixture
def frozen_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody, root included, may create files in (``chattr +i``)."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("chattr (e2fsprogs) is not installed: cannot make a folder unwritable for root")
    folder = tmp_path / "frozen"
    folder.mkdir()
    frozen = subprocess.run([chattr, "+i", str(folder)], capture_output=True, text=True, check=False)
    if frozen.returncode != 0:
        pytest.skip(f"chattr +i is not available here: {frozen.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)


async def test_a_failed_open_leaves_no_thread(frozen_folder: Path) -> None:
    """A database that cannot be opened (its folder immutable, so the file cannot be
    created): StoreError, and the connection's thread has ended by then, so it cannot
    report into a closed loop later ("RuntimeError: Event loop is closed" after the
    one-line error, 1 run in 20 before)."""
    before = set(store_threads())
    for _ in range(20):
        try:
            await SQLiteStore(frozen_folder / "state.db").open()
        except StoreError as exc:
            left = set(store_threads()) - before  # at once: no turn of the loop in between
            assert "cannot open" in str(exc)
        else:  # pragma: no cover - the folder is immutable
            pytest.fail("opened a database in an immutable folder")
        assert not left
