"""The example provider project (examples/provider: ledger.py, pyproject.toml, its own
conformance test) is complete: its test passes here, and its pyproject declares what a
provider needs."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PROJECT = Path(__file__).parents[1] / "examples" / "provider"
sys.path.insert(0, str(PROJECT / "tests"))

from test_ledger import test_ledger_provider_conformance  # noqa: E402,F401 - collected here too


def test_the_project_declares_what_a_provider_needs() -> None:
    """The distribution reconcile-engine (not "reconcile"), the entry point, the kit's
    asyncio mode."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    assert project["project"]["dependencies"] == ["reconcile-engine"]
    assert project["project"]["entry-points"]["reconcile.providers"] == {"ledger": "ledger:provider"}
    assert project["tool"]["pytest"]["ini_options"]["asyncio_mode"] == "auto"
