"""Provider discovery is one rule for every way in: an entry point that names a factory
function gives the same kinds to ``connect()``, ``reconcile apply`` and the Runtime, and
an entry point that gives no provider is an error naming it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import checkout_path

import reconcile
from reconcile import KindRegistry, ProviderLoadError, Runtime, discover_providers

ROOT = Path(__file__).parents[1]

MODULE = textwrap.dedent(
    '''
    """A third-party provider whose entry point is a factory function."""
    from typing import Any

    import attrs

    from reconcile import Behaviour, Kind, ManagedStatus, Observation

    STORE: dict[str, tuple[int, str]] = {}  # name -> (size, owner uid)


    @attrs.frozen
    class GizmoSpec:
        size: int = 0


    GIZMO = Kind(
        "gizmo.reconcile.dev/v1", "Gizmo", GizmoSpec, ManagedStatus, behaviour=Behaviour.IDEMPOTENT_BY_NAME
    )


    class GizmoClient:
        async def observe(self, resource: Any) -> Observation:
            found = STORE.get(resource.metadata.name)
            if found is None:
                return Observation(exists=False)
            return Observation(exists=True, up_to_date=found[0] == resource.spec.size, owner=found[1])

        async def create(self, resource: Any) -> None:
            STORE[resource.metadata.name] = (resource.spec.size, resource.metadata.uid)

        async def update(self, resource: Any, observation: Observation) -> None:
            STORE[resource.metadata.name] = (resource.spec.size, resource.metadata.uid)

        async def delete(self, resource: Any) -> None:
            STORE.pop(resource.metadata.name, None)

        async def close(self) -> None:
            pass


    class GizmoProvider:
        name = "gizmos"
        kinds = (GIZMO,)

        async def connect(self, config: Any) -> GizmoClient:
            return GizmoClient()


    def make_provider() -> GizmoProvider:
        return GizmoProvider()


    not_a_provider = 42
    '''
)

GIZMO = {
    "apiVersion": "gizmo.reconcile.dev/v1",
    "kind": "Gizmo",
    "metadata": {"name": "g1"},
    "spec": {"size": 3},
}


def install(folder: Path, entry_points: str) -> Path:
    """A distribution on ``folder`` (a sys.path entry): the module and its dist-info."""
    (folder / "gizmos.py").write_text(MODULE)
    info = folder / "gizmos-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gizmos\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[reconcile.providers]\n{entry_points}\n")
    return folder


@pytest.fixture
def factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The gizmos distribution installed with a factory-function entry point."""
    folder = tmp_path / "site"
    folder.mkdir()
    install(folder, "gizmos = gizmos:make_provider")
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    sys.modules.pop("gizmos", None)


def test_the_registry_and_the_providers_agree(factory: Path) -> None:
    """KindRegistry.from_entry_points sees the factory's kinds, as discover_providers does."""
    assert "gizmos" in [p.name for p in discover_providers()]
    assert KindRegistry.from_entry_points().lookup("gizmo.reconcile.dev/v1", "Gizmo").kind == "Gizmo"


async def test_connect_admits_the_factory_kind(factory: Path, tmp_path: Path) -> None:
    """connect() with no registry knows the factory's kind."""
    async with reconcile.connect(tmp_path / "c.db") as client:
        applied = await client.apply(GIZMO)
    assert applied.spec.size == 3


async def test_runtime_runs_the_factory_kind(factory: Path, tmp_path: Path) -> None:
    """The Runtime discovers the same provider and converges its object."""
    async with Runtime(tmp_path / "r.db") as runtime:
        await runtime.apply(GIZMO)
        ready = await runtime.wait_ready("Gizmo", "g1", timeout=30)
    assert ready.status.observed_generation == 1


def test_reconcile_apply_knows_the_factory_kind(factory: Path, tmp_path: Path) -> None:
    """The CLI, a real process with the distribution on its path, applies the kind."""
    manifest = tmp_path / "gizmo.yaml"
    manifest.write_text(
        "apiVersion: gizmo.reconcile.dev/v1\nkind: Gizmo\nmetadata: {name: g1}\nspec: {size: 3}\n"
    )
    env = {**os.environ, "PYTHONPATH": checkout_path(factory)}
    db = str(tmp_path / "cli.db")
    command = [sys.executable, "-m", "reconcile", "--db", db]
    applied = subprocess.run(
        [*command, "apply", "-f", str(manifest)], env=env, capture_output=True, text=True, check=False
    )
    assert applied.returncode == 0, applied.stderr
    assert "gizmo" in applied.stdout.lower()
    listed = subprocess.run(
        [*command, "get", "gizmo", "g1"], env=env, capture_output=True, text=True, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert "g1" in listed.stdout


def test_an_entry_point_that_is_not_a_provider_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point giving something without name, kinds and connect fails loudly,
    naming the entry point, instead of being skipped by one caller and not another."""
    folder = tmp_path / "bad"
    folder.mkdir()
    install(folder, "broken = gizmos:not_a_provider")
    monkeypatch.syspath_prepend(str(folder))
    try:
        with pytest.raises(ProviderLoadError, match=r"entry point 'broken'.*is not a provider"):
            discover_providers()
        with pytest.raises(ProviderLoadError, match="entry point 'broken'"):
            KindRegistry.from_entry_points()
    finally:
        sys.modules.pop("gizmos", None)
