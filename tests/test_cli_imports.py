"""``--import MODULE`` and ``RECONCILE_IMPORT``: a service's own kinds, known to the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_cli import Cli

SERVICE = '''\
"""An embedding service's kinds, as it gives them to its Runtime."""
import attrs
from reconcile import Kind, doc_field


@attrs.frozen
class GadgetSpec:
    size: int = doc_field("How big the gadget is.", default=1)


kinds = [Kind("gadgets.example.dev/v1", "Gadget", GadgetSpec, short_names=("gd",))]


class GadgetProvider:
    name = "gadgets"
    kinds = kinds

    async def connect(self, config):
        raise NotImplementedError


provider = GadgetProvider()
'''

GADGET = "apiVersion: gadgets.example.dev/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 3}\n"


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The command line in a service's checkout, whose module ``gadgetsvc`` declares Gadget."""
    service = tmp_path / "service"
    service.mkdir()
    (service / "gadgetsvc.py").write_text(SERVICE)
    (service / "broken.py").write_text("raise RuntimeError('no database configured')\n")
    (service / "strange.py").write_text("kinds = ['Gadget']\n")
    monkeypatch.chdir(service)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("gadgetsvc", "broken", "strange"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv("RECONCILE_IMPORT", raising=False)
    return Cli(tmp_path, capsys)


class TestImport:
    """A module's kinds join the installed ones for every command."""

    def test_get_describe_history_explain_know_the_service_kinds(self, cli: Cli) -> None:
        """With --import, a service's kind is applied, listed, described, its history
        read and its fields explained."""
        cli.write("gadget.yaml", GADGET)
        assert cli("apply", "-f", str(cli.manifests))[0] == 2  # unknown without the import
        code, out, err = cli("--import", "gadgetsvc", "apply", "-f", str(cli.manifests))
        assert (code, out.strip(), err) == (0, "gadget.gadgets.example.dev/g1 created", "")
        code, out, _ = cli("--import", "gadgetsvc", "get", "gd")
        assert code == 0
        assert "g1" in out
        code, out, _ = cli("--import", "gadgetsvc", "describe", "gadget", "g1")
        assert code == 0
        assert "size: 3" in out
        code, out, _ = cli("--import", "gadgetsvc", "history", "gadget", "g1", "-o", "json")
        assert code == 0
        assert [e["type"] for e in json.loads(out)] == ["Created"]
        code, out, _ = cli("--import", "gadgetsvc", "explain", "Gadget.spec.size")
        assert code == 0
        assert "How big the gadget is." in out

    def test_the_environment_lists_modules(self, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
        """RECONCILE_IMPORT (comma-separated) imports as --import does."""
        monkeypatch.setenv("RECONCILE_IMPORT", "gadgetsvc, ")
        code, out, _ = cli("explain", "gadget")
        assert code == 0
        assert "KIND:      Gadget" in out

    def test_a_provider_names_its_kinds(self, cli: Cli) -> None:
        """MODULE:ATTRIBUTE naming a provider: its kinds, listed under its name."""
        code, out, _ = cli("--import", "gadgetsvc:provider", "explain", "gd")
        assert code == 0
        assert "PROVIDER:  gadgets" in out

    @pytest.mark.parametrize(
        ("module", "said"),
        [
            ("nosuchmodule", "--import nosuchmodule: cannot import nosuchmodule: ModuleNotFoundError"),
            ("broken", "--import broken: cannot import broken: RuntimeError: no database configured"),
            ("gadgetsvc:widgets", "--import gadgetsvc:widgets: module gadgetsvc has no 'widgets'"),
            ("strange", "--import strange: expected an iterable of Kind or a provider, found str among them"),
        ],
    )
    def test_a_module_that_cannot_be_imported(self, cli: Cli, module: str, said: str) -> None:
        """An import that fails, or gives no kinds, is bad input (exit 2), one line, no traceback."""
        code, out, err = cli("--import", module, "get", "gadget")
        assert code == 2
        assert out == ""
        assert err.startswith(f"error: {said}")
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
