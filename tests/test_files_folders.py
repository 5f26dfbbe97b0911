"""The folders a files client keeps open between calls (reconcile_providers.files.folders):
what was kept is used only while it is still the folder at that place under the root. A
folder moved away (out of the root, too) and replaced, by a symlink or by another folder,
and a root moved away and replaced by a symlink: nothing is read from or written to the
moved folder, and the symlink is refused as an uncached walk refuses it. And a file read
in one call whatever its stat said."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from test_files_confinement import CANARY, admitted, file_manifest, snapshot

from reconcile.errors import PermanentError, TransientError
from reconcile_providers.files.client import FilesClient
from reconcile_providers.files.folders import Folders
from reconcile_providers.files.operations import read_file, write_file
from reconcile_providers.files.walking import read_all


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """A root holding ``sub/x.txt`` and an empty folder outside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "x.txt").write_text("inside\n")
    outside.mkdir()
    return root, outside


async def kept_client(tmp_path: Path, root: Path, content: str = "inside\n") -> tuple[FilesClient, Any]:
    """A client that has read ``sub/x.txt`` (so it keeps the root and ``sub`` open), and
    the File object."""
    config = {"roots": [str(root)]}
    obj = await admitted(tmp_path, file_manifest("x", "sub/x.txt", content=content), config)
    client = FilesClient(config)
    await client.observe(obj)
    return client, obj


def open_descriptors() -> int:
    """How many descriptors this process holds."""
    return len(list(Path("/proc/self/fd").iterdir()))


class TestRevalidated:
    """A kept folder is used only while it is still the one at its place."""

    async def test_a_kept_folder_moved_out_and_replaced_by_a_symlink_is_not_used(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """``sub`` moved out of the root and a symlink to it put in its place: observing
        and writing refuse the symlink; the moved folder is neither read nor written."""
        root, outside = site
        client, obj = await kept_client(tmp_path, root)
        moved = outside / "moved"
        (root / "sub").rename(moved)
        (moved / "x.txt").write_text(f"{CANARY}\n")
        (root / "sub").symlink_to(moved)
        before = snapshot(outside)
        with pytest.raises(TransientError, match="leads through the symlink"):
            await client.observe(obj)
        with pytest.raises(TransientError, match="leads through the symlink"):
            await client.create(obj)
        assert snapshot(outside) == before
        await client.close()

    async def test_a_kept_folder_replaced_by_another_folder_is_written_in_the_new_one(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """``sub`` moved out of the root and a new ``sub`` made: the write lands in the new
        folder, at the path; the moved one keeps what it held."""
        root, outside = site
        (root / "sub" / "x.txt").unlink()
        client, obj = await kept_client(tmp_path, root, content="mine\n")
        await client.create(obj)
        (root / "sub").rename(outside / "moved")
        (root / "sub").mkdir()
        before = snapshot(outside)
        assert not (await client.observe(obj)).exists
        await client.create(obj)
        assert (root / "sub" / "x.txt").read_text() == "mine\n"
        assert snapshot(outside) == before
        await client.close()

    async def test_a_kept_root_moved_away_and_replaced_by_a_symlink_is_refused(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """The root itself moved away and a symlink to it put in its place: the root is not
        opened through the symlink, and the moved root is not written."""
        root, outside = site
        client, obj = await kept_client(tmp_path, root)
        moved = outside / "old-root"
        root.rename(moved)
        root.symlink_to(moved)
        before = snapshot(outside)
        with pytest.raises(PermanentError, match="cannot open its root"):
            await client.create(obj)
        with pytest.raises(PermanentError, match="cannot open its root"):
            await client.observe(obj)
        assert snapshot(outside) == before
        await client.close()

    async def test_a_folder_removed_and_made_again_is_followed(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """A kept folder removed: the file is missing; made again, it is found there."""
        root, _ = site
        client, obj = await kept_client(tmp_path, root)
        (root / "sub" / "x.txt").unlink()
        (root / "sub").rmdir()
        assert not (await client.observe(obj)).exists
        (root / "sub").mkdir()
        (root / "sub" / "x.txt").write_text("inside\n")
        assert (await client.observe(obj)).up_to_date
        await client.close()


class TestKeeping:
    """How many are kept, by how many threads."""

    def test_the_number_kept_is_bounded_and_close_releases_them(self, tmp_path: Path) -> None:
        """Reading through 40 folders with room for 8 keeps at most 8 (and the root)
        open; close releases every one."""
        root = tmp_path / "root"
        for i in range(40):
            (root / f"d{i}").mkdir(parents=True)
            (root / f"d{i}" / "x").write_text(f"{i}\n")
        folders = Folders(limit=8)
        start = open_descriptors()
        for i in range(40):
            found = read_file(str(root), str(root / f"d{i}" / "x"), folders=folders)
            assert found is not None
            assert found.data == f"{i}\n".encode()
        assert open_descriptors() - start <= 8
        folders.close()
        assert open_descriptors() == start

    def test_threads_sharing_kept_folders_write_every_file(self, tmp_path: Path) -> None:
        """Eight threads writing 50 files each into five folders through one Folders:
        every file holds its bytes, and close releases every descriptor."""
        root = tmp_path / "root"
        folders = Folders(limit=3)  # fewer than the folders: kept ones are closed meanwhile
        start = open_descriptors()
        errors: list[BaseException] = []

        def writer(t: int) -> None:
            try:
                for i in range(50):
                    path = str(root / f"d{i % 5}" / f"f{t}-{i}")
                    write_file(
                        str(root), path, f"{t}-{i}".encode(), (0o644, "me"), lambda _: None, folders=folders
                    )
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for t in range(8):
            for i in range(50):
                assert (root / f"d{i % 5}" / f"f{t}-{i}").read_bytes() == f"{t}-{i}".encode()
        folders.close()
        assert open_descriptors() == start


class TestReadAll:
    """A file is read whole whatever its stat said: grown, shrunk or empty."""

    @pytest.mark.parametrize(("said", "holds"), [(3, b"abc"), (3, b"abcdef" * 20000), (10, b"ab"), (0, b"")])
    def test_what_the_file_holds_when_read(self, tmp_path: Path, said: int, holds: bytes) -> None:
        """What the file holds, whichever size ``fstat`` said before."""
        path = tmp_path / "x"
        path.write_bytes(holds)
        handle = os.open(path, os.O_RDONLY)
        try:
            assert read_all(handle, said) == holds
        finally:
            os.close(handle)
