"""Who changed what: ``--as`` and ``--field-manager``, recorded in every event the CLI
writes and shown by ``history``."""

from __future__ import annotations

import getpass
import json
import socket
from pathlib import Path

import pytest
from test_cli import HEAD, Cli


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a fresh database."""
    return Cli(tmp_path, capsys)


class TestWhoChangedWhat:
    """The user and the field manager of each write."""

    def test_two_users_tell_apart_in_history(self, cli: Cli) -> None:
        """Two --as users apply and delete: history's BY column and describe's events
        name each; -o json has both the user and the field manager (actor)."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("--as", "alice@laptop", "apply", "-f", str(path))[0] == 0
        cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: two}\n")
        # bob's manager takes over the content alice's manager set (server-side apply).
        bob = ("--as", "bob", "--field-manager", "deploy-bot", "apply", "--force-conflicts", "-f", str(path))
        assert cli(*bob)[0] == 0
        code, out, _ = cli("history", "file", "x")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split()[:5] == ["REVISION", "TIME", "TYPE", "BY", "DETAIL"]
        assert "Created" in lines[1]
        assert "alice@laptop" in lines[1]
        assert "SpecChanged" in lines[2]
        assert "bob" in lines[2]
        code, out, _ = cli("history", "file", "x", "-o", "json")
        events = json.loads(out)
        assert [(e["type"], e["user"], e["actor"]) for e in events] == [
            ("Created", "alice@laptop", "reconcile"),
            ("SpecChanged", "bob", "deploy-bot"),
        ]
        code, out, _ = cli("history", "file", "x", "-o", "yaml")
        assert "user: bob" in out
        assert "actor: deploy-bot" in out
        code, out, _ = cli("describe", "file", "x")
        assert "BY" in out
        assert "alice@laptop" in out

    def test_the_default_user_is_the_os_user_at_the_host(self, cli: Cli) -> None:
        """Without --as, writes are by ``user@host`` as the OS knows them, through the
        field manager ``reconcile``."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        assert cli("delete", "file", "x")[0] == 0
        _, out, _ = cli("history", "file", "x", "-o", "json")
        expected = f"{getpass.getuser()}@{socket.gethostname()}"
        assert {(e["user"], e["actor"]) for e in json.loads(out)} == {(expected, "reconcile")}

    def test_the_field_manager_owns_what_it_applied(self, cli: Cli) -> None:
        """--field-manager is the key of the labels and spec fields it applied in
        managedFields."""
        labelled = HEAD.replace("metadata: {name: x}", "metadata: {name: x, labels: {app: web}}")
        path = cli.write("x.yaml", labelled + "spec: {path: x.txt}\n")
        assert cli("--field-manager", "ci", "apply", "-f", str(path))[0] == 0
        code, out, _ = cli("get", "file", "x", "-o", "jsonpath={.metadata.managedFields}")
        assert (code, json.loads(out)) == (0, {"ci": ["labels/app", "spec/path"]})

    @pytest.mark.parametrize(
        ("args", "said"),
        [
            (("--as", ""), "--as: must not be empty"),
            (("--as", "eve\x1b[2J"), "--as: 'eve\\x1b[2J': must be printable (no control characters)"),
            (("--field-manager", "m" * 129), "--field-manager: must be at most 128 characters, not 129"),
        ],
    )
    def test_a_bad_name_is_bad_input(self, cli: Cli, args: tuple[str, str], said: str) -> None:
        """An empty, unprintable or too long name is refused (exit 2) before anything is written."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt}\n")
        code, _, err = cli(*args, "apply", "-f", str(path))
        assert (code, err.strip()) == (2, f"error: {said}")
        assert cli.revision() == 0
