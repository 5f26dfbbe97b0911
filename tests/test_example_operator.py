"""Custom kinds in a few lines: the example operator (examples/operator/sites.py, a
``StaticSite`` kind with printer columns, admission hooks and a controller, no
provider) runs in a Runtime, installs under the ``reconcile.providers`` entry points as a
kinds package, and every command works on it: apply, get (with its columns), describe,
explain, history, plan, run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import checkout_path, settle
from s3_server import moto_server, reset
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


class Reconcile:
    """``python -m reconcile --db DB --root WWW --import sites:operator ARGS`` as a child
    process, in a fresh folder: the operator end to end, as a user runs it."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.folder = folder
        self.www = folder / "www"
        self.www.mkdir()
        self.options = (
            "--db",
            str(folder / "sites.db"),
            "--root",
            str(self.www),
            "--import",
            "sites:operator",
        )
        self.options += options
        self.env = {**os.environ, "PYTHONPATH": checkout_path(PROJECT), "PYTHONUNBUFFERED": "1"}

    def __call__(self, *args: str, expect: int = 0) -> str:
        """Run a command; its output (stdout), after checking its exit code."""
        result = subprocess.run(
            [sys.executable, "-m", "reconcile", *self.options, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.folder,
            timeout=120,
            check=False,
        )
        assert result.returncode == expect, f"{args}: {result.returncode}\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        return result.stdout

    def apply(self, name: str, pages: dict[str, str], **spec: object) -> None:
        """Apply a StaticSite (written to a manifest first, as a user would)."""
        manifest = {**SITE, "metadata": {"name": name}, "spec": {"pages": pages, **spec}}
        path = self.folder / f"{name}.yaml"
        path.write_text(json.dumps(manifest))  # JSON is YAML
        self("apply", "-f", str(path))

    def converge(self) -> None:
        """``run --once``: every controller (the operator's, the providers') and the
        garbage collector until nothing is left to do."""
        self("run", "--once", "--timeout", "60", "-q")

    def get(self, kind: str, *names: str) -> list[dict[str, Any]]:
        """The objects ``get -o json`` lists."""
        out = json.loads(self("get", kind, *names, "-o", "json"))
        return list(out["items"]) if "items" in out else [out]

    def names(self, kind: str) -> set[str]:
        """The names of the objects of ``kind``."""
        return {o["metadata"]["name"] for o in self.get(kind)}

    def history(self, kind: str, name: str) -> list[tuple[str, str]]:
        """(type, actor) of each event of an object, from ``history -o json``."""
        return [(e["type"], e["actor"]) for e in json.loads(self("history", kind, name, "-o", "json"))]

    def on_disk(self) -> dict[str, str]:
        """The site folders' files, by path under the root."""
        return {
            str(p.relative_to(self.www)): p.read_text() for p in sorted(self.www.rglob("*")) if p.is_file()
        }


@pytest.fixture
def user(tmp_path: Path) -> Reconcile:
    """The operator's user, at a shell."""
    return Reconcile(tmp_path)


PAGES = {"index.html": "<h1>Welcome</h1>", "about.html": "<p>About us</p>"}
MANAGER = "site-controller"
COLLECTOR = "garbage-collector"


def page(title: str, body: str) -> str:
    """A page as the operator renders it."""
    return f"<!doctype html>\n<title>{title}</title>\n{body}\n"


class TestEndToEnd:
    """The example operator through the CLI, as child processes: create, change a page,
    remove one, edit a child by hand, delete under each propagation policy; all told by
    ``reconcile history``."""

    def test_create_change_remove_and_put_back(self, user: Reconcile) -> None:
        """Each step converges with ``run --once``; the disk and history say what happened."""
        user.apply("docs", PAGES)
        user.converge()
        assert user.on_disk() == {
            "docs/about.html": page("Docs", "<p>About us</p>"),
            "docs/index.html": page("Docs", "<h1>Welcome</h1>"),
        }
        [site] = user.get("site", "docs")
        assert (site["status"]["pages"], site["status"]["readyChildren"]) == (2, 3)
        assert user.names("file") == {"docs.about.html", "docs.index.html"}
        [child] = user.get("file", "docs.index.html")
        [reference] = child["metadata"]["ownerReferences"]
        assert (reference["kind"], reference["name"], reference["uid"]) == (
            "StaticSite",
            "docs",
            site["metadata"]["uid"],
        )
        assert (reference["controller"], reference["blockOwnerDeletion"]) == (True, True)
        assert "spec/content" in child["metadata"]["managedFields"][MANAGER]
        assert user.history("file", "docs.index.html")[0] == ("Created", MANAGER)

        # Change a page: its File's spec, then the file on disk.
        user.apply("docs", {**PAGES, "index.html": "<h1>Welcome back</h1>"})
        user.converge()
        assert user.on_disk()["docs/index.html"] == page("Docs", "<h1>Welcome back</h1>")
        assert ("SpecChanged", MANAGER) in user.history("file", "docs.index.html")

        # Remove a page: its File goes, from the store and from the disk.
        user.apply("docs", {"index.html": "<h1>Welcome back</h1>"})
        user.converge()
        assert user.names("file") == {"docs.index.html"}
        assert list(user.on_disk()) == ["docs/index.html"]
        gone = user.history("file", "docs.about.html")
        assert ("DeletionRequested", MANAGER) in gone
        assert gone[-1][0] == "Deleted"

        # Edit a child by hand: the operator takes its field back.
        events = len(user.history("file", "docs.index.html"))
        user("patch", "file", "docs.index.html", "--type", "merge", "-p", '{"spec": {"content": "by hand"}}')
        user.converge()
        [child] = user.get("file", "docs.index.html")
        assert child["spec"]["content"] == page("Docs", "<h1>Welcome back</h1>")
        assert user.on_disk()["docs/index.html"] == child["spec"]["content"]
        edits = [(t, a) for t, a in user.history("file", "docs.index.html")[events:] if t == "SpecChanged"]
        assert [a for _, a in edits][-1] == MANAGER  # the hand edit, then the operator's
        assert len(edits) == 2

        # Change the file on disk: the files provider's drift repair puts it back.
        (user.www / "docs" / "index.html").write_text("by hand\n")
        user.converge()
        assert user.on_disk()["docs/index.html"] == page("Docs", "<h1>Welcome back</h1>")
        assert "DriftDetected" in [t for t, _ in user.history("file", "docs.index.html")]

    def test_delete_in_the_background(self, user: Reconcile) -> None:
        """The site goes at once; the collector deletes its children, then their files."""
        user.apply("docs", PAGES)
        user.converge()
        user("delete", "site", "docs", "--cascade=background")
        assert user.names("site") == set()
        user.converge()
        assert user.names("file") == user.names("directory") == set()
        assert user.on_disk() == {}
        assert not (user.www / "docs").exists()
        told = user.history("file", "docs.index.html")
        assert ("GarbageCollected", COLLECTOR) in told
        assert told[-1][0] == "Deleted"

    def test_delete_in_the_foreground(self, user: Reconcile) -> None:
        """The site waits, with the foregroundDeletion finalizer, until its children are
        gone; the collector removes it last."""
        user.apply("docs", PAGES)
        user.converge()
        user("delete", "site", "docs", "--cascade=foreground")
        [site] = user.get("site", "docs")
        assert site["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert site["metadata"]["deletionTimestamp"]
        user.converge()
        assert user.names("site") == user.names("file") == user.names("directory") == set()
        assert user.on_disk() == {}
        site_told = user.history("site", "docs")
        assert site_told[-2][0] == "DeletionRequested"
        assert site_told[-1] == ("Deleted", COLLECTOR)
        assert ("GarbageCollected", COLLECTOR) in user.history("file", "docs.about.html")

    def test_delete_orphaning_the_children(self, user: Reconcile) -> None:
        """The site goes; its children stay, their files too, without the owner
        reference; an apply of the site again adopts them."""
        user.apply("docs", PAGES)
        user.converge()
        user("delete", "site", "docs", "--cascade=orphan")
        user.converge()
        assert user.names("site") == set()
        assert user.names("file") == {"docs.about.html", "docs.index.html"}
        assert all(not f["metadata"]["ownerReferences"] for f in user.get("file"))
        assert set(user.on_disk()) == {"docs/about.html", "docs/index.html"}
        told = user.history("file", "docs.index.html")
        assert told[-2:] == [("Orphaned", COLLECTOR), ("MetadataChanged", COLLECTOR)]
        user.apply("docs", PAGES)
        user.converge()
        [site] = user.get("site", "docs")
        uids = {f["metadata"]["ownerReferences"][0]["uid"] for f in user.get("file")}
        assert uids == {site["metadata"]["uid"]}

    def test_an_unknown_policy_is_refused(self, user: Reconcile) -> None:
        """--cascade with another value: a usage error (exit 2); nothing is deleted."""
        user.apply("docs", PAGES)
        user("delete", "site", "docs", "--cascade=sideways", expect=2)
        assert user.names("site") == {"docs"}


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """A moto_server (skipped loudly when absent; under CI=true it must be there)."""
    with moto_server() as url:
        yield url


class TestWithABucket:
    """A site that names a bucket publishes to S3 too: a Bucket and an Object per page
    (moto_server, a real S3 HTTP server)."""

    def test_a_bucket_and_its_objects(self, s3_url: str, tmp_path: Path) -> None:
        """Created with the site, a removed page's Object deleted from the bucket, the
        bucket emptied and deleted with the site (in the background)."""
        reset(s3_url)
        user = Reconcile(tmp_path, "-P", f"s3.endpoint_url={s3_url}", "-P", "s3.addressing_style=path")
        user.env.update(
            AWS_ACCESS_KEY_ID="AKIATESTING",
            AWS_SECRET_ACCESS_KEY="testing-secret",  # noqa: S106 - moto's, to nobody
            AWS_DEFAULT_REGION="eu-west-1",
            AWS_CONFIG_FILE="/nonexistent/aws-config",
            AWS_SHARED_CREDENTIALS_FILE="/nonexistent/aws-credentials",
        )
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
            user.env.pop(name, None)
        user.apply("docs", PAGES, bucket="docs-site")
        user.converge()
        assert user.names("bucket") == {"docs-site"}
        assert user.names("object") == {"docs.about.html", "docs.index.html"}
        [site] = user.get("site", "docs")
        assert (site["status"]["readyChildren"], site["status"]["conditions"][0]["status"]) == (6, "True")
        assert keys_in(s3_url, "docs-site") == {
            "about.html": page("Docs", "<p>About us</p>"),
            "index.html": page("Docs", "<h1>Welcome</h1>"),
        }

        user.apply("docs", {"index.html": "<h1>Welcome</h1>"}, bucket="docs-site")
        user.converge()
        assert set(keys_in(s3_url, "docs-site")) == {"index.html"}
        assert ("DeletionRequested", MANAGER) in user.history("object", "docs.about.html")

        user("delete", "site", "docs")
        user.converge()
        assert user.names("bucket") == user.names("object") == set()
        assert ("GarbageCollected", COLLECTOR) in user.history("bucket", "docs-site")
        assert keys_in(s3_url, "docs-site") is None


def keys_in(url: str, bucket: str) -> dict[str, str] | None:
    """The objects of ``bucket`` on the S3 server at ``url``, by key (None: no bucket)."""
    import boto3  # noqa: PLC0415 - only with a server
    from botocore.exceptions import ClientError  # noqa: PLC0415

    s3 = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="eu-west-1",
        aws_access_key_id="AKIATESTING",
        aws_secret_access_key="testing-secret",  # noqa: S106 - moto's, to nobody
    )
    try:
        listed = s3.list_objects_v2(Bucket=bucket)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchBucket":
            return None
        raise
    keys = [entry["Key"] for entry in listed.get("Contents", [])]
    return {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode() for key in keys}
