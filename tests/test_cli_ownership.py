"""The command line's server-side apply (``apply --force-conflicts``,
``apply --field-manager``) and propagation policies (``delete --cascade``)."""

from __future__ import annotations

import json

import pytest
from test_cli import HEAD, Cli

from reconcile.cli.failing import EXIT_FAILURE, EXIT_INPUT


@pytest.fixture
def cli(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a fresh database."""
    return Cli(tmp_path, capsys)  # type: ignore[arg-type]


class TestFieldManagers:
    """Two field managers and one field."""

    def test_a_conflict_names_field_and_manager_and_force_takes_it(self, cli: Cli) -> None:
        """A second manager setting the first one's field to another value is refused
        (exit 1, as kubectl's, nothing stored), naming the field and the manager; --force-conflicts
        takes the field over."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("apply", "--field-manager", "alice", "-f", str(path))[0] == 0
        before = cli.revision()
        cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: two}\n")
        code, out, err = cli("apply", "--field-manager", "bob", "-f", str(path))
        assert code == EXIT_FAILURE, (out, err)
        assert 'conflict with "alice": spec.content' in err
        assert "--force-conflicts" in err
        assert cli.revision() == before
        code, out, err = cli("apply", "--field-manager", "bob", "--force-conflicts", "-f", str(path))
        assert code == 0, err
        code, out, _ = cli("get", "file", "x", "-o", "jsonpath={.metadata.managedFields}")
        assert json.loads(out) == {"alice": ["spec/path"], "bob": ["spec/content", "spec/path"]}

    def test_another_managers_field_stays(self, cli: Cli) -> None:
        """A manager declaring only some fields keeps the fields another manager owns."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("apply", "--field-manager", "alice", "-f", str(path))[0] == 0
        mode = cli.write("mode.yaml", HEAD + "spec: {path: x.txt, mode: '0600'}\n")
        assert cli("apply", "--field-manager", "bob", "-f", str(mode))[0] == 0
        _, out, _ = cli("get", "file", "x", "-o", "json")
        spec = json.loads(out)["spec"]
        assert (spec["content"], spec["mode"]) == ("one", "0600")

    def test_diff_and_plan_show_what_apply_would_do(self, cli: Cli) -> None:
        """diff (and plan) compare with the object as the apply would leave it: another
        manager's field is kept, so re-declaring alice's manifest differs in nothing."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("apply", "--field-manager", "alice", "-f", str(path))[0] == 0
        mode = cli.write("mode.yaml", HEAD + "spec: {path: x.txt, mode: '0600'}\n")
        assert cli("apply", "--field-manager", "bob", "-f", str(mode))[0] == 0
        code, out, _ = cli("--field-manager", "alice", "diff", "-f", str(path))
        assert (code, out) == (0, "")
        cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: two}\n")
        code, out, _ = cli("--field-manager", "alice", "diff", "-f", str(path))
        assert code == 1
        assert "-  content: one" in out
        assert "+  content: two" in out
        assert not [line for line in out.splitlines() if line.startswith(("-  mode", "+  mode"))]


class TestCascade:
    """delete --cascade."""

    def test_an_unknown_value_is_a_usage_error(self, cli: Cli) -> None:
        """--cascade=sideways: exit 2, the allowed values named, nothing deleted."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        before = cli.revision()
        code, _, err = cli("delete", "file", "x", "--cascade=sideways")
        assert code == EXIT_INPUT
        assert "'sideways' is not one of 'background', 'foreground', 'orphan'" in err
        assert cli.revision() == before
        assert cli("get", "file", "x")[0] == 0

    @pytest.mark.parametrize(
        ("cascade", "finalizer"), [("foreground", "foregroundDeletion"), ("orphan", "orphan")]
    )
    def test_the_policy_holds_the_owner_with_its_finalizer(
        self, cli: Cli, cascade: str, finalizer: str
    ) -> None:
        """--cascade=foreground and orphan mark the object with their finalizer, for the
        garbage collector of the runner to finish."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        code, _, err = cli("delete", "file", "x", f"--cascade={cascade}")
        assert code == 0, err
        code, out, _ = cli("get", "file", "x", "-o", "jsonpath={.metadata.finalizers}")
        assert finalizer in json.loads(out)


class TestRunCollects:
    """``reconcile run --once`` hosts the garbage collector and waits for it."""

    def test_a_background_deletion_takes_the_dependents(self, cli: Cli) -> None:
        """A File owning another, deleted in the background: run --once removes both,
        and their files; the dependent's history says the collector deleted it."""
        owner = cli.write("a.yaml", HEAD.replace("name: x", "name: a") + "spec: {path: a.txt, content: a}\n")
        assert cli("apply", "-f", str(owner))[0] == 0
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 0
        _, uid, _ = cli("get", "file", "a", "-o", "jsonpath={.metadata.uid}")
        reference = f"{{apiVersion: files.reconcile.dev/v1, kind: File, name: a, uid: {uid.strip()}}}"
        child = HEAD.replace("name: x", f"name: b, ownerReferences: [{reference}]")
        assert (
            cli("apply", "-f", str(cli.write("b.yaml", child + "spec: {path: b.txt, content: b}\n")))[0] == 0
        )
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 0
        assert (cli.manifests / "b.txt").exists()
        assert cli("delete", "file", "a")[0] == 0
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 0
        assert cli("get", "file", "b")[0] != 0
        assert not (cli.manifests / "a.txt").exists()
        assert not (cli.manifests / "b.txt").exists()
        _, out, _ = cli("history", "file", "b", "-o", "json")
        assert ("GarbageCollected", "garbage-collector") in {(e["type"], e["actor"]) for e in json.loads(out)}
