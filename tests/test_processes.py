"""Crash safety and several processes on one database file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reconcile import KindRegistry, connect
from reconcile.testing import MemoryCloud, MemoryProvider, example_kinds

WORKERS = Path(__file__).with_name("workers.py")
ROOT = Path(__file__).parents[1]


def start(*args: str) -> subprocess.Popen[str]:
    """Start a worker process with reconcile importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(WORKERS), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL a worker and release its pipes."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


class TestCrashSafety:
    """A writer killed by SIGKILL loses no acknowledged write."""

    @pytest.mark.parametrize("seed", [1, 2, 3])
    async def test_sigkill_mid_stream(self, tmp_path: Path, seed: int) -> None:
        """Kill a streaming writer at a random moment; every acknowledged write survives."""
        db = tmp_path / "crash.db"
        process = start("stream", str(db))
        assert process.stdout is not None
        wanted = random.Random(seed).randint(50, 1500)
        acknowledged = []
        for line in process.stdout:
            acknowledged.append(line.split()[1])
            if len(acknowledged) >= wanted:
                break
        kill(process)
        assert len(acknowledged) >= wanted, "the writer died before the kill"
        async with connect(db, kinds=example_kinds()) as client:
            report = await client.verify()
            assert report.ok, report.differences
            names = {o.metadata.name for o in (await client.list("widget")).items}
            missing = set(acknowledged) - names
            assert not missing, f"acknowledged writes lost: {sorted(missing)[:5]}"


class TestTwoProcesses:
    """Two processes writing one file at once."""

    async def test_concurrent_writers_see_each_other(self, tmp_path: Path) -> None:
        """No write lost, no 'database is locked', each watcher sees the other's events."""
        db = tmp_path / "shared.db"
        async with connect(db, kinds=example_kinds()):
            pass  # create the schema once, as `reconcile run` would have
        count = 300
        first = start("share", str(db), "left", str(count), str(2 * count))
        second = start("share", str(db), "right", str(count), str(2 * count))
        outputs = [p.communicate(timeout=120) for p in (first, second)]
        for process, (out, err) in zip((first, second), outputs, strict=True):
            assert process.returncode == 0, err
            assert "locked" not in err
            assert out.strip() == f"saw {2 * count}"
        async with connect(db, kinds=example_kinds()) as client:
            assert len((await client.list("widget")).items) == 2 * count
            assert await client.revision() == 2 * count
            assert (await client.verify()).ok


class TestConvergenceCrash:
    """The engine killed mid-convergence resumes without leaking or duplicating."""

    async def test_sigkill_mid_convergence(self, tmp_path: Path) -> None:
        """SIGKILL while creating; after a restart every bucket is Ready, each external item
        exists once and belongs to its object."""
        db, cloud_path = tmp_path / "state.db", tmp_path / "cloud.json"
        count = 200
        async with connect(db, kinds=KindRegistry(MemoryProvider().kinds)) as client:
            for i in range(count):
                await client.apply(
                    {
                        "apiVersion": "memory.reconcile.dev/v1",
                        "kind": "Bucket",
                        "metadata": {"name": f"b{i:03d}"},
                        "spec": {"name": f"b{i:03d}", "value": str(i)},
                    }
                )
        process = start("converge", str(db), str(cloud_path))
        assert process.stdout is not None
        created = 0
        for line in process.stdout:
            created += line.strip() == "created"
            if created >= count // 3:
                break
        kill(process)
        assert created >= count // 3, "the engine died before the kill"

        again = start("converge", str(db), str(cloud_path), "--until-ready")
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
        assert out.strip().endswith(f"ready {count}")
        cloud = MemoryCloud(path=cloud_path)
        async with connect(db, kinds=KindRegistry(MemoryProvider().kinds)) as client:
            buckets = (await client.list("bucket")).items
            assert (await client.verify()).ok
        assert len(cloud.items) == count
        for obj in buckets:
            assert cloud.items[obj.spec.name].owner == obj.metadata.uid
            assert cloud.items[obj.spec.name].value == obj.spec.value


@pytest.mark.parametrize(
    ("knowing", "before", "found"),
    [
        # An atomic create: nothing written before it; the next run finds the bucket
        # marked as this object's (its create, exclusive, answers that it is ours).
        (True, ["Created"], None),
        # A create that is not atomic: the pending marker was on disk before the call.
        (False, ["Created", "CreateRequested", "MetadataChanged"], "found after an interrupted create"),
    ],
    ids=["atomic", "marker-first"],
)
async def test_sigkill_between_create_and_its_record(
    tmp_path: Path, knowing: bool, before: list[str], found: str | None
) -> None:
    """SIGKILL right after the provider's create returned, before the engine wrote its
    outcome: the next run records the create without making a second resource, the
    finalizer (on since the apply) holding the object for cleanup throughout."""
    db, cloud_path = tmp_path / "state.db", tmp_path / "cloud.json"
    mode = ["--knowing"] if knowing else []
    crashed = start("crash", str(db), str(cloud_path), *mode)
    out, err = crashed.communicate(timeout=60)
    assert crashed.returncode == -signal.SIGKILL, (out, err)
    kinds = KindRegistry(MemoryProvider(knowing=knowing).kinds)
    async with connect(db, kinds=kinds) as client:
        assert [e.type for e in await client.history("bucket", "b")] == before
        obj = await client.get("bucket", "b")
        assert obj.metadata.finalizers == ("reconcile.dev/managed",)
    assert MemoryCloud(path=cloud_path).items["b"].owner == obj.metadata.uid

    again = start("converge", str(db), str(cloud_path), "--until-ready", *mode)
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert out.strip().endswith("ready 1")
    async with connect(db, kinds=kinds) as client:
        events = await client.history("bucket", "b")
    after = [e.type for e in events[len(before) :]]
    if knowing:
        assert after == ["CreateRequested", "CreateSucceeded", "StatusChanged"]
    else:
        assert after == ["CreateSucceeded", "StatusChanged"]
        assert events[len(before)].data == {"message": found, "generation": 1}
    cloud = MemoryCloud(path=cloud_path)
    assert list(cloud.items) == ["b"]
    assert cloud.items["b"].owner == obj.metadata.uid


async def test_sigkill_while_outcome_writes_land(tmp_path: Path) -> None:
    """SIGKILL while the outcome writes of some buckets (their creates done) are still
    landing, their specs changed meanwhile: no provider call was made on those buckets
    after their create in the killed process, and after a restart no bucket is created a
    second time; each ends Ready, once in the cloud, as its spec says."""
    db, cloud_path, journal = tmp_path / "state.db", tmp_path / "cloud.json", tmp_path / "journal"
    count = 24
    killed = start("landing", str(db), str(cloud_path), str(journal), str(count))
    out, err = killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL, (out, err)
    held = [f"b{i:03d}" for i in range(0, count, 4)]
    assert out.strip() == f"landing {len(held)}"
    first = journal.read_text().split("\n")[:-1]
    # Each bucket created once; the held ones' changes not acted on (their keys in flight).
    assert sorted(first) == sorted(f"create b{i:03d}" for i in range(count))
    kinds = KindRegistry(MemoryProvider().kinds)
    async with connect(db, kinds=kinds) as client:
        for name in held:
            types = [e.type for e in await client.history("bucket", name)]
            assert "CreateRequested" in types
            assert "CreateSucceeded" not in types  # its outcome never committed

    again = start("converge", str(db), str(cloud_path), "--until-ready", "--journal", str(journal))
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert out.strip().endswith(f"ready {count}")
    second = journal.read_text().split("\n")[len(first) : -1]
    assert not [line for line in second if line.startswith("create ")], second
    assert sorted(second) == sorted(f"update {name}" for name in held)
    cloud = MemoryCloud(path=cloud_path)
    async with connect(db, kinds=kinds) as client:
        assert (await client.verify()).ok
        buckets = (await client.list("bucket")).items
        for name in held:
            # Found marked as its own, and brought to its changed spec: one create only.
            types = [e.type for e in await client.history("bucket", name)]
            assert types.count("CreateRequested") == 1, types
            assert types[-2:] == ["UpdateSucceeded", "StatusChanged"], types
    assert len(cloud.items) == count
    for obj in buckets:
        assert cloud.items[obj.spec.name].owner == obj.metadata.uid
        assert cloud.items[obj.spec.name].value == obj.spec.value
