"""The files provider after a crash and beside concurrent work: temporaries left by a
killed writer are swept (and nothing else is), and a folder made as a file's parent is
never seen without its mark."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import checkout_path
from test_files_provider import directory_manifest, until_async

from reconcile import NotFoundError, NotOwnedError, ObjectMeta, Resource, TransientError
from reconcile_providers.files import operations, walking
from reconcile_providers.files.client import FilesClient
from reconcile_providers.files.kinds import FileSpec
from reconcile_providers.files.marking import PARENT, read_mark, write_mark
from reconcile_providers.files.operations import write_file
from reconcile_providers.files.sweeping import TEMPORARY, sweep

CRASHING_WRITER = """
import os, sys
from reconcile_providers.files.walking import make_temporary_file
folder = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
with make_temporary_file(folder, "f.bin", sys.argv[2]) as (handle, temporary):
    os.write(handle, b"half")
    print(temporary, flush=True)
    os.kill(os.getpid(), 9)
"""


def crash_while_writing(folder: Path, mark: str) -> str:
    """Kill a process in the middle of a write into ``folder``; the temporary's name."""
    result = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(folder), mark],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent.parent,
        timeout=60,
    )
    assert result.returncode == -9, result.stderr
    return result.stdout.strip()


class TestSweeping:
    """Our marked, unlocked temporaries go; nothing else does."""

    async def test_a_directory_with_a_crashed_write_in_it_can_be_deleted(
        self, running: Any, root: Path
    ) -> None:
        """A writer killed mid-write into a Directory's folder: deleting the Directory
        sweeps the temporary and succeeds."""
        runtime, clock = running
        await runtime.apply(directory_manifest("d10"))
        obj = await asyncio.wait_for(runtime.wait_ready("Directory", "d10"), 20)
        leftover = crash_while_writing(root / "d10", obj.metadata.uid)
        assert (root / "d10" / leftover).exists()
        await runtime.client.delete("Directory", "d10")

        async def gone() -> bool:
            try:
                await runtime.client.get("Directory", "d10")
            except NotFoundError:
                return True
            return False

        await until_async(clock, gone)
        assert not (root / "d10").exists()

    def test_only_marked_and_abandoned_temporaries_go(self, tmp_path: Path) -> None:
        """Swept: our crashed write. Kept: an unmarked file of the same shape, a marked one
        whose writer still holds its lock, and ordinary files."""
        crashed = crash_while_writing(tmp_path, "uid-1")
        foreign = tmp_path / ".notes.txt.abcdefgh.tmp"
        foreign.write_text("somebody else's")
        busy = tmp_path / ".g.bin.12345678.tmp"
        busy.write_text("in progress")
        write_mark(str(busy), "uid-2")
        plain = tmp_path / "page.html"
        plain.write_text("x")
        write_mark(str(plain), "uid-3")
        holder = os.open(busy, os.O_RDONLY)
        folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)
            assert sweep(folder) == [crashed]
        finally:
            os.close(folder)
            os.close(holder)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([foreign.name, busy.name, "page.html"])


class TestSlot:
    """A killed write's temporary is taken back by the next write or delete of the same
    entry, even by a process that swept the folder long before the crash."""

    def test_the_next_write_of_the_entry_takes_it_back(self, tmp_path: Path) -> None:
        """A writer that swept the folder before the crash (its sweeper does nothing now)
        still takes the crashed write's slot back when it writes the same entry."""
        crashed = crash_while_writing(tmp_path, "uid-1")
        assert crashed == walking.slot_name("f.bin")
        assert (tmp_path / crashed).read_bytes() == b"half"
        # A sweeper that does nothing: this writer swept the folder before the crash.
        write_file(str(tmp_path), str(tmp_path / "f.bin"), b"whole", (0o644, "uid-1"), lambda _: None)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]
        assert (tmp_path / "f.bin").read_bytes() == b"whole"

    def test_a_delete_of_the_entry_takes_it_back(self, tmp_path: Path) -> None:
        """A create killed before its rename, then the object deleted: nothing left."""
        crash_while_writing(tmp_path, "uid-1")
        operations.remove_file(str(tmp_path), str(tmp_path / "f.bin"), "uid-1")
        assert list(tmp_path.iterdir()) == []

    def test_a_slot_held_by_a_live_writer_is_left_alone(self, tmp_path: Path) -> None:
        """The slot of a write in progress (its lock held) stays; the second write goes
        through a random temporary and lands."""
        slot = tmp_path / walking.slot_name("f.bin")
        slot.write_text("in progress")
        write_mark(str(slot), "uid-2")
        holder = os.open(slot, os.O_RDONLY)
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)
            write_file(str(tmp_path), str(tmp_path / "f.bin"), b"mine", (0o644, "uid-1"), lambda _: None)
            operations.remove_file(str(tmp_path), str(tmp_path / "f.bin"), "uid-1")
        finally:
            os.close(holder)
        assert sorted(p.name for p in tmp_path.iterdir()) == [slot.name]
        assert slot.read_text() == "in progress"

    def test_an_unmarked_file_in_the_slot_is_not_ours(self, tmp_path: Path) -> None:
        """Somebody's file of the slot's name stays; the write goes through another name."""
        slot = tmp_path / walking.slot_name("f.bin")
        slot.write_text("somebody's")
        write_file(str(tmp_path), str(tmp_path / "f.bin"), b"mine", (0o644, "uid-1"), lambda _: None)
        assert slot.read_text() == "somebody's"
        assert (tmp_path / "f.bin").read_bytes() == b"mine"
        assert not [p for p in tmp_path.iterdir() if p.name not in {"f.bin", slot.name}]


def test_parents_are_never_seen_unmarked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whenever a folder made as a file's parent is being marked, every folder visible
    in the root already carries its ``parent`` mark (a Directory observing it in that
    instant would otherwise call it somebody else's): the mark goes on under a
    temporary name, before the folder appears."""
    root = tmp_path / "root"
    root.mkdir()
    unmarked: list[str] = []

    def look_then_mark(target: str | int, mark: str) -> None:
        for entry in os.scandir(root):
            visible = entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
            if visible and read_mark(entry.path) != PARENT:
                unmarked.append(entry.name)
        write_mark(target, mark)

    monkeypatch.setattr(walking, "write_mark", look_then_mark)
    for i in range(3):
        write_file(str(root), str(root / f"d{i}" / "f.txt"), b"x", (0o644, "uid"), lambda _: None)
    assert sorted(p.name for p in root.iterdir()) == ["d0", "d1", "d2"]
    assert unmarked == []


async def test_a_full_disk_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC while writing: a TransientError that says "disk full" and names the path,
    and no temporary left behind."""
    root = tmp_path / "root"
    root.mkdir()
    target = root / "a.txt"
    spec = FileSpec(path=str(target), content="x", root=str(root))
    obj = Resource("files.reconcile.dev/v1", "File", ObjectMeta(name="a", uid="u"), spec, None)

    def full(*_: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(TransientError, match=rf"{target}: disk full"):
        await FilesClient({"roots": [str(root)]}).create(obj)
    assert list(root.iterdir()) == []


def test_a_create_racing_another_writer_does_not_replace_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two objects (or somebody by hand) creating one path at once: the one that comes
    second finds the first's file and is refused (NotOwned), leaving it as it was,
    instead of replacing it and recording a create it does not own."""
    root = tmp_path / "root"
    root.mkdir()
    target = root / "same.txt"
    real = walking.make_temporary_file

    @contextlib.contextmanager
    def raced(folder: int, name: str, mark: str) -> Iterator[tuple[int, str]]:
        target.write_text("the other's\n")  # the other writer wins while we prepare
        write_mark(str(target), "uid-other")
        with real(folder, name, mark) as prepared:
            yield prepared

    monkeypatch.setattr(operations, "make_temporary_file", raced)
    with pytest.raises(NotOwnedError, match="not created by this resource"):
        write_file(str(root), str(target), b"mine\n", (0o644, "uid-mine"), lambda _: None)
    assert target.read_text() == "the other's\n"
    assert read_mark(str(target)) == "uid-other"
    assert sorted(p.name for p in root.iterdir()) == ["same.txt"]


def test_sigkill_mid_convergence_leaves_no_temporary(tmp_path: Path) -> None:
    """``reconcile run`` SIGKILLed twice while it converges 1,200 files, and a writer
    killed mid-write besides: the next run converges and no temporary is left anywhere
    under the root (each folder is swept before this process first writes into it)."""
    root, db, manifests = tmp_path / "root", tmp_path / "state.db", tmp_path / "manifests"
    www = root / "www"
    manifests.mkdir()
    count = 1200
    documents = [
        "apiVersion: files.reconcile.dev/v1\nkind: File\n"
        f"metadata: {{name: f{i}}}\nspec: {{path: www/f{i}.txt, content: '{'x' * 512}{i}'}}\n"
        for i in range(count)
    ]
    (manifests / "site.yaml").write_text("---\n".join(documents))
    env = {**os.environ, "PYTHONPATH": checkout_path()}
    cli = [sys.executable, "-m", "reconcile", "--db", str(db), "--root", str(root)]
    applied = subprocess.run([*cli, "apply", "-f", str(manifests)], env=env, capture_output=True, check=False)
    assert applied.returncode == 0, applied.stderr
    for wanted in (count // 10, count // 3):
        runner = subprocess.Popen(
            [*cli, "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 120
            while not (www.is_dir() and len(list(www.iterdir())) >= wanted):
                assert time.monotonic() < deadline, f"fewer than {wanted} files written in 120 s"
                assert runner.poll() is None, "reconcile run exited on its own"
                time.sleep(0.005)  # polling the folder for progress, not waiting for a result
        finally:
            runner.kill()
            runner.wait(timeout=60)
    crash_while_writing(www, "3d5ba1c2-0000-4000-8000-000000000000")
    (www / "f0.txt").unlink()  # drift: the next run writes into www for certain
    assert [p for p in www.iterdir() if TEMPORARY.fullmatch(p.name)], "a temporary to sweep"
    again = subprocess.run(
        [*cli, "run", "--once", "--timeout", "120"], env=env, capture_output=True, check=False
    )
    assert again.returncode == 0, again.stderr
    leftovers = [str(p) for p in root.rglob("*") if TEMPORARY.fullmatch(p.name)]
    assert leftovers == []
    assert len(list(www.glob("f*.txt"))) == count
