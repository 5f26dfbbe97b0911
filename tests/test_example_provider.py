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


HOW_TO = Path(__file__).parents[1] / "docs" / "how-to" / "write-a-provider.md"


class TestTheHowTo:
    """docs/how-to/write-a-provider.md's project works when copied."""

    def test_the_documented_pyproject_sets_the_fixture_loop_scope(self) -> None:
        """The page's pyproject.toml and the example's set pytest-asyncio's
        asyncio_default_fixture_loop_scope (unset, it warns at every run)."""
        import re  # noqa: PLC0415

        [block] = re.findall(r"```toml\n(.*?)```", HOW_TO.read_text(), flags=re.DOTALL)
        for project in (tomllib.loads(block), tomllib.loads((PROJECT / "pyproject.toml").read_text())):
            options = project["tool"]["pytest"]["ini_options"]
            assert options["asyncio_mode"] == "auto"
            assert options["asyncio_default_fixture_loop_scope"] == "function"

    def test_the_example_project_runs_its_tests_without_a_warning(self) -> None:
        """pytest in examples/provider, with the project's own configuration: passes,
        and pytest-asyncio has nothing to warn about."""
        import os  # noqa: PLC0415
        import subprocess  # noqa: PLC0415

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT.parents[1]), str(PROJECT)])}
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
            cwd=PROJECT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr

    def test_reconcile_engine_is_installed_before_the_provider(self) -> None:
        """reconcile-engine is not on PyPI: the page installs it from a checkout or a
        wheel before ``pip install -e '.[test]'``, which alone cannot resolve it."""
        page = HOW_TO.read_text()
        assert "not on PyPI" in page
        first_engine = page.index("pip install /path/to/reconcile")
        assert first_engine < page.index("pip install -e '.[test]'")
        assert "reconcile_engine-*.whl" in page
