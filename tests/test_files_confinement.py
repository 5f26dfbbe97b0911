"""The files provider under attack: a folder swapped for a symlink in a tight loop while
content is written, a symlinked parent while observing, sources outside their roots,
special files and swapped sources, special mode bits; and a property test that random
trees of folders, symlinks and special files never lead to a read or write outside the
roots."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import hypothesis
import pytest
from helpers import DEADLINE
from hypothesis import strategies as st
from test_files_provider import until_async

from reconcile import InvalidError, ObjectMeta, PermanentError, Resource, Runtime, connect
from reconcile.errors import NotOwnedError, ReconcileError, TransientError
from reconcile.testing import FakeClock, let_run
from reconcile_providers.files import DirectorySpec, FileSpec, FilesProvider
from reconcile_providers.files.client import FilesClient
from reconcile_providers.files.operations import read_file
from reconcile_providers.files.walking import RENAME_EXCHANGE, rename_at

API = "files.reconcile.dev/v1"
CANARY = "canary-of-a-0600-file"
#: Real seconds a swapping thread runs: long enough for thousands of swaps.
SWAP_SECONDS = 1.5
#: The runtime's poll interval (fake seconds) in the swap-back tests, and its jitter.
POLL, JITTER = 10.0, 0.1


def file_manifest(name: str, path: str, **spec: Any) -> dict[str, Any]:
    """A File manifest."""
    return {"apiVersion": API, "kind": "File", "metadata": {"name": name}, "spec": {"path": path, **spec}}


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """A root to write under and a folder outside it holding a 0600 secret."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    secret = outside / "x.txt"
    secret.write_text(f"{CANARY}\n")
    secret.chmod(0o600)
    return root, outside


async def admitted(
    tmp_path: Path, manifest: dict[str, Any], config: dict[str, Any], origin: Path | None = None
) -> Any:
    """The object admission stores for ``manifest``."""
    async with connect(tmp_path / "state.db", provider_config={"files": config}) as client:
        return await client.apply(manifest, origin=origin)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under ``folder`` with its mode and a regular file's bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[str(path.relative_to(folder))] = (info.st_mode, data)
    return found


@attrs.define
class Swapper:
    """A thread that swaps two entries of a folder with ``renameat2(RENAME_EXCHANGE)``."""

    folder: Path
    first: str
    second: str
    swaps: int = 0
    _stop: threading.Event = attrs.field(factory=threading.Event)

    def run(self) -> None:
        """Swap until stopped."""
        handle = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            while not self._stop.is_set():
                rename_at(handle, self.first, self.second, RENAME_EXCHANGE)
                self.swaps += 1
        finally:
            os.close(handle)

    @classmethod
    @contextlib.contextmanager
    def running(cls, folder: Path, first: str, second: str) -> Iterator[Swapper]:
        """Run a swapper for the block."""
        swapper = cls(folder, first, second)
        thread = threading.Thread(target=swapper.run, daemon=True)
        thread.start()
        try:
            yield swapper
        finally:
            swapper._stop.set()
            thread.join(timeout=10)


async def hammer(operation: Callable[[int], Any]) -> tuple[int, int]:
    """Call ``operation(i)`` for SWAP_SECONDS; count successes and refusals (a symlink
    found on the way is transient, a refused spec permanent)."""
    done = refused = 0
    deadline = time.monotonic() + SWAP_SECONDS
    i = 0
    while time.monotonic() < deadline:
        i += 1
        try:
            await operation(i)
            done += 1
        except (TransientError, PermanentError, NotOwnedError):
            refused += 1
    return done, refused


class TestSymlinkRace:
    """A folder swapped for a symlink out of the root while the runner works."""

    async def test_writes_never_land_outside(self, site: tuple[Path, Path], tmp_path: Path) -> None:
        """Writes race a thread swapping ``sub`` with a symlink to an outside folder:
        nothing is written, created or left outside, and some writes get through."""
        root, outside = site
        (root / "sub").mkdir()
        (root / "swap").symlink_to(outside)
        before = snapshot(outside)
        obj = await admitted(tmp_path, file_manifest("x", "sub/x.txt", content="0"), {"roots": [str(root)]})
        client = FilesClient({"roots": [str(root)]})

        async def write(i: int) -> None:
            await client.create(attrs.evolve(obj, spec=attrs.evolve(obj.spec, content=f"{i}\n")))

        with Swapper.running(root, "sub", "swap") as swapper:
            done, refused = await hammer(write)
        assert swapper.swaps > 100
        assert done > 0
        assert refused > 0, "the swap was never seen: the test proves nothing"
        assert snapshot(outside) == before

    async def test_observe_never_reads_outside(self, site: tuple[Path, Path], tmp_path: Path) -> None:
        """Observes race the same swap: the secret is never read into an observation."""
        root, outside = site
        (root / "sub").mkdir()
        (root / "sub" / "x.txt").write_text("inside\n")
        (root / "swap").symlink_to(outside)
        obj = await admitted(
            tmp_path, file_manifest("x", "sub/x.txt", content="inside\n"), {"roots": [str(root)]}
        )
        client = FilesClient({"roots": [str(root)]})
        seen: list[str] = []

        async def observe(_: int) -> None:
            observation = await client.observe(obj)
            seen.append(repr(observation))

        with Swapper.running(root, "sub", "swap") as _swapper:
            done, refused = await hammer(observe)
        assert done > 0
        assert refused > 0
        assert not [s for s in seen if CANARY in s]


class TestObserve:
    """Observing through a symlinked parent, through the Runtime."""

    async def test_symlinked_parent_is_an_error_and_nothing_is_read(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """A folder replaced by a symlink to a folder holding a secret: Synced=False names
        the symlink, and neither status nor history holds a line of the secret."""
        root, outside = site
        clock = FakeClock()
        config = {"files": {"roots": [str(root)]}}
        runtime = Runtime(
            tmp_path / "state.db",
            providers=[FilesProvider()],
            provider_config=config,
            clock=clock,
            wall_clock=clock,
            poll_interval=60.0,
            resync_period=None,
        )
        async with runtime:
            await runtime.apply(file_manifest("x", "sub/x.txt", content="mine\n"))
            await asyncio.wait_for(runtime.wait_ready("File", "x"), 20)
            (root / "sub" / "x.txt").unlink()
            (root / "sub").rmdir()
            (root / "sub").symlink_to(outside)
            clock.advance(90)

            async def refused() -> bool:
                synced = (await runtime.client.get("File", "x")).status.condition("Synced")
                return synced is not None and "symlink" in synced.message

            await until_async(clock, refused)
            history = await runtime.client.history("File", "x")
            current = await runtime.client.get("File", "x")
        assert CANARY not in repr([(e.data, e.object) for e in history])
        assert CANARY not in repr(current)
        assert (outside / "x.txt").read_text() == f"{CANARY}\n"


async def quiet(runtime: Runtime) -> None:
    """Wait, within a real deadline, until no controller has a key ready or in flight:
    what happens next waits on the fake clock."""
    async with asyncio.timeout(DEADLINE):
        turn = 0
        while any(
            (statistics := controller.queue.statistics()).depth or statistics.processing
            for controller in runtime.controllers.values()
        ):
            await let_run(turn)
            turn += 1


async def within(
    runtime: Runtime, clock: FakeClock, seconds: float, predicate: Callable[[], Awaitable[bool]]
) -> bool:
    """Whether ``predicate`` holds within ``seconds`` fake seconds: the clock is moved a
    second at a time, each time once the runtime has done what was due (so fake time
    never runs ahead of slow real work)."""
    end = clock.now() + seconds
    while True:
        await quiet(runtime)
        if await predicate():
            return True
        if clock.now() >= end:
            return False
        clock.advance(1)
        for turn in range(8):  # the clock's sleepers wake and queue their keys
            await let_run(turn)


def exchange(folder: Path, first: str, second: str) -> None:
    """Swap two entries of ``folder`` (``renameat2(RENAME_EXCHANGE)``)."""
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        rename_at(handle, first, second, RENAME_EXCHANGE)
    finally:
        os.close(handle)


@contextlib.contextmanager
def swapped(folder: Path, first: str, second: str) -> Iterator[None]:
    """``first`` and ``second`` of ``folder`` exchanged for the block."""
    exchange(folder, first, second)
    try:
        yield
    finally:
        exchange(folder, first, second)


def swap_runtime(root: Path, db: Path, clock: FakeClock) -> Runtime:
    """A Runtime with the files provider confined to ``root``, polling on ``clock``."""
    return Runtime(
        db,
        providers=[FilesProvider()],
        provider_config={"files": {"roots": [str(root)]}},
        clock=clock,
        wall_clock=clock,
        poll_interval=POLL,
        poll_jitter=JITTER,
        provider_attempts=1,  # no retry inside a reconcile waiting on the fake clock
        resync_period=None,
    )


class TestSwapBack:
    """A folder swapped for a symlink, then back: the runner picks up where it was."""

    async def test_the_next_poll_repairs_what_drifted_while_swapped(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """Files under a folder swapped for a symlink report the symlink; once the folder
        is back, every File is Synced again within a poll and the edit made meanwhile is
        repaired."""
        root, outside = site
        clock = FakeClock()
        runtime = swap_runtime(root, tmp_path / "state.db", clock)
        names = [f"f{i}" for i in range(5)]
        (root / "swap").symlink_to(outside)
        before = snapshot(outside)
        async with runtime:
            for name in names:
                await runtime.apply(file_manifest(name, f"sub/{name}.txt", content=f"{name}\n"))
            for name in names:
                await asyncio.wait_for(runtime.wait_ready("File", name), DEADLINE)

            async def synced(wanted: str, says: str = "") -> bool:
                for name in names:
                    condition = (await runtime.client.get("File", name)).status.condition("Synced")
                    if condition is None or condition.status != wanted or says not in condition.message:
                        return False
                return True

            async def refused() -> bool:
                return await synced("False", "leads through the symlink")

            async def repaired() -> bool:
                return await synced("True")

            async def never() -> bool:
                return False

            poll = POLL * (1 + JITTER) + 1
            with swapped(root, "sub", "swap"):
                # The real folder is now "swap": an edit made in it while "sub" is a symlink.
                (root / "swap" / "f0.txt").write_text("edited while swapped\n")
                assert await within(runtime, clock, poll, refused), "the polls did not find the symlink"
                await within(runtime, clock, 2, never)  # held 2 s more
            back = await within(runtime, clock, poll, repaired)
            history = await runtime.client.history("File", "f0")
        assert back, "the Files were not Synced again within a poll of the folder coming back"
        assert (root / "sub" / "f0.txt").read_text() == "f0\n"
        drift = [e.data["message"] for e in history if e.type == "DriftDetected"]
        assert drift, "the edit made while swapped was not repaired as drift"
        assert "edited while swapped" in drift[-1]
        assert snapshot(outside) == before

    async def test_a_symlink_in_place_of_the_file_is_in_the_way(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """Our file swapped for a symlink: observing and writing both refuse it as
        something in the way (transient), not as somebody else's file (NotOwned, which
        the engine would never try again); the symlink's target is not touched."""
        root, outside = site
        config = {"roots": [str(root)]}
        obj = await admitted(tmp_path, file_manifest("x", "sub/x.txt", content="mine\n"), config)
        client = FilesClient(config)
        await client.create(obj)
        (root / "sub" / "link").symlink_to(outside / "x.txt")
        before = snapshot(outside)
        with swapped(root / "sub", "x.txt", "link"):
            with pytest.raises(TransientError, match="is a symlink"):
                await client.observe(obj)
            with pytest.raises(TransientError, match="is a symlink"):
                await client.create(obj)
        assert (await client.observe(obj)).up_to_date
        assert snapshot(outside) == before

    def test_a_folder_back_by_the_time_it_is_looked_at_is_transient(
        self, site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Opening a folder fails with ENOTDIR (a symlink was there at that instant) and
        the folder is back when the walk looks at what failed: a transient error, not
        "is not a directory" (permanent), which stopped Files after a swapping loop."""
        root, _ = site
        (root / "sub").mkdir()
        real_open = os.open

        def swapped_at_that_instant(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if path == "sub" and flags & os.O_DIRECTORY:
                monkeypatch.setattr(os, "open", real_open)  # once: the swap is undone
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", swapped_at_that_instant)
        with pytest.raises(TransientError, match="sub changed while it was opened"):
            read_file(str(root), str(root / "sub" / "x.txt"))
        assert read_file(str(root), str(root / "sub" / "x.txt")) is None

    async def test_every_file_is_repaired_after_a_swapping_loop(
        self, site: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """A thread swaps the folder with a symlink in a tight loop while the polls run:
        once it stops (the folder back in place), every File is Synced within a poll."""
        root, outside = site
        clock = FakeClock()
        runtime = swap_runtime(root, tmp_path / "state.db", clock)
        names = [f"f{i}" for i in range(20)]
        (root / "swap").symlink_to(outside)
        before = snapshot(outside)
        async with runtime:
            for name in names:
                await runtime.apply(file_manifest(name, f"sub/{name}.txt", content=f"{name}\n"))
            for name in names:
                await asyncio.wait_for(runtime.wait_ready("File", name), DEADLINE)

            async def failing() -> int:
                objects = [await runtime.client.get("File", name) for name in names]
                return sum(1 for o in objects if (c := o.status.condition("Synced")) and c.status == "False")

            async def some_refused() -> bool:
                return await failing() > 0

            async def repaired() -> bool:
                return await failing() == 0

            poll = POLL * (1 + JITTER) + 1
            with Swapper.running(root, "sub", "swap") as swapper:
                found = await within(runtime, clock, 3 * poll, some_refused)
            if swapper.swaps % 2:
                exchange(root, "sub", "swap")  # the folder back where it began
            back = await within(runtime, clock, poll, repaired)
            objects = [await runtime.client.get("File", name) for name in names]
        left = [c.message for o in objects if (c := o.status.condition("Synced")) and c.status == "False"]
        assert found, "no poll met the swapped folder: the test proves nothing"
        assert back, f"not Synced again within a poll of the swapping's end: {left}"
        assert all((root / "sub" / f"{n}.txt").read_text() == f"{n}\n" for n in names)
        assert snapshot(outside) == before


class TestSources:
    """``source`` is confined, regular, and must still be what was applied."""

    async def refused(
        self, tmp_path: Path, manifest: dict[str, Any], config: dict[str, Any], origin: Path | None
    ) -> str:
        """The reason admission refused it."""
        with pytest.raises(InvalidError) as caught:
            await admitted(tmp_path, manifest, config, origin)
        return str(caught.value)

    @pytest.fixture
    def manifests(self, tmp_path: Path) -> Path:
        """The folder the manifest is read from."""
        folder = tmp_path / "manifests"
        folder.mkdir()
        (folder / "page.html").write_text("<p>hi</p>\n")
        return folder

    async def test_proc_environ_is_refused(
        self, site: tuple[Path, Path], tmp_path: Path, manifests: Path
    ) -> None:
        """``/proc/self/environ``: outside the manifest's folder; and a kernel pseudo-file
        even when the source roots would include it."""
        root, _ = site
        manifest = file_manifest("env", "env.txt", source="/proc/self/environ")
        origin = manifests / "site.yaml"
        message = await self.refused(tmp_path, manifest, {"roots": [str(root)]}, origin)
        assert "spec.source: /proc/self/environ is outside the source roots" in message
        message = await self.refused(
            tmp_path, manifest, {"roots": [str(root)], "source_roots": ["/"]}, origin
        )
        assert "kernel pseudo-file" in message

    async def test_special_files_are_refused(
        self, site: tuple[Path, Path], tmp_path: Path, manifests: Path
    ) -> None:
        """A FIFO (which would hang a reader) and a symlink, inside the manifest's folder."""
        root, outside = site
        os.mkfifo(manifests / "pipe")
        (manifests / "link.html").symlink_to(outside / "x.txt")
        origin = manifests / "site.yaml"
        config = {"roots": [str(root)]}
        message = await asyncio.wait_for(
            self.refused(tmp_path, file_manifest("p", "p", source="pipe"), config, origin), 10
        )
        assert "is not a regular file" in message
        message = await self.refused(tmp_path, file_manifest("l", "l", source="link.html"), config, origin)
        assert "is a symlink (not followed)" in message

    async def test_a_source_swapped_after_admission_is_refused(
        self, site: tuple[Path, Path], tmp_path: Path, manifests: Path
    ) -> None:
        """A source replaced by a symlink to a secret, or edited, after apply: the runner
        refuses it (PermanentError) and publishes nothing."""
        root, outside = site
        config = {"roots": [str(root)]}
        obj = await admitted(
            tmp_path, file_manifest("p", "p.html", source="page.html"), config, manifests / "a.yaml"
        )
        assert obj.spec.source_digest.startswith("sha256:")
        client = FilesClient(config)
        page = manifests / "page.html"
        page.unlink()
        page.symlink_to(outside / "x.txt")
        with pytest.raises(PermanentError, match="symlink"):
            await client.create(obj)
        page.unlink()
        page.write_text("<p>edited</p>\n")
        with pytest.raises(PermanentError, match="changed since it was applied"):
            await client.create(obj)
        assert not (root / "p.html").exists()

    async def test_source_swapping_thread_never_publishes_the_secret(
        self, site: tuple[Path, Path], tmp_path: Path, manifests: Path
    ) -> None:
        """A thread swaps the source with a symlink to the secret in a tight loop while the
        runner writes it: the published file never holds the secret."""
        root, outside = site
        (manifests / "evil.html").symlink_to(outside / "x.txt")
        config = {"roots": [str(root)]}
        obj = await admitted(
            tmp_path, file_manifest("p", "p.html", source="page.html"), config, manifests / "a.yaml"
        )
        client = FilesClient(config)
        published: list[str] = []

        async def write(_: int) -> None:
            await client.create(obj)
            published.append((root / "p.html").read_text())

        with Swapper.running(manifests, "page.html", "evil.html") as _swapper:
            done, refused = await hammer(write)
        assert done > 0
        assert refused > 0
        assert set(published) == {"<p>hi</p>\n"}

    async def test_runner_refuses_a_source_root_outside_its_own(
        self, site: tuple[Path, Path], tmp_path: Path, manifests: Path
    ) -> None:
        """A runner given source roots refuses objects whose source lies elsewhere."""
        root, _ = site
        obj = await admitted(
            tmp_path,
            file_manifest("p", "p.html", source="page.html"),
            {"roots": [str(root)]},
            manifests / "a.yaml",
        )
        client = FilesClient({"roots": [str(root)], "source_roots": [str(tmp_path / "elsewhere")]})
        with pytest.raises(PermanentError, match="outside the source roots this runner may read"):
            await client.create(obj)


class TestModes:
    """Mode strings are matched whole; special bits need the config's consent."""

    @pytest.mark.parametrize("mode", ["0644\n", "0644 ", " 0644", "0o644x"])
    async def test_trailing_characters_are_refused(
        self, site: tuple[Path, Path], tmp_path: Path, mode: str
    ) -> None:
        """A newline, a space or letters around the digits: not modes."""
        root, _ = site
        with pytest.raises(InvalidError, match=r"spec\.mode: .* is not an octal permission"):
            await admitted(tmp_path, file_manifest("a", "a", mode=mode), {"roots": [str(root)]})

    @pytest.mark.parametrize(("mode", "bits"), [("4755", "setuid"), ("2755", "setgid"), ("1777", "sticky")])
    async def test_special_bits_need_consent(
        self, site: tuple[Path, Path], tmp_path: Path, mode: str, bits: str
    ) -> None:
        """setuid, setgid, sticky: refused unless ``special_modes: true``."""
        root, _ = site
        with pytest.raises(InvalidError, match=rf"spec\.mode: {mode} sets the {bits} bit; allow it"):
            await admitted(tmp_path, file_manifest("a", "a", mode=mode), {"roots": [str(root)]})
        obj = await admitted(
            tmp_path, file_manifest("a", "a", mode=mode), {"roots": [str(root)], "special_modes": True}
        )
        assert obj.spec.mode == mode
        with pytest.raises(PermanentError, match="special_modes"):
            await FilesClient({"roots": [str(root)]}).create(obj)


# -- the property: nothing outside the roots is read or written ---------------------------

ENTRY_KINDS = ("folder", "file", "link_out", "link_secret", "link_in", "fifo", "missing")
NAMES = ("a", "b")


def _plant(root: Path, outside: Path, where: Path, kind: str) -> None:
    if kind == "folder":
        where.mkdir(exist_ok=True)
    elif kind == "file":
        where.write_text("inside\n")
    elif kind == "link_out":
        where.symlink_to(outside)
    elif kind == "link_secret":
        where.symlink_to(outside / "a")
    elif kind == "link_in":
        where.symlink_to(root)
    elif kind == "fifo":
        os.mkfifo(where)


tree = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(ENTRY_KINDS), min_size=1)
paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=2).map("/".join)
operations = st.lists(
    st.tuples(
        st.sampled_from(["observe", "create", "update", "delete"]),
        st.sampled_from(["File", "Directory"]),
        paths,
    ),
    min_size=1,
    max_size=8,
)


@hypothesis.settings(max_examples=100, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(top=tree, inner=tree, steps=operations)
def test_nothing_outside_the_roots_is_read_or_written(
    tmp_path_factory: pytest.TempPathFactory,
    top: dict[str, str],
    inner: dict[str, str],
    steps: list[tuple[str, str, str]],
) -> None:
    """Random folders, files, symlinks (out, to a secret, back in) and FIFOs under the
    root, and random operations on random paths: the outside folder is never changed,
    the secret never appears in an observation, an error or a file under the root."""
    base = tmp_path_factory.mktemp("prop")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    # Outside holds the names the paths are made of: whatever a path reaches through a
    # symlink out is the canary or a FIFO.
    (outside / "a").write_text(f"{CANARY}\n")
    (outside / "b").mkdir()
    (outside / "b" / "a").write_text(f"{CANARY}\n")
    os.mkfifo(outside / "b" / "b")
    for name, kind in top.items():
        _plant(root, outside, root / name, kind)
    for name, kind in inner.items():
        parent = root / "a"
        if parent.is_dir() and not parent.is_symlink():
            _plant(root, outside, parent / name, kind)
    before = snapshot(outside)
    asyncio.run(_exercise(root, steps))
    assert snapshot(outside) == before
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert CANARY not in path.read_text(errors="replace")


async def _exercise(root: Path, steps: list[tuple[str, str, str]]) -> None:
    client = FilesClient({"roots": [str(root)]})
    for operation, kind, path in steps:
        spec: Any
        if kind == "File":
            spec = FileSpec(path=str(root / path), content="declared\n", root=str(root))
        else:
            spec = DirectorySpec(path=str(root / path), root=str(root))
        obj = Resource(API, kind, ObjectMeta(name="p", uid="uid-1"), spec, None)
        try:
            async with asyncio.timeout(10):  # a FIFO opened for reading must not hang
                if operation == "observe":
                    result = repr(await client.observe(obj))
                elif operation == "update":
                    observation = await client.observe(obj)
                    await client.update(obj, observation)
                    result = ""
                else:
                    await getattr(client, operation)(obj)
                    result = ""
        except ReconcileError as exc:
            result = str(exc)
        assert CANARY not in result
