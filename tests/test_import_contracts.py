"""The import contracts can fail: a forbidden import added to a copy of the tree breaks
``lint-imports`` (a contract that cannot fail checks nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the copy at ``tree`` (shadowing the installed package)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts."""
    for package, where in (
        ("reconcile", "reconcile"),
        ("reconcile_providers", "providers/reconcile_providers"),
    ):
        shutil.copytree(ROOT / where, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(module: Path, line: str) -> None:
    """Append an import to a module of the copy."""
    module.write_text(module.read_text() + f"\n{line}  # noqa\n")


def test_the_copy_keeps_the_contracts(tree: Path) -> None:
    """Unchanged, the copy passes: the failures below come from the added imports."""
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("reconcile/model/meta.py", "import reconcile.api.client", "Layers point downward only"),
        (
            "reconcile/store/contract.py",
            "import reconcile.controller.informing",
            "Layers point downward only",
        ),
        ("reconcile/controller/clocks.py", "import reconcile.runtime.running", "Layers point downward only"),
        ("reconcile/runtime/health.py", "import reconcile.cli.main", "Layers point downward only"),
        ("reconcile/runtime/health.py", "import reconcile.testing", "Layers point downward only"),
        ("reconcile/controller/clocks.py", "import reconcile.typing", "Layers point downward only"),
        ("reconcile/annotations.py", "import reconcile.model.meta", "Layers point downward only"),
        (
            "reconcile_providers/files/client.py",
            "import reconcile.runtime.running",
            "Providers use only reconcile's public API",
        ),
        (
            "reconcile_providers/files/client.py",
            "import reconcile.cli.main",
            "Providers use only reconcile's public API",
        ),
        (
            "reconcile_providers/files/client.py",
            "import reconcile.store.contract",
            "Providers use only reconcile's public API",
        ),
        (
            "reconcile/cli/completing.py",
            "import sqlite3",
            "The CLI and the HTTP API reach the store only through its contract",
        ),
        (
            "reconcile/cli/maintaining.py",
            "from reconcile.store.sqlite.schema import SCHEMA_VERSION",
            "The CLI and the HTTP API reach the store only through its contract",
        ),
        (
            "reconcile/cli/settings.py",
            "import reconcile.store.sqlite.backend",
            "The CLI and the HTTP API reach the store only through its contract",
        ),
        (
            "reconcile/api/client.py",
            "import reconcile.store.postgres.backend",
            "Only the store reaches its PostgreSQL backend",
        ),
        ("reconcile/runtime/health.py", "import asyncpg", "Only the store reaches its PostgreSQL backend"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(tree: Path, module: str, line: str, contract: str) -> None:
    """Each forbidden direction is caught, by the contract that forbids it."""
    add_import(tree / module, line)
    result = lint(tree)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout
