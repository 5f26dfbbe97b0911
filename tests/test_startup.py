"""Starting up: ``import reconcile`` is cheap, names load on first use, and each command
imports what it needs (not the runtime for ``get``); every command is in the lazy map."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import click
import pytest

import reconcile
import reconcile.model
import reconcile.runtime
import reconcile.store
from reconcile.cli import main
from reconcile.cli.commands import COMMANDS
from reconcile.cli.main import cli

ROOT = Path(__file__).parents[1]
DIRECTORY = "apiVersion: files.reconcile.dev/v1\nkind: Directory\nmetadata: {name: d0}\nspec: {path: d0}\n"


def loaded_after(code: str, cwd: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


class TestFrontDoor:
    """The packages' names, imported on first use."""

    @pytest.mark.parametrize("package", [reconcile, reconcile.model, reconcile.runtime, reconcile.store])
    def test_every_public_name_is_its_homes(self, package: object) -> None:
        """Each name in ``__all__`` is the object of the module ``_HOMES`` names (or is
        imported eagerly), and ``dir()`` lists it."""
        homes: dict[str, str] = package._HOMES  # type: ignore[attr-defined]
        names: list[str] = package.__all__  # type: ignore[attr-defined]
        assert set(homes) <= set(names)
        for name in names:
            value = getattr(package, name)
            if name in homes:
                assert value is getattr(importlib.import_module(homes[name]), name), name
            assert name in dir(package)

    def test_unknown_name_is_an_attribute_error(self) -> None:
        """A name the package does not have is an AttributeError naming it."""
        with pytest.raises(AttributeError, match="no attribute 'Nope'"):
            _ = reconcile.Nope  # type: ignore[attr-defined]

    def test_import_reconcile_loads_no_layer(self, tmp_path: Path) -> None:
        """``import reconcile`` and ``import reconcile.errors`` load no layer and no
        asyncio."""
        loaded = loaded_after("import reconcile, reconcile.errors", tmp_path)
        heavy = {"asyncio", "cattrs", "yaml", "reconcile.model", "reconcile.api", "reconcile.store"}
        heavy |= {"reconcile.controller", "reconcile.runtime"}
        assert not heavy & loaded


class TestCommandsLoadWhatTheyNeed:
    """A command imports its own module and what it uses, nothing else."""

    @pytest.fixture
    def database(self, tmp_path: Path) -> Path:
        """A store holding one Directory."""
        db = tmp_path / "state.db"
        (tmp_path / "d.yaml").write_text(DIRECTORY)
        arguments = [
            "--db",
            str(db),
            "--root",
            str(tmp_path / "root"),
            "apply",
            "-f",
            str(tmp_path / "d.yaml"),
        ]
        assert main(arguments) == 0
        return db

    # The runtime, the other commands, yaml, the providers' clients, telemetry, retries, rich.
    NEVER: ClassVar[frozenset[str]] = frozenset(
        {"reconcile.runtime", "reconcile.controller", "reconcile.cli.running", "reconcile.cli.applying"}
        | {"yaml", "dns.message", "dns.name", "botocore", "aiobotocore", "opentelemetry", "tenacity", "rich"}
    )

    @pytest.mark.parametrize(
        ("command", "spared"),
        [
            (["version"], {"asyncio", "cattrs", "reconcile.api", "reconcile.store.sqlite.backend"}),
            (["get"], set()),
            (["history", "directory", "d0"], set()),
        ],
    )
    def test_command_imports(self, database: Path, command: list[str], spared: set[str]) -> None:
        """``version``, ``get`` and ``history`` run without the runtime, the controller,
        yaml, the providers' clients or the other commands (``version`` without the store
        and the API either)."""
        code = f"from reconcile.cli import main\nassert main(['--db', {str(database)!r}, *{command!r}]) == 0"
        loaded = loaded_after(code, database.parent)
        assert not (self.NEVER | spared) & loaded

    def test_yaml_output_still_works(self, database: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``-o yaml`` imports yaml when asked for, and prints the object."""
        assert main(["--db", str(database), "get", "directory", "d0", "-o", "yaml"]) == 0
        assert "kind: Directory" in capsys.readouterr().out


class TestLazyGroup:
    """The one map of command names to their homes."""

    def test_every_entry_loads_its_command(self) -> None:
        """Each entry of COMMANDS loads a click command of that name."""
        with click.Context(cli) as context:
            for name in COMMANDS:
                command = cli.get_command(context, name)
                assert isinstance(command, click.Command)
                assert command.name == name

    def test_every_command_is_in_the_map(self) -> None:
        """Every command a module of reconcile.cli registers is in COMMANDS (a new
        command's module must be added there, or the command is never found)."""
        for path in sorted((ROOT / "reconcile" / "cli").glob("*.py")):
            importlib.import_module(f"reconcile.cli.{path.stem}")
        assert set(cli.commands) <= set(COMMANDS)

    def test_help_lists_every_command(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--help`` lists every command with its short help."""
        assert main(["--help"]) == 0
        out = capsys.readouterr().out
        with click.Context(cli) as context:
            for name in COMMANDS:
                command = cli.get_command(context, name)
                assert command is not None
                assert f"  {name} " in out
                assert command.get_short_help_str(limit=40)[:20] in out

    def test_unknown_command(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown command is click's usage error (exit 2), importing nothing."""
        assert main(["frobnicate"]) == 2
        assert "No such command 'frobnicate'" in capsys.readouterr().err
