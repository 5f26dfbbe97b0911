"""``plan -f DIR -out FILE`` then ``apply FILE``: exactly what was reviewed, or nothing."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from test_cli import Cli


def page(name: str, content: str = "hello") -> str:
    """A File manifest."""
    return (
        "apiVersion: files.reconcile.dev/v1\nkind: File\n"
        f"metadata: {{name: {name}}}\nspec: {{path: {name}.txt, content: {content}}}\n"
    )


class Planner(Cli):
    """The command line with the manifest folder as the files provider's root."""

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """Exit code, stdout, stderr, with ``--root`` the manifest folder."""
        return super().__call__("--root", str(self.manifests), *args)


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Planner:
    """The command line on a fresh database."""
    return Planner(tmp_path, capsys)


class TestSavedPlan:
    """A saved plan is applied exactly, or refused when the state moved."""

    def test_apply_the_saved_plan(self, cli: Planner) -> None:
        """The plan file is JSON with a format and version, readable by its owner only;
        apply FILE stores what it planned, and a second apply of it is refused."""
        cli.write("a.yaml", page("a"))
        plan = cli.tmp / "site.plan"
        code, out, err = cli("plan", "-f", str(cli.manifests), "-out", str(plan))
        assert code == 0, err
        assert "Plan: 1 to create" in out
        assert f"Saved the plan to {plan}" in err
        saved = json.loads(plan.read_text())
        assert (saved["format"], saved["version"], saved["revision"]) == ("reconcile.dev/plan", 2, 0)
        assert [d["resourceVersion"] for d in saved["documents"]] == [None]
        assert stat.S_IMODE(plan.stat().st_mode) == 0o600
        cli.write("a.yaml", page("a", "edited after the plan"))  # the plan holds its own copy
        code, out, err = cli("apply", str(plan))
        assert (code, out.strip(), err) == (0, "file.files.reconcile.dev/a created", "")
        _, out, _ = cli("get", "file", "a", "-o", "jsonpath={.spec.content}")
        assert out.strip() == "hello"
        code, _, err = cli("apply", str(plan))
        assert code == 1
        assert "file.files.reconcile.dev/a appeared since the plan" in err

    def test_refused_when_a_planned_object_changed(self, cli: Planner) -> None:
        """An object changed after the plan: apply FILE fails naming it and both
        versions, and stores nothing."""
        path = cli.write("a.yaml", page("a"))
        assert cli("apply", "-f", str(path))[0] == 0
        plan = cli.tmp / "site.plan"
        cli.write("a.yaml", page("a", "two"))
        assert cli("plan", "-f", str(cli.manifests), "-out", str(plan))[0] == 0
        before = json.loads(plan.read_text())["documents"][0]["resourceVersion"]
        cli.write("a.yaml", page("a", "three"))
        assert cli("apply", "-f", str(path))[0] == 0
        revision = cli.revision()
        code, out, err = cli("apply", str(plan))
        assert (code, out) == (1, "")
        assert "the state moved since the plan was made" in err
        assert (
            f"file.files.reconcile.dev/a changed since the plan (resourceVersion {before}, now {revision})"
            in err
        )
        assert "make a new plan" in err
        assert cli.revision() == revision

    def test_other_objects_moving_do_not_matter(self, cli: Planner) -> None:
        """The store moved, but not the planned objects: the plan applies."""
        cli.write("a.yaml", page("a"))
        plan = cli.tmp / "site.plan"
        assert cli("plan", "-f", str(cli.manifests), "-out", str(plan))[0] == 0
        other = cli.tmp / "other.yaml"
        other.write_text(page("b"))
        assert cli("apply", "-f", str(other))[0] == 0
        code, out, _ = cli("apply", str(plan))
        assert (code, out.strip()) == (0, "file.files.reconcile.dev/a created")

    def test_refused_when_the_manifests_admit_differently(self, cli: Planner) -> None:
        """A source file changed after the plan: the object would not be what was
        reviewed, so nothing is applied."""
        (cli.manifests / "src.txt").write_text("one")
        cli.write("a.yaml", page("a").replace("content: hello", "source: src.txt"))
        plan = cli.tmp / "site.plan"
        assert cli("plan", "-f", str(cli.manifests), "-out", str(plan))[0] == 0
        (cli.manifests / "src.txt").write_text("two")
        code, _, err = cli("apply", str(plan))
        assert code == 1
        assert "admits differently than when planned (spec.sourceDigest changed): make a new plan" in err
        assert cli.revision() == 0

    @pytest.mark.parametrize(
        ("text", "said"),
        [
            ("not json", "not a saved plan (not JSON)"),
            ('{"format": "something else"}', 'not a saved plan (no "format": "reconcile.dev/plan")'),
            ('{"format": "reconcile.dev/plan", "version": 9}', "a saved plan of version 9"),
            ('{"format": "reconcile.dev/plan", "version": 2}', "a damaged saved plan (KeyError"),
        ],
    )
    def test_what_is_not_a_plan(self, cli: Planner, text: str, said: str) -> None:
        """A file that is not a saved plan of this version is bad input, whatever its name."""
        path = cli.tmp / "site.plan.json"
        path.write_text(text)
        code, _, err = cli("apply", str(path))
        assert code == 2
        assert err.startswith(f"error: {path}: {said}")

    def test_a_plan_is_recognised_by_content(self, cli: Planner) -> None:
        """A saved plan given to -f (whatever its name) is refused with the command to use;
        -out without -f, and a plan with -f, are bad input too."""
        cli.write("a.yaml", page("a"))
        plan = cli.tmp / "plan.yaml"
        assert cli("plan", "-f", str(cli.manifests), "-out", str(plan))[0] == 0
        code, _, err = cli("apply", "-f", str(plan))
        assert (code, err.strip()) == (
            2,
            f"error: {plan} is a saved plan: apply it with `reconcile apply {plan}` (no -f)",
        )
        assert cli("plan", "-out", str(plan))[0] == 2
        code, _, err = cli("apply", str(plan), "-f", str(cli.manifests))
        assert code == 2
        assert "a saved plan is applied as it is" in err
        assert cli("apply")[0] == 2
        assert cli.revision() == 0
