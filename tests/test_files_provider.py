"""The files provider: conformance for File and Directory, atomic writes, drift with a
diff, confinement to the roots at admission and at write time."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from providers.files import FilesProvider
from providers.files.marking import PARENT, read_mark, write_mark
from reconcile import InvalidError, KindRegistry, Resource, Runtime, connect
from reconcile.testing import FakeClock
from reconcile.testing.conformance import CHECKS, Harness

API = "files.reconcile.dev/v1"


def file_manifest(name: str, path: str | None = None, **spec: Any) -> dict[str, Any]:
    """A File manifest; the path defaults to ``<name>.txt``."""
    return {
        "api_version": API,
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": path or f"{name}.txt", "content": "hello\n", **spec},
    }


def directory_manifest(name: str, path: str | None = None, **spec: Any) -> dict[str, Any]:
    """A Directory manifest; the path defaults to the name."""
    return {"api_version": API, "kind": "Directory", "metadata": {"name": name}, "spec": {"path": path or name, **spec}}


class FileOutside:
    """Reaches the files directly."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the file is there."""
        return Path(resource.spec.path).is_file()

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """rm."""
        Path(resource.spec.path).unlink()

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """Edit it by hand (os.open keeps the owner mark, as an editor saving in place does)."""
        Path(resource.spec.path).write_text("edited by hand\n")

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """A file at the manifest's path, written by somebody else."""
        target = self.root / manifest["spec"]["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("theirs\n")

    async def count(self) -> int:
        """Regular files under the root (temporaries included: a leak counts)."""
        return sum(1 for p in self.root.rglob("*") if p.is_file())


class DirectoryOutside(FileOutside):
    """Reaches the folders directly."""

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the folder is there."""
        return Path(resource.spec.path).is_dir()

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """rmdir."""
        Path(resource.spec.path).rmdir()

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """chmod by hand."""
        Path(resource.spec.path).chmod(0o700)

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """A folder at the manifest's path, made by somebody else."""
        (self.root / manifest["spec"]["path"]).mkdir(parents=True)

    async def count(self) -> int:
        """Folders under the root."""
        return sum(1 for p in self.root.rglob("*") if p.is_dir())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The folder the provider may write under."""
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_file_conformance(check: Any, root: Path, tmp_path: Path) -> None:
    """File passes every conformance check."""
    config = {"roots": [str(root)]}
    await check(Harness(FilesProvider(), FileOutside(root), file_manifest, tmp_path / "state.db", config))


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_directory_conformance(check: Any, root: Path, tmp_path: Path) -> None:
    """Directory passes every conformance check."""
    config = {"roots": [str(root)]}
    harness = Harness(FilesProvider(), DirectoryOutside(root), directory_manifest, tmp_path / "state.db", config)
    await check(harness)
