"""``apply --prune -l SELECTOR``: what a folder no longer declares goes, with the apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import widget
from test_cli import Cli

from reconcile import connect
from reconcile.errors import ConflictError
from reconcile.model.meta import ObjectKey
from reconcile.testing import example_kinds


def page(name: str, app: str = "site") -> str:
    """A File labelled ``app``."""
    return (
        "apiVersion: files.reconcile.dev/v1\nkind: File\n"
        f"metadata: {{name: {name}, labels: {{app: {app}}}}}\nspec: {{path: {name}.txt, content: {name}}}\n"
    )


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a fresh database."""
    return Cli(tmp_path, capsys)


class TestPrune:
    """The set a selector names is what the folder declares."""

    def test_what_the_folder_no_longer_declares_is_pruned(self, cli: Cli) -> None:
        """A file removed from the folder is deleted by the next apply --prune -l, and said
        so; objects outside the selector and those still declared stay."""
        cli.write("a.yaml", page("a"))
        b = cli.write("b.yaml", page("b"))
        other = cli.tmp / "other.yaml"
        other.write_text(page("c", app="blog"))
        assert cli("--root", str(cli.manifests), "apply", "-f", str(other))[0] == 0
        code, out, _ = cli(
            "--root", str(cli.manifests), "apply", "--prune", "-l", "app=site", "-f", str(cli.manifests)
        )
        assert (code, sorted(out.splitlines())) == (
            0,
            ["file.files.reconcile.dev/a created", "file.files.reconcile.dev/b created"],
        )
        b.unlink()
        code, out, err = cli(
            "--as",
            "carol",
            "--root",
            str(cli.manifests),
            "apply",
            "--prune",
            "-l",
            "app=site",
            "-f",
            str(cli.manifests),
        )
        assert (code, out.splitlines(), err) == (
            0,
            ["file.files.reconcile.dev/a unchanged", "file.files.reconcile.dev/b pruned"],
            "",
        )
        # Deleted: the runner's cleanup (it holds the managed finalizer) removes the file.
        code, out, _ = cli("get", "file", "b", "-o", "jsonpath={.metadata.deletionTimestamp}")
        assert code == 0
        assert out.strip() not in {"", "None"}
        _, out, _ = cli("get", "file", "c", "-o", "jsonpath={.metadata.deletionTimestamp}")
        assert out.strip() == "None"
        _, out, _ = cli("history", "file", "b", "-o", "json")
        assert (json.loads(out)[-1]["type"], json.loads(out)[-1]["user"]) == ("DeletionRequested", "carol")
        # Nothing more to prune: a second run says nothing of b.
        code, out, _ = cli(
            "--root", str(cli.manifests), "apply", "--prune", "-l", "app=site", "-f", str(cli.manifests)
        )
        assert (code, out.splitlines()) == (0, ["file.files.reconcile.dev/a unchanged"])

    def test_the_selector_filters_the_documents_too(self, cli: Cli) -> None:
        """-l applies only the documents it selects, as kubectl apply -l does."""
        cli.write("a.yaml", page("a"))
        cli.write("c.yaml", page("c", app="blog"))
        code, out, _ = cli("--root", str(cli.manifests), "apply", "-l", "app=blog", "-f", str(cli.manifests))
        assert (code, out.splitlines()) == (0, ["file.files.reconcile.dev/c created"])

    def test_a_refused_document_prunes_nothing(self, cli: Cli) -> None:
        """One document refused (an immutable field changed): nothing applied, nothing pruned."""
        cli.write("a.yaml", page("a"))
        b = cli.write("b.yaml", page("b"))
        assert cli("--root", str(cli.manifests), "apply", "-f", str(cli.manifests))[0] == 0
        before = cli.revision()
        b.unlink()
        cli.write("a.yaml", page("a").replace("path: a.txt", "path: moved.txt"))
        code, out, err = cli(
            "--root", str(cli.manifests), "apply", "--prune", "--all", "-f", str(cli.manifests)
        )
        assert (code, out) == (2, "")
        assert "spec.path: is immutable" in err
        assert cli.revision() == before

    @pytest.mark.parametrize(
        ("args", "said"),
        [
            (("--prune",), "--prune needs -l SELECTOR or --all"),
            (("--all",), "--all is for --prune"),
            (("--prune", "--all", "-l", "app=site"), "--prune: give -l SELECTOR or --all, not both"),
            (("--prune", "-l", "app in (a"), "-l: "),
            (("--prune", "-l", "app=site", "--plan"), "--plan does not show what --prune would delete"),
            (("-l", "app=site", "--plan"), "--plan plans every document: -l is for apply"),
        ],
    )
    def test_bad_options(self, cli: Cli, args: tuple[str, ...], said: str) -> None:
        """--prune without a set, or with two, is bad input; nothing is written."""
        cli.write("a.yaml", page("a"))
        code, out, err = cli("--root", str(cli.manifests), "apply", *args, "-f", str(cli.manifests))
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {said}")
        assert cli.revision() == 0


class TestPruneTransaction:
    """The prune and the apply are one transaction."""

    async def test_a_prune_made_on_stale_state_stores_nothing(self, tmp_path: Path) -> None:
        """An object changed since it was listed for pruning: a conflict, and neither the
        documents nor the deletions are stored (atomic); without atomic, the documents
        land and the stale deletion alone is refused."""
        async with connect(tmp_path / "state.db", kinds=example_kinds()) as client:
            old = await client.apply(widget("old"))
            await client.apply(widget("old", 2))  # changed after the caller's listing
            key = ObjectKey("example.reconcile.dev", "Widget", "default", "old")
            revision = await client.revision()
            stale = old.metadata.resource_version or 0
            results = await client.apply_many([widget("new")], atomic=True, prune=[(key, stale)])
            assert [r.outcome for r in results] == ["skipped", "refused"]
            assert isinstance(results[1].error, ConflictError)
            assert await client.revision() == revision
            results = await client.apply_many([widget("new")], prune=[(key, stale)])
            assert [r.outcome for r in results] == ["created", "refused"]
            current = (await client.get("widget", "old")).metadata.resource_version or 0
            results = await client.apply_many([widget("new")], atomic=True, prune=[(key, current)])
            assert [r.outcome for r in results] == ["unchanged", "pruned"]
            assert [o.metadata.name for o in (await client.list("widget")).items] == ["new"]
