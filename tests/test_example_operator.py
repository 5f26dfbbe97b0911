"""Custom kinds in a few lines: the example operator (examples/operator/sites.py, a
``StaticSite`` kind with printer columns, admission hooks and a controller, no
provider) runs in a Runtime, installs under the ``reconcile.providers`` entry points as a
kinds package, and every command works on it: apply, get (with its columns), describe,
explain, history, plan, run."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import settle
from test_cli import Cli

PROJECT = Path(__file__).parents[1] / "examples" / "operator"
sys.path.insert(0, str(PROJECT))

import sites  # noqa: E402

import reconcile  # noqa: E402
from reconcile import KindRegistry, Operator, Runtime, discover_providers  # noqa: E402
from reconcile.model.discovery import discover  # noqa: E402
from reconcile_providers.files import FilesProvider  # noqa: E402

SITE = {
    "apiVersion": "sites.example.dev/v1",
    "kind": "StaticSite",
    "metadata": {"name": "docs"},
    "spec": {"pages": {"index.html": "<h1>Welcome</h1>", "about.html": "<p>About us</p>"}},
}


def files_config(tmp_path: Path) -> dict[str, object]:
    """The files provider's config: the site's folders go under ``tmp_path/www``."""
    return {"files": {"roots": [str(tmp_path / "www")]}}


def install(folder: Path, entry_points: str) -> None:
    """A distribution on ``folder``: its dist-info naming ``entry_points``."""
    info = folder / "reconcile_sites-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reconcile-sites\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[reconcile.providers]\n{entry_points}\n")


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example operator installed: its entry point ``sites = sites:operator``."""
    folder = tmp_path / "site-packages"
    install(folder, "sites = sites:operator")
    monkeypatch.syspath_prepend(str(folder))
    return folder


class TestInPython:
    """The operator in a service's own event loop."""

    async def test_the_runtime_runs_the_operator(self, tmp_path: Path) -> None:
        """Runtime(operators=[...]): the object is defaulted by the mutating hook, stored
        canonical, and reconciled by the operator's controller."""
        async with Runtime(
            tmp_path / "ops.db",
            providers=[FilesProvider()],
            provider_config=files_config(tmp_path),
            operators=[sites.operator],
        ) as runtime:
            applied = await runtime.apply(SITE)
            assert applied.spec == sites.StaticSiteSpec(
                title="Docs", pages=dict(sorted(SITE["spec"]["pages"].items()))
            )  # type: ignore[index]
            assert list(applied.spec.pages) == ["about.html", "index.html"]
            ready = await runtime.wait_ready("site", "docs", timeout=30)
            assert (ready.status.pages, ready.status.ready_children) == (2, 3)
            assert (tmp_path / "www" / "docs" / "index.html").read_text() == sites.render(ready, "index.html")
            with pytest.raises(
                reconcile.InvalidError, match=r"spec.title: 'Docs' is already the title of site docs"
            ):
                await runtime.apply({**SITE, "metadata": {"name": "docs-2"}, "spec": {"title": "Docs"}})

    async def test_include_after_start(self, tmp_path: Path) -> None:
        """runtime.include(operator) once started: its kinds join the client's and its
        controllers start at once; a Reconciler class is hosted as a function is."""
        sites_kind = reconcile.Kind(
            "later.example.dev/v1", "Later", sites.StaticSiteSpec, sites.StaticSiteStatus
        )
        later = Operator("later", kinds=[sites_kind])
        seen: list[str] = []

        @later.controller(sites_kind)
        class LaterReconciler:
            def __init__(self, context: reconcile.Context) -> None:
                self.context = context

            async def reconcile(self, request: reconcile.Request) -> None:
                seen.append(request.name)

        async with Runtime(tmp_path / "later.db", providers=[]) as runtime:
            runtime.include(later)
            manifest = {**SITE, "apiVersion": "later.example.dev/v1", "kind": "Later"}
            await runtime.apply(manifest)
            await settle(lambda: "docs" in seen)
        assert LaterReconciler.__name__ == "LaterReconciler"  # the decorator returns the class

    def test_a_reconcile_function_of_the_wrong_shape_is_refused_at_once(self) -> None:
        """What is neither a Reconciler, a class nor a factory is refused when declared."""
        with pytest.raises(TypeError, match="is not a Reconciler"):
            Operator("bad").add_controller(sites.SITE, 42)  # type: ignore[arg-type]


class TestEntryPoints:
    """A provider-less kinds package under ``reconcile.providers``."""

    @pytest.mark.usefixtures("installed")
    def test_the_package_is_no_provider_but_its_kinds_are_known(self) -> None:
        """Its kinds join every registry (no provider); discover_providers leaves it out."""
        assert "sites" not in [p.name for p in discover_providers()]
        [package] = [p for p in discover().packages if p.name == "sites"]
        assert package.source is sites.operator
        registry = KindRegistry.from_entry_points()
        kind = registry.resolve("site")
        assert kind is sites.SITE
        assert registry.provider_of(kind) is None

    def test_a_list_of_kinds_is_a_package_too(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An entry point naming an iterable of Kind: its kinds, under the entry point's name."""
        install(tmp_path / "more", "site-kinds = sites:kinds")
        monkeypatch.syspath_prepend(str(tmp_path / "more"))
        [package] = [p for p in discover().packages if p.name == "site-kinds"]
        assert package.kinds == (sites.SITE,)

    @pytest.mark.usefixtures("installed")
    async def test_the_runtime_runs_an_installed_operator(self, tmp_path: Path) -> None:
        """A Runtime discovering what is installed runs the operator's controller."""
        async with Runtime(tmp_path / "installed.db", provider_config=files_config(tmp_path)) as runtime:
            await runtime.apply(SITE)
            ready = await runtime.wait_ready("StaticSite", "docs", timeout=30)
        assert ready.status.pages == 2

    @pytest.mark.usefixtures("installed")
    async def test_an_installed_operator_given_again_runs_once(self, tmp_path: Path) -> None:
        """Installed and given as operators=[...]: one controller, not two."""
        async with Runtime(tmp_path / "once.db", operators=[sites.operator]) as runtime:
            names = [name for name in runtime.controllers if name.startswith("staticsite.")]
        assert names == ["staticsite.sites.example.dev"]

    @pytest.mark.usefixtures("installed")
    def test_load_provider_refuses_a_kinds_package(self) -> None:
        """load_provider, asked for a provider, names an entry point that is a kinds package."""
        from importlib import metadata  # noqa: PLC0415

        from reconcile.model.discovery import load_provider  # noqa: PLC0415

        [entry] = [e for e in metadata.entry_points(group="reconcile.providers") if e.name == "sites"]
        with pytest.raises(reconcile.ProviderLoadError, match=r"'sites'.*is not a provider"):
            load_provider(entry)

    def test_the_project_declares_its_entry_point(self) -> None:
        """The example's pyproject names the operator under reconcile.providers."""
        project = tomllib.loads((PROJECT / "pyproject.toml").read_text())
        assert project["project"]["entry-points"]["reconcile.providers"] == {"sites": "sites:operator"}


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], installed: Path) -> Cli:
    """The command line with the operator installed."""
    cli = Cli(tmp_path, capsys)
    (tmp_path / "www").mkdir()
    return cli


class TestTheCommandLine:
    """Every command on a custom kind, learnt from the entry point."""

    def test_apply_get_describe_history_plan_run(self, cli: Cli) -> None:
        """The kind's columns in get (more with -o wide), its hooks and columns in
        explain, describe and history of its object, plan and run --once."""
        cli.write("site.yaml", (PROJECT / "site.yaml").read_text())
        code, out, err = cli("apply", "-f", str(cli.manifests))
        assert (code, out.strip(), err) == (0, "staticsite.sites.example.dev/docs created", "")
        code, out, _ = cli("diff", "-f", str(cli.manifests))  # compared as the hooks default it
        assert (code, out) == (0, "")
        code, out, _ = cli("get", "staticsites")
        assert code == 0
        header, row = out.splitlines()
        assert header.split() == ["NAME", "TITLE", "PAGES", "READY", "SYNCED", "REASON", "AGE"]
        assert row.split()[:2] == ["docs", "Docs"]
        code, out, _ = cli("plan", "-f", str(cli.manifests))
        assert code == 0, out
        code, out, err = cli("--root", str(cli.tmp / "www"), "run", "--once", "--timeout", "30", "-q")
        assert code == 0, err
        code, out, _ = cli("get", "site", "docs", "-o", "wide")
        assert code == 0
        header, row = out.splitlines()
        assert header.split()[:4] == ["NAME", "TITLE", "PAGES", "BUCKET"]
        assert row.split()[:4] == ["docs", "Docs", "2", "True"]  # no bucket: an empty cell
        code, out, _ = cli("explain", "site")
        assert code == 0
        assert "PRINTER COLUMNS:" in out
        assert ".spec.title" in out
        assert "ADMISSION HOOKS:" in out
        assert out.index("normalise") < out.index("unique_title")
        code, out, _ = cli("describe", "site", "docs")
        assert code == 0
        assert "title: Docs" in out
        code, out, _ = cli("history", "site", "docs", "-o", "json")
        assert code == 0
        types = [e["type"] for e in json.loads(out)]
        assert types[0] == "Created"
        assert set(types[1:]) == {"StatusChanged"}

    def test_a_document_its_hook_refuses(self, cli: Cli) -> None:
        """The hook's message and field path reach the user; exit 2; nothing stored."""
        cli.write(
            "a.yaml",
            "apiVersion: sites.example.dev/v1\nkind: StaticSite\nmetadata: {name: a}\nspec: {title: T}\n",
        )
        assert cli("apply", "-f", str(cli.manifests / "a.yaml"))[0] == 0
        revision = cli.revision()
        cli.write(
            "b.yaml",
            "apiVersion: sites.example.dev/v1\nkind: StaticSite\nmetadata: {name: b}\nspec: {title: T}\n",
        )
        code, out, err = cli("apply", "-f", str(cli.manifests / "b.yaml"))
        assert code == 2
        assert out == ""
        assert "spec.title: 'T' is already the title of site a" in err
        assert "unique_title" in err
        assert cli.revision() == revision


PLAIN = '''\
"""A kind whose status is its own attrs class, not reconcile.Status."""
import attrs
from reconcile import Kind, PrinterColumn


@attrs.frozen
class NoteSpec:
    text: str = ""


@attrs.frozen
class NoteStatus:
    seen: bool = False


columns = [PrinterColumn("Text", ".spec.text")]
kinds = [Kind("notes.example.dev/v1", "Memo", NoteSpec, NoteStatus, printer_columns=columns)]
'''


class TestImported:
    """Kinds and operators named with --import."""

    def test_run_runs_an_imported_operator(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """--import MODULE:OPERATOR: run --once runs its controller to Ready."""
        monkeypatch.chdir(PROJECT.parents[1])
        monkeypatch.setattr(sys, "path", list(sys.path))
        cli = Cli(tmp_path, capsys)
        imported = ("--import", "examples.operator.sites:operator")
        assert cli(*imported, "apply", "-f", str(PROJECT / "site.yaml"))[0] == 0
        code, _, err = cli(*imported, "--root", str(tmp_path), "run", "--once", "--timeout", "30", "-q")
        assert code == 0, err
        code, out, _ = cli(*imported, "get", "site", "docs", "-o", "jsonpath={.status.pages}")
        assert (code, out.strip()) == (0, "2")

    def test_a_status_of_its_own_shows(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A status class that is not Status: get and describe show the object."""
        (tmp_path / "memos.py").write_text(PLAIN)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "path", list(sys.path))
        monkeypatch.delitem(sys.modules, "memos", raising=False)
        cli = Cli(tmp_path, capsys)
        memo = cli.write(
            "m.yaml", "apiVersion: notes.example.dev/v1\nkind: Memo\nmetadata: {name: m}\nspec: {text: hi}\n"
        )
        assert cli("--import", "memos", "apply", "-f", str(memo))[0] == 0
        code, out, _ = cli("--import", "memos", "get", "memo")
        assert code == 0
        assert out.splitlines()[1].split()[:4] == ["m", "hi", "Unknown", "Unknown"]
        code, out, _ = cli("--import", "memos", "describe", "memo", "m")
        assert code == 0
        assert "Observed Generation:  <none>" in out
