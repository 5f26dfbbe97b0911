"""The command line and a kind in several versions: old manifests apply (converted),
``get --api-version`` shows any served version, ``migrate-storage`` rewrites what the
log holds in an older version, deprecated versions warn, unknown and unserved ones are
refused with exit 2."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import yaml
from test_cli import Cli
from test_versions import V1, V1ALPHA1, write_old

from reconcile import KindRegistry
from reconcile.api import connect
from reconcile.testing.kinds import GIZMO, GIZMO_V1ALPHA1

SERVICE = '''\
"""Gizmo, served in v1 (storage) and v1alpha1 ({note})."""
import attrs
from reconcile.testing.kinds import GIZMO, GIZMO_V1ALPHA1

kinds = [attrs.evolve(GIZMO, versions=[attrs.evolve(GIZMO_V1ALPHA1, {options})])]
'''

OLD = (
    "apiVersion: example.reconcile.dev/v1alpha1\nkind: Gizmo\nmetadata: {name: g1}\n"
    "spec: {size: 3, color: red}\n"
)


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """The command line with modules declaring Gizmo: ``vgizmos`` (v1alpha1 served),
    ``vgizmos_deprecated``, ``vgizmos_unserved`` and ``vgizmos_broken``."""
    service = tmp_path / "service"
    service.mkdir()
    variants = {
        "vgizmos": ("served", ""),
        "vgizmos_deprecated": ("deprecated", "deprecated=True"),
        "vgizmos_unserved": ("unserved", "served=False"),
        "vgizmos_broken": ("its conversion broken", "to_storage=lambda spec: 1 / 0"),
    }
    for module, (note, options) in variants.items():
        (service / f"{module}.py").write_text(SERVICE.format(note=note, options=options))
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.chdir(service)
    monkeypatch.setattr(sys, "path", [str(service), *sys.path])
    monkeypatch.delenv("RECONCILE_IMPORT", raising=False)
    yield Cli(tmp_path, capsys)
    for module in variants:  # (imported by the test: no later test may find them)
        sys.modules.pop(module, None)


class TestApply:
    """Manifests in an older served version apply; others are refused by name."""

    def test_old_manifest_applies_stored_in_v1(self, cli: Cli) -> None:
        """A v1alpha1 manifest applies; the object is stored (and shown) in v1."""
        cli.write("gizmo.yaml", OLD)
        code, out, err = cli("--import", "vgizmos", "apply", "-f", str(cli.manifests))
        assert (code, out.strip(), err) == (0, "gizmo.example.reconcile.dev/g1 created", "")
        code, out, _ = cli("--import", "vgizmos", "get", "gizmo", "g1", "-o", "yaml")
        shown = yaml.safe_load(out)
        assert (shown["apiVersion"], shown["spec"]) == (V1, {"size": 3, "colors": ["red"], "note": ""})

    def test_unknown_version_exit_2(self, cli: Cli) -> None:
        """An unknown version: exit 2, the served versions listed, nothing stored."""
        cli.write("gizmo.yaml", OLD.replace("v1alpha1", "v7"))
        code, _, err = cli("--import", "vgizmos", "apply", "-f", str(cli.manifests))
        assert code == 2
        assert "unknown apiVersion example.reconcile.dev/v7 for kind Gizmo" in err
        assert f"served: {V1}, {V1ALPHA1}" in err
        assert cli.revision() == 0

    def test_unserved_version_exit_2(self, cli: Cli) -> None:
        """An unserved version: exit 2, refused by name, nothing stored."""
        cli.write("gizmo.yaml", OLD)
        code, _, err = cli("--import", "vgizmos_unserved", "apply", "-f", str(cli.manifests))
        assert code == 2
        assert f"{V1ALPHA1} of kind Gizmo is no longer served (served: {V1})" in err
        assert cli.revision() == 0

    def test_conversion_that_raises_exit_2(self, cli: Cli) -> None:
        """A conversion that raises: exit 2, naming kind, object and versions; nothing stored."""
        cli.write("gizmo.yaml", OLD)
        code, _, err = cli("--import", "vgizmos_broken", "apply", "-f", str(cli.manifests))
        assert code == 2
        assert f'Gizmo "g1": spec: converting {V1ALPHA1} to {V1} failed: division by zero' in err
        assert cli.revision() == 0

    def test_deprecated_version_warns(self, cli: Cli) -> None:
        """A deprecated version applies, with a warning: line."""
        cli.write("gizmo.yaml", OLD)
        code, _, err = cli("--import", "vgizmos_deprecated", "apply", "-f", str(cli.manifests))
        assert code == 0
        assert f"warning: {cli.manifests / 'gizmo.yaml'}" in err
        assert f"{V1ALPHA1} Gizmo is deprecated; use {V1}" in err


class TestGet:
    """``get --api-version``: any served version."""

    def test_read_in_each_served_version(self, cli: Cli) -> None:
        """-o yaml in v1 (default and asked), in v1alpha1 (whole or by name)."""
        cli.write("gizmo.yaml", OLD)
        assert cli("--import", "vgizmos", "apply", "-f", str(cli.manifests))[0] == 0
        for asked in ((), ("--api-version", V1)):
            code, out, _ = cli("--import", "vgizmos", "get", "gizmo", "g1", "-o", "json", *asked)
            assert (code, json.loads(out)["apiVersion"]) == (0, V1)
        for asked in (V1ALPHA1, "v1alpha1"):
            code, out, err = cli(
                "--import", "vgizmos", "get", "gizmo", "g1", "-o", "yaml", "--api-version", asked
            )
            shown = yaml.safe_load(out)
            assert (code, err) == (0, "")
            assert (shown["apiVersion"], shown["spec"]) == (V1ALPHA1, {"size": 3, "color": "red"})
        code, out, _ = cli("--import", "vgizmos", "get", "gizmo", "-o", "json", "--api-version", "v1alpha1")
        assert [i["apiVersion"] for i in json.loads(out)["items"]] == [V1ALPHA1]

    def test_unknown_read_version_exit_2(self, cli: Cli) -> None:
        """--api-version of a version not served: exit 2, listing the served ones."""
        cli.write("gizmo.yaml", OLD)
        assert cli("--import", "vgizmos", "apply", "-f", str(cli.manifests))[0] == 0
        code, _, err = cli("--import", "vgizmos", "get", "gizmo", "g1", "--api-version", "v9")
        assert code == 2
        assert "served: " in err
        code, _, err = cli("--import", "vgizmos_unserved", "get", "gizmo", "--api-version", "v1alpha1")
        assert code == 2
        assert "no longer served" in err

    def test_deprecated_read_warns(self, cli: Cli) -> None:
        """A read in a deprecated version: a warning: line."""
        cli.write("gizmo.yaml", OLD)
        assert cli("--import", "vgizmos", "apply", "-f", str(cli.manifests))[0] == 0
        asking = ("get", "gizmo", "g1", "--api-version", "v1alpha1")
        code, _, err = cli("--import", "vgizmos_deprecated", *asking)
        assert code == 0
        assert f"warning: {V1ALPHA1} Gizmo is deprecated; use {V1}" in err


def write_history(cli: Cli, *names: str) -> None:
    """Objects stored in v1alpha1, as an earlier release wrote them."""

    async def write() -> None:
        kinds = KindRegistry([attrs.evolve(GIZMO, versions=[GIZMO_V1ALPHA1])])
        async with connect(str(cli.db), kinds=kinds) as client:
            for name in names:
                await write_old(client, name, size=1, color="teal")

    asyncio.run(write())


class TestMigrateStorage:
    """``migrate-storage KIND``: one event per object not in the storage version."""

    def test_migrates_once(self, cli: Cli) -> None:
        """Two old objects and one current: two StorageMigrated events; again: none."""
        write_history(cli, "a", "b")
        cli.write("gizmo.yaml", OLD)
        assert cli("--import", "vgizmos", "apply", "-f", str(cli.manifests))[0] == 0
        before = cli.revision()
        code, out, _ = cli("--import", "vgizmos", "migrate-storage", "gizmo")
        assert code == 0
        assert out.splitlines() == [
            f"gizmo/a migrated to {V1}",
            f"gizmo/b migrated to {V1}",
            f"2 migrated, 1 already in {V1}",
        ]
        assert cli.revision() == before + 2
        code, out, _ = cli("--import", "vgizmos", "migrate-storage", "gizmo")
        assert (code, out.strip()) == (0, f"0 migrated, 3 already in {V1}")
        assert cli.revision() == before + 2
        code, out, _ = cli("--import", "vgizmos", "history", "gizmo", "a", "-o", "json")
        events = json.loads(out)
        assert [e["type"] for e in events] == ["Created", "StorageMigrated"]
        # The old event reads converted (the log is forever, read in v1): the migration
        # changed nothing but how the body is stored.
        assert events[1]["changes"] == []

    def test_old_event_read_converted(self, cli: Cli) -> None:
        """An object the log holds in v1alpha1 is shown in v1 by get and history."""
        write_history(cli, "old")
        code, out, _ = cli("--import", "vgizmos_unserved", "get", "gizmo", "old", "-o", "json")
        assert code == 0
        assert json.loads(out)["spec"] == {"size": 1, "colors": ["teal"], "note": ""}

    def test_unknown_kind_exit_2(self, cli: Cli) -> None:
        """An unknown kind is refused with exit 2."""
        code, _, err = cli("--import", "vgizmos", "migrate-storage", "gizmoz")
        assert code == 2
        assert 'unknown kind "gizmoz"' in err


def test_explain_lists_the_versions(cli: Cli) -> None:
    """explain shows each version: served, storage, deprecated."""
    code, out, _ = cli("--import", "vgizmos_deprecated", "explain", "gizmo")
    assert code == 0
    rows = [line.split() for line in out.split("VERSIONS:")[1].strip().splitlines()]
    assert rows == [
        ["VERSION", "SERVED", "STORAGE", "DEPRECATED"],
        [V1, "yes", "yes", "no"],
        [V1ALPHA1, "yes", "no", "yes"],
    ]
