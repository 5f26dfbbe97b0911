"""The files provider: conformance for File and Directory, atomic writes, drift with a
diff, confinement to the roots at admission and at write time."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import DEADLINE

from reconcile import InvalidError, KindRegistry, Resource, connect
from reconcile.controller.planning import plan
from reconcile.testing import FakeClock, let_run
from reconcile.testing.conformance import CHECKS, Harness
from reconcile_providers.files import FilesProvider
from reconcile_providers.files.client import FilesClient
from reconcile_providers.files.marking import PARENT, read_mark, write_mark

API = "files.reconcile.dev/v1"


def file_manifest(name: str, path: str | None = None, **spec: Any) -> dict[str, Any]:
    """A File manifest; the path defaults to ``<name>.txt``."""
    return {
        "apiVersion": API,
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": path or f"{name}.txt", "content": "hello\n", **spec},
    }


def directory_manifest(name: str, path: str | None = None, **spec: Any) -> dict[str, Any]:
    """A Directory manifest; the path defaults to the name."""
    return {
        "apiVersion": API,
        "kind": "Directory",
        "metadata": {"name": name},
        "spec": {"path": path or name, **spec},
    }


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


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_file_conformance(check: Any, root: Path, tmp_path: Path) -> None:
    """File passes every conformance check."""
    config = {"roots": [str(root)]}
    await check(Harness(FilesProvider(), FileOutside(root), file_manifest, tmp_path / "state.db", config))


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_directory_conformance(check: Any, root: Path, tmp_path: Path) -> None:
    """Directory passes every conformance check."""
    config = {"roots": [str(root)]}
    harness = Harness(
        FilesProvider(), DirectoryOutside(root), directory_manifest, tmp_path / "state.db", config
    )
    await check(harness)


async def admit(root: Path, tmp_path: Path, manifest: dict[str, Any], origin: Path | None = None) -> Any:
    """Apply through a client whose files provider may write under ``root``."""
    async with connect(tmp_path / "state.db", provider_config={"files": {"roots": [str(root)]}}) as client:
        return await client.apply(manifest, origin=origin)


async def rejected(root: Path, tmp_path: Path, manifest: dict[str, Any], origin: Path | None = None) -> str:
    """The one-line reason admission refused ``manifest``, after checking nothing was stored."""
    db = tmp_path / "state.db"
    async with connect(db, provider_config={"files": {"roots": [str(root)]}}) as client:
        with pytest.raises(InvalidError) as caught:
            await client.apply(manifest, origin=origin)
        assert await client.revision() == 0
    assert not any(root.iterdir()), "admission wrote into the root"
    return str(caught.value)


class TestAdmission:
    """What admission stores and what it refuses."""

    async def test_relative_path_resolves_against_the_root(self, root: Path, tmp_path: Path) -> None:
        """A relative path is stored absolute, with its root and the canonical mode."""
        obj = await admit(root, tmp_path, file_manifest("a", "site/a.txt", mode="644"))
        assert obj.spec.path == str(root / "site" / "a.txt")
        assert obj.spec.root == str(root)
        assert obj.spec.mode == "0644"

    async def test_dot_dot_escaping_is_refused(self, root: Path, tmp_path: Path) -> None:
        """``..`` out of the root: field path and reason."""
        message = await rejected(root, tmp_path, file_manifest("a", "../outside.txt"))
        assert "spec.path" in message
        assert "escapes the root" in message

    async def test_absolute_path_elsewhere_is_refused(self, root: Path, tmp_path: Path) -> None:
        """An absolute path outside every root."""
        message = await rejected(root, tmp_path, file_manifest("a", "/etc/reconcile-test.txt"))
        assert "spec.path: /etc/reconcile-test.txt is outside the allowed roots" in message

    async def test_symlink_out_is_refused(self, root: Path, tmp_path: Path) -> None:
        """A symlink inside the root that points out of it."""
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (root / "link").symlink_to(outside)
        db = tmp_path / "state.db"
        async with connect(db, provider_config={"files": {"roots": [str(root)]}}) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(file_manifest("a", "link/a.txt"))
            assert await client.revision() == 0
        assert "through the symlink" in str(caught.value)
        assert not any(outside.iterdir())

    async def test_root_outside_the_allowed_is_refused(self, root: Path, tmp_path: Path) -> None:
        """A manifest cannot widen its own confinement by naming a root."""
        message = await rejected(root, tmp_path, file_manifest("a", "a.txt", root="/"))
        assert "spec.root: / is outside the allowed roots" in message

    @pytest.mark.parametrize("mode", ["0999", "rwxr-xr-x", "12345", ""])
    async def test_mode_must_be_octal(self, root: Path, tmp_path: Path, mode: str) -> None:
        """A mode that is not an octal permission."""
        message = await rejected(root, tmp_path, file_manifest("a", mode=mode))
        assert "spec.mode" in message
        assert "not an octal permission" in message

    async def test_numeric_mode_is_refused(self, root: Path, tmp_path: Path) -> None:
        """YAML's ``mode: 0644`` arrives as the number 420: refused, not misread."""
        message = await rejected(root, tmp_path, file_manifest("a", mode=420))
        assert "spec.mode" in message

    async def test_content_and_source_together_are_refused(self, root: Path, tmp_path: Path) -> None:
        """At most one of content, contentBase64, source."""
        source = tmp_path / "page.html"
        source.write_text("<p>hi</p>")
        message = await rejected(root, tmp_path, file_manifest("a", source=str(source)))
        assert "spec.source: content and source are mutually exclusive" in message
        manifest = file_manifest("a", source=str(source), contentBase64="aGk=")
        del manifest["spec"]["content"]
        message = await rejected(root, tmp_path, manifest)
        assert "spec.source: contentBase64 and source are mutually exclusive" in message

    async def test_missing_source_is_refused(self, root: Path, tmp_path: Path) -> None:
        """A source file that does not exist, named relative to the manifest."""
        manifest = file_manifest("a")
        del manifest["spec"]["content"]
        manifest["spec"]["source"] = "missing.html"
        message = await rejected(root, tmp_path, manifest, origin=tmp_path / "site.yaml")
        assert f"spec.source: {tmp_path / 'missing.html'} does not exist" in message

    async def test_source_resolves_against_the_manifest(self, root: Path, tmp_path: Path) -> None:
        """A relative source is stored as the absolute path next to the manifest."""
        (tmp_path / "page.html").write_text("<p>hi</p>")
        manifest = file_manifest("a")
        del manifest["spec"]["content"]
        manifest["spec"]["source"] = "page.html"
        obj = await admit(root, tmp_path, manifest, origin=tmp_path / "site.yaml")
        assert obj.spec.source == str(tmp_path / "page.html")

    async def test_bad_base64_is_refused(self, root: Path, tmp_path: Path) -> None:
        """contentBase64 must decode."""
        manifest = file_manifest("a")
        del manifest["spec"]["content"]
        manifest["spec"]["contentBase64"] = "not base64!"
        message = await rejected(root, tmp_path, manifest)
        assert "spec.contentBase64: not valid base64" in message

    async def test_path_is_immutable(self, root: Path, tmp_path: Path) -> None:
        """Moving a File is refused (the old file would be left behind): delete, re-apply."""
        async with connect(
            tmp_path / "state.db", provider_config={"files": {"roots": [str(root)]}}
        ) as client:
            await client.apply(file_manifest("a", "a.txt"))
            revision = await client.revision()
            with pytest.raises(InvalidError, match=r"spec\.path: is immutable once created"):
                await client.apply(file_manifest("a", "b.txt"))
            assert await client.revision() == revision
            changed = await client.apply(file_manifest("a", "a.txt", content="new\n"))
            assert changed.spec.content == "new\n"

    async def test_without_roots_the_manifest_folder_is_the_root(self, tmp_path: Path) -> None:
        """No configured roots: the folder of the manifest confines the path."""
        async with connect(tmp_path / "state.db") as client:
            obj = await client.apply(file_manifest("a", "out/a.txt"), origin=tmp_path / "m.yaml")
            assert obj.spec.root == str(tmp_path)
            with pytest.raises(InvalidError, match=r"spec\.path: no root directory"):
                await client.apply(file_manifest("b"))


async def until_async(clock: FakeClock, predicate: Callable[[], Awaitable[bool]]) -> None:
    """Let the runtime work, a fake second at a time, until ``predicate`` holds."""
    async with asyncio.timeout(DEADLINE):
        while not await predicate():
            clock.advance(1)
            for turn in range(50):
                await let_run(turn)


async def until(clock: FakeClock, predicate: Callable[[], bool]) -> None:
    """:func:`until_async` for a plain predicate."""

    async def holds() -> bool:
        return predicate()

    await until_async(clock, holds)


async def recorded(runtime: Any, name: str, event_type: str) -> bool:
    """Whether File ``name``'s history holds an event of ``event_type``."""
    return any(e.type == event_type for e in await runtime.client.history("File", name))


class TestConverging:
    """Files written, repaired, removed."""

    async def test_atomic_write_with_mode_and_mark(self, running: Any, root: Path) -> None:
        """The file has its content and mode, carries our mark, and no temporary is left."""
        runtime, _ = running
        await runtime.apply(file_manifest("a", "deep/er/a.txt", mode="0600"))
        obj = await asyncio.wait_for(runtime.wait_ready("File", "a"), 20)
        target = root / "deep" / "er" / "a.txt"
        assert target.read_text() == "hello\n"
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert read_mark(str(target)) == obj.metadata.uid
        assert read_mark(str(root / "deep")) == PARENT
        assert sorted(p.name for p in target.parent.iterdir()) == ["a.txt"]
        assert obj.status.at_provider["size"] == 6

    async def test_drift_is_recorded_with_a_diff(self, running: Any, root: Path) -> None:
        """A hand edit is repaired on the next poll; DriftDetected says what changed."""
        runtime, clock = running
        await runtime.apply(file_manifest("a", content="one\ntwo\n"))
        await asyncio.wait_for(runtime.wait_ready("File", "a"), 20)
        (root / "a.txt").write_text("one\nTWO\n")
        clock.advance(90)
        await until(clock, lambda: (root / "a.txt").read_text() == "one\ntwo\n")
        # The repair is recorded with its outcome, in the write after the update.
        await until_async(clock, lambda: recorded(runtime, "a", "UpdateSucceeded"))
        history = await runtime.client.history("File", "a")
        drift = [e for e in history if e.type == "DriftDetected"]
        assert drift
        assert drift[0].data is not None
        assert drift[0].data["message"].splitlines() == [
            "content: +1 -1 lines (- on disk, + declared)",
            "-TWO",
            "+two",
        ]

    async def test_sensitive_content_stays_out_of_the_log(
        self, running: Any, root: Path, tmp_path: Path
    ) -> None:
        """sensitive: drift is summarised by sizes, no digest, nothing of either content."""
        runtime, clock = running
        secret = tmp_path / "secret.env"
        secret.write_text("PASSWORD=hunter2\n")
        manifest = file_manifest("env", "app.env", sensitive=True)
        del manifest["spec"]["content"]
        manifest["spec"]["source"] = str(secret)
        await runtime.apply(manifest)
        obj = await asyncio.wait_for(runtime.wait_ready("File", "env"), 20)
        assert "sha256" not in obj.status.at_provider
        (root / "app.env").write_text("PASSWORD=changed-by-hand\n")
        clock.advance(90)
        await until(clock, lambda: (root / "app.env").read_text() == "PASSWORD=hunter2\n")
        await until_async(clock, lambda: recorded(runtime, "env", "UpdateSucceeded"))
        history = await runtime.client.history("File", "env")
        drift = [e for e in history if e.type == "DriftDetected"]
        assert drift
        assert drift[0].data is not None
        assert (
            drift[0].data["message"] == "content: 25 bytes on disk, 17 bytes declared (sensitive: not shown)"
        )
        log = repr([(e.data, e.object) for e in history])
        assert "hunter2" not in log
        assert "changed-by-hand" not in log

    async def test_directory_adopts_a_parent_made_for_a_file(self, running: Any, root: Path) -> None:
        """A File applied before its Directory: the folder made as a parent becomes the Directory's."""
        runtime, _ = running
        await runtime.apply(file_manifest("page", "site/index.html"))
        await asyncio.wait_for(runtime.wait_ready("File", "page"), 20)
        await runtime.apply(directory_manifest("site", mode="0750"))
        obj = await asyncio.wait_for(runtime.wait_ready("Directory", "site"), 20)
        assert read_mark(str(root / "site")) == obj.metadata.uid
        assert stat.S_IMODE((root / "site").stat().st_mode) == 0o750

    async def test_a_parent_taken_over_is_created_once_in_the_history(
        self, running: Any, root: Path, tmp_path: Path
    ) -> None:
        """The File makes the folder before its Directory reconciles: the Directory's
        history is one CreateRequested/CreateSucceeded, and plan has nothing to adopt."""
        runtime, clock = running
        await runtime.apply(file_manifest("page", "public/index.html"))
        await asyncio.wait_for(runtime.wait_ready("File", "page"), 20)
        assert read_mark(str(root / "public")) == PARENT
        await runtime.apply(directory_manifest("public"))
        obj = await asyncio.wait_for(runtime.wait_ready("Directory", "public"), 20)
        for _ in range(3):  # polls after the take-over record nothing more
            clock.advance(90)
            for turn in range(50):
                await let_run(turn)
        obj = await runtime.client.get("Directory", "public")
        assert read_mark(str(root / "public")) == obj.metadata.uid
        controller = [
            e.type
            for e in await runtime.client.history("Directory", "public")
            if e.type.endswith(("Requested", "Succeeded", "Failed", "Detected", "Adopted"))
            and e.type != "DeletionRequested"
        ]
        assert controller == ["CreateRequested", "CreateSucceeded"]
        client = FilesClient({"roots": [str(root)], "source_roots": [str(tmp_path)]})
        assert (await plan(obj, client)).action == "nothing"

    async def test_an_observe_only_directory_sees_a_parent_folder(self, running: Any, root: Path) -> None:
        """ObserveOnly on a folder made as a File's parent: it exists, and stays unmarked."""
        runtime, _ = running
        await runtime.apply(file_manifest("page", "public/index.html"))
        await asyncio.wait_for(runtime.wait_ready("File", "page"), 20)
        manifest = directory_manifest("public")
        manifest["metadata"]["annotations"] = {"reconcile.dev/management-policy": "ObserveOnly"}
        await runtime.apply(manifest)
        obj = await asyncio.wait_for(runtime.wait_ready("Directory", "public"), 20)
        ready = obj.status.condition("Ready")
        assert ready is not None
        assert ready.status == "True"
        assert read_mark(str(root / "public")) == PARENT

    async def test_ensure_absent_removes_the_file(self, running: Any, root: Path) -> None:
        """ensure: absent deletes a file that is there, whoever wrote it."""
        runtime, _ = running
        (root / "stale.txt").write_text("old")
        manifest = file_manifest("stale", "stale.txt", ensure="absent")
        del manifest["spec"]["content"]
        await runtime.apply(manifest)
        await asyncio.wait_for(runtime.wait_ready("File", "stale"), 20)
        assert not (root / "stale.txt").exists()

    async def test_symlink_planted_after_admission_stops_the_write(
        self, running: Any, root: Path, tmp_path: Path
    ) -> None:
        """A folder swapped for a symlink out of the root: Synced=False, nothing written outside."""
        runtime, clock = running
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        manifest = file_manifest("a", "sub/a.txt")
        manifest["metadata"]["annotations"] = {"reconcile.dev/paused": "true"}
        await runtime.apply(manifest)
        (root / "sub").symlink_to(outside)
        await runtime.client.patch("File", "a", {"metadata": {"annotations": {"reconcile.dev/paused": None}}})
        synced = None

        async def refused() -> bool:
            nonlocal synced
            synced = (await runtime.client.get("File", "a")).status.condition("Synced")
            return synced is not None and synced.reason == "ReconcileError"

        await until_async(clock, refused)
        assert synced is not None
        assert "through the symlink" in synced.message
        assert not any(outside.iterdir())


def test_marks_survive_on_this_filesystem(tmp_path: Path) -> None:
    """The owner mark round-trips (the provider's precondition on this machine)."""
    target = tmp_path / "f"
    target.write_text("x")
    write_mark(str(target), "uid-1")
    assert read_mark(str(target)) == "uid-1"
    assert read_mark(str(tmp_path / "missing")) is None


def test_registry_knows_the_files_provider() -> None:
    """The entry point registers File and Directory under the provider name ``files``."""
    registry = KindRegistry.from_entry_points()
    file_kind = registry.resolve("file")
    assert registry.provider_of(file_kind) == "files"
    assert registry.resolve("dir").kind == "Directory"
