"""One Runtime reconciles a store at a time (the runner lock)."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest
from helpers import settle

from reconcile import LockedError, Runtime
from reconcile.errors import StoreError
from reconcile.store.sqlite.claims import claim_file
from reconcile.testing import FakeClock, MemoryCloud, MemoryProvider


def runtime(db: Path, clock: FakeClock, **options: object) -> Runtime:
    """A Runtime over the memory provider on the fake clock."""
    return Runtime(
        db,
        providers=[MemoryProvider(MemoryCloud(clock=clock))],
        clock=clock,
        wall_clock=clock,
        **options,  # type: ignore[arg-type]
    )


class TestRunnerLock:
    """fail, wait, off."""

    async def test_a_second_runtime_fails_naming_the_first(self, db_path: Path, clock: FakeClock) -> None:
        """LockedError with the holder's pid; it leaves nothing open; once the first
        closes, a new one starts."""
        async with runtime(db_path, clock):
            second = runtime(db_path, clock)
            with pytest.raises(LockedError, match=r"pid \d+ on .* holds the runner lock") as caught:
                await second.start()
            assert caught.value.holder.startswith("pid ")
            assert not second.health().ready
        async with runtime(db_path, clock) as third:
            assert third.controllers

    async def test_a_standby_takes_over_when_the_first_stops(self, db_path: Path, clock: FakeClock) -> None:
        """runner_lock="wait": start() returns only after the holder closed."""
        first = runtime(db_path, clock)
        await first.start()
        standby = runtime(db_path, clock, runner_lock="wait")
        starting = asyncio.create_task(standby.start())
        await settle(lambda: clock.sleepers >= 1)
        clock.advance(0.5)
        await settle(lambda: clock.sleepers >= 1)
        assert not starting.done(), "still standing by"
        await first.close()
        clock.advance(0.5)
        await asyncio.wait_for(starting, 20)
        assert standby.controllers
        await standby.close()

    async def test_off_does_not_check(self, db_path: Path, clock: FakeClock) -> None:
        """runner_lock="off": for setups that coordinate otherwise."""
        async with runtime(db_path, clock), runtime(db_path, clock, runner_lock="off") as second:
            assert second.controllers

    def test_a_bad_setting_is_refused(self, db_path: Path, clock: FakeClock) -> None:
        """A typo fails at construction, not silently unlocked."""
        with pytest.raises(ValueError, match="runner_lock must be"):
            runtime(db_path, clock, runner_lock="maybe")


def test_the_lock_file_names_its_holder_and_dies_with_it(tmp_path: Path) -> None:
    """The holder line is readable by the next claimant; releasing frees it at once."""
    db = tmp_path / "state.db"
    held = claim_file(db, "runner")
    with pytest.raises(LockedError) as caught:
        claim_file(db, "runner")
    assert caught.value.holder == (tmp_path / "state.db.runner.lock").read_text().strip()
    held.release()
    held.release()  # idempotent
    claim_file(db, "runner").release()


def test_a_full_disk_names_the_lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No room to record the holder: a StoreError naming the lock file and the disk full."""

    def full(*_: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(
        StoreError, match=r"state\.db\.runner\.lock: cannot record the runner lock's holder \(disk full\)"
    ):
        claim_file(tmp_path / "state.db", "runner")


class TestLockFile:
    """The lock file goes with a clean release, and removing it never lets two hold it."""

    async def test_a_clean_exit_removes_the_lock_file(self, db_path: Path, clock: FakeClock) -> None:
        """After close(), no ``state.db.runner.lock`` is left beside the database."""
        lock = db_path.with_name(db_path.name + ".runner.lock")
        async with runtime(db_path, clock):
            assert lock.exists()
        assert not lock.exists()

    def test_a_claim_of_a_file_removed_under_it_tries_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A claimant whose open raced the previous holder's removal locks an unlinked
        file: it notices, lets go and claims the file the path names now, so a third
        claimant is refused instead of holding the claim beside it."""
        db = tmp_path / "state.db"
        lock = db.with_name("state.db.runner.lock")
        lock.write_text("")
        stale = os.open(lock, os.O_RDWR)
        lock.unlink()  # the previous holder's release
        real_open = os.open
        opened: list[int] = []

        def racing_open(path: object, flags: int, mode: int = 0o777) -> int:
            fd = stale if not opened else real_open(path, flags, mode)  # type: ignore[arg-type]
            opened.append(fd)
            return fd

        monkeypatch.setattr(os, "open", racing_open)
        claim = claim_file(db, "runner")
        monkeypatch.undo()
        assert opened[0] == stale
        assert len(opened) == 2, "it tried again"
        assert lock.exists()
        with pytest.raises(LockedError):
            claim_file(db, "runner")
        claim.release()
