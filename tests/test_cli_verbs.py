"""The kubectl verbs on the embedded store, in process: ``edit``, ``patch``, ``label``,
``annotate``, ``wait``, ``completion``, and ``diff``'s exit codes. Each checks what is
stored afterwards (and that a refusal stores nothing), not only what is printed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import checkout_path
from test_cli import Cli
from test_cli_processes import flip_byte

from reconcile import KindRegistry, connect
from reconcile.api import Client
from reconcile.cli import editing, main
from reconcile.cli import waiting as waiting_module
from reconcile.cli.changing import Target, change_object
from reconcile.cli.waiting import Gone, HasCondition
from reconcile.errors import ConflictError
from reconcile.model.conditions import Condition, ConditionStatus

ROOT = Path(__file__).parents[1]
DEADLINE = 30.0
SITE = """\
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: index, labels: {app: site}}
spec: {path: out/index.html, content: "hello\\n"}
---
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: about, labels: {app: site}}
spec: {path: out/about.html, content: "about\\n"}
---
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: other}
spec: {path: out/other.html, content: "other\\n"}
"""
INDEX = "file.files.reconcile.dev/index"


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a database holding three Files (index and about labelled
    app=site, other without labels)."""
    runner = Cli(tmp_path, capsys)
    path = runner.write("site.yaml", SITE)
    assert runner("apply", "-f", str(path))[0] == 0
    return runner


def stored(cli: Cli, name: str = "index") -> dict[str, Any]:
    """The stored object, as ``get -o json`` prints it."""
    code, out, err = cli("get", "file", name, "-o", "json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_get_shows_documents_as_kubectl_and_they_apply_back_unchanged(cli: Cli) -> None:
    """get -o yaml and -o json leave out null optional fields and empty metadata, as
    kubectl shows a document; applying what get printed leaves the spec as it was (the
    generation does not move: only the applier's field ownership is recorded)."""
    code, out, err = cli("get", "file", "other", "-o", "yaml")
    assert code == 0, err
    assert "contentBase64" not in out
    assert "null" not in out
    assert "labels:" not in out  # (none)
    assert "annotations" not in out or "reconcile.dev" in out
    document = json.loads(cli("get", "file", "other", "-o", "json")[1])
    assert "source" not in document["spec"]
    assert document["spec"]["content"] == "other\n"
    path = cli.write("back.yaml", out + "\n")
    code, _, err = cli("apply", "-f", str(path))
    assert code == 0, err
    after = json.loads(cli("get", "file", "other", "-o", "json")[1])
    assert after["spec"] == document["spec"]
    assert after["metadata"]["generation"] == document["metadata"]["generation"]
    assert history_types(cli, "other")[-1] == "MetadataChanged"
    whole = json.loads(cli("get", "file", "other", "-o", "jsonpath={.spec}")[1] or "{}")
    assert whole.get("contentBase64", "absent") is None  # (jsonpath sees the stored object)


def history_types(cli: Cli, name: str = "index") -> list[str]:
    """The types of the object's events, oldest first."""
    code, out, _ = cli("history", "file", name, "-o", "json")
    assert code == 0
    return [event["type"] for event in json.loads(out)]


async def _set_condition(db: Path, name: str, status: str, generation: int | None, message: str) -> None:
    async with connect(db, kinds=KindRegistry.from_entry_points()) as client:
        obj = await client.get("file", name)
        stamped = obj.metadata.generation if generation is None else generation
        condition = Condition(
            "Ready",
            ConditionStatus(status),
            reason="Ok" if status == "True" else "ReconcileError",
            message=message,
            observed_generation=stamped,
        )
        new_status = attrs.evolve(obj.status, conditions=(condition,), observed_generation=stamped)
        await client.update_status(attrs.evolve(obj, status=new_status))


def set_ready(
    db: Path, name: str = "index", status: str = "True", *, generation: int | None = None, message: str = ""
) -> None:
    """Write the object's Ready condition (for the given generation: by default its
    current one), as a controller would."""
    asyncio.run(_set_condition(db, name, status, generation, message))


class TestPatch:
    """patch --type merge|json: through admission, on the version read."""

    def test_merge_patch(self, cli: Cli) -> None:
        """A merge patch changes spec and labels (null removes one); the same patch
        again changes nothing and appends nothing."""
        patch = '{"spec": {"content": "bye\\n"}, "metadata": {"labels": {"app": null, "tier": "web"}}}'
        code, out, err = cli("patch", "file/index", "-p", patch)
        assert (code, out) == (0, f"{INDEX} patched\n"), err
        obj = stored(cli)
        assert obj["spec"]["content"] == "bye\n"
        assert obj["metadata"]["labels"] == {"tier": "web"}
        assert obj["metadata"]["generation"] == 2
        revision = cli.revision()
        code, out, _ = cli("patch", "file", "index", "--type", "merge", "-p", patch)
        assert (code, out) == (0, f"{INDEX} patched (no change)\n")
        assert cli.revision() == revision

    def test_json_patch(self, cli: Cli) -> None:
        """A JSON patch's operations apply in order to the object's document; a YAML
        patch is read too."""
        patch = json.dumps(
            [
                {"op": "test", "path": "/spec/content", "value": "hello\n"},
                {"op": "replace", "path": "/spec/content", "value": "new\n"},
                {"op": "add", "path": "/metadata/annotations/note", "value": "by hand"},
                {"op": "remove", "path": "/metadata/labels/app"},
                {"op": "copy", "from": "/spec/content", "path": "/metadata/labels/copied"},
            ]
        )
        code, out, err = cli("patch", "file/index", "--type", "json", "-p", patch.replace("copied", "tier"))
        assert code == 2, "a label value with a newline is refused by admission"
        assert "metadata.labels['tier']" in err
        assert stored(cli)["spec"]["content"] == "hello\n", "nothing was written"
        code, out, err = cli(
            "patch",
            "file/index",
            "--type",
            "json",
            "-p",
            patch.replace(
                '{"op": "copy", "from": "/spec/content", "path": "/metadata/labels/copied"}',
                '{"op": "move", "from": "/metadata/annotations/note", "path": "/metadata/annotations/moved"}',
            ),
        )
        assert (code, out) == (0, f"{INDEX} patched\n"), err
        obj = stored(cli)
        assert obj["spec"]["content"] == "new\n"
        assert "labels" not in obj["metadata"]  # (empty: left out, as kubectl shows it)
        assert obj["metadata"]["annotations"] == {"moved": "by hand"}
        code, out, err = cli(
            "patch", "file/index", "--type", "json", "-p", "- {op: remove, path: /metadata/annotations/moved}"
        )
        assert (code, out) == (0, f"{INDEX} patched\n"), err
        assert "annotations" not in stored(cli)["metadata"]

    def test_a_failed_test_writes_nothing(self, cli: Cli) -> None:
        """A JSON patch is all or nothing: a failing operation after a good one writes
        nothing, exit 2, naming the operation."""
        revision = cli.revision()
        patch = json.dumps(
            [
                {"op": "replace", "path": "/spec/content", "value": "x"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": 7},
            ]
        )
        code, _, err = cli("patch", "file/index", "--type", "json", "-p", patch)
        assert code == 2
        assert err.strip().endswith("patch[1]: test /metadata/resourceVersion: is 1, not 7")
        assert cli.revision() == revision

    def test_admission_refuses(self, cli: Cli) -> None:
        """A patched spec admission refuses: exit 2 with the field path; nothing written."""
        revision = cli.revision()
        code, _, err = cli("patch", "file/index", "-p", '{"spec": {"mode": "0999"}}')
        assert code == 2
        assert "spec.mode: '0999' is not an octal permission" in err
        assert "Traceback" not in err
        assert cli.revision() == revision

    def test_only_spec_labels_and_annotations(self, cli: Cli) -> None:
        """The uid (or any other metadata) cannot be patched; status is ignored, said so."""
        revision = cli.revision()
        code, _, err = cli("patch", "file/index", "-p", '{"metadata": {"uid": "x", "finalizers": []}}')
        assert code == 2
        assert 'File "index": metadata.uid: cannot be changed here' in err
        assert "metadata.finalizers: cannot be changed here" in err
        code, out, err = cli("patch", "file/index", "-p", '{"status": {"observedGeneration": 7}}')
        assert (code, out) == (0, f"{INDEX} patched (no change)\n")
        assert "status is written by the controllers; the change to it was ignored" in err
        assert cli.revision() == revision

    def test_resource_version_is_a_precondition(self, cli: Cli) -> None:
        """A resourceVersion in the patch that is not the object's: a conflict (exit
        1), nothing written; the current one: written."""
        version = stored(cli)["metadata"]["resourceVersion"]
        patch = {"metadata": {"resourceVersion": version - 1}, "spec": {"content": "x\n"}}
        code, _, err = cli("patch", "file/index", "-p", json.dumps(patch))
        assert code == 1
        assert f"the change was made on resourceVersion {version - 1}, and it is at {version} now" in err
        assert stored(cli)["spec"]["content"] == "hello\n"
        patch["metadata"]["resourceVersion"] = version
        assert cli("patch", "file/index", "-p", json.dumps(patch))[0] == 0
        assert stored(cli)["spec"]["content"] == "x\n"

    def test_bad_patches(self, cli: Cli, tmp_path: Path) -> None:
        """A patch that does not parse, has the wrong shape, or is missing: exit 2."""
        for args, expected in [
            (["-p", "{nope"], "-p: not JSON or YAML"),
            (["-p", "[]"], "-p: a merge patch is a mapping"),
            (["--type", "json", "-p", "{}"], "-p: a JSON patch is a list of operations"),
            ([], "give the patch with -p (or --patch-file)"),
            (["--patch-file", str(tmp_path / "missing.json")], "cannot read"),
        ]:
            code, _, err = cli("patch", "file/index", *args)
            assert code == 2, args
            assert expected in err, (args, err)
        code, _, err = cli("patch", "file/nope", "-p", "{}")
        assert code == 1
        assert "not found" in err

    def test_patch_file(self, cli: Cli, tmp_path: Path) -> None:
        """--patch-file reads the patch from a file."""
        path = tmp_path / "patch.yaml"
        path.write_text("spec:\n  content: from a file\n")
        assert cli("patch", "file/index", "--patch-file", str(path))[0] == 0
        assert stored(cli)["spec"]["content"] == "from a file"


class _Interfering(Client):
    """A client whose first patch is preceded by somebody else's change: the version the
    change was made on is then stale."""

    armed = True
    count = 0

    async def patch(self, *args: Any, **kwargs: Any) -> Any:
        if self.armed:
            self.armed = False
            self.count += 1
            await super().patch("file", "index", {"metadata": {"labels": {"by": f"other{self.count}"}}})
        return await super().patch(*args, **kwargs)


class TestConcurrency:
    """A change made meanwhile is never overwritten."""

    async def test_a_conflict_is_redone_on_the_new_version(self, cli: Cli) -> None:
        """patch/label: the change is made again on what is there now, so both the other
        change and this one are kept; with a pinned version it is a conflict instead."""
        async with connect(cli.db, kinds=KindRegistry.from_entry_points()) as plain:
            client = _Interfering(plain.store, plain.kinds)
            target = Target(client.kinds.resolve("file"), "index", "default")

            def tier(document: dict[str, Any]) -> dict[str, Any]:
                document["metadata"]["labels"]["tier"] = "web"
                return document

            assert await change_object(client, target, tier)
            obj = await client.get("file", "index")
            assert obj.metadata.labels == {"app": "site", "by": "other1", "tier": "web"}
            client.armed = True
            version = obj.metadata.resource_version
            with pytest.raises(ConflictError, match="was modified"):
                await change_object(
                    client,
                    target,
                    lambda d: {**d, "spec": {**d["spec"], "content": "x"}},
                    resource_version=version,
                )
            assert (await client.get("file", "index")).spec.content == "hello\n"


class TestLabel:
    """label and annotate, with kubectl's arguments and rules."""

    def test_set_and_remove(self, cli: Cli) -> None:
        """KEY=VALUE sets, KEY- removes, in one write."""
        code, out, err = cli("label", "file", "index", "tier=web", "app-")
        assert (code, out) == (0, f"{INDEX} labeled\n"), err
        assert stored(cli)["metadata"]["labels"] == {"tier": "web"}
        assert history_types(cli)[-1] == "MetadataChanged"

    def test_overwrite(self, cli: Cli) -> None:
        """Another value for an existing key needs --overwrite (nothing written
        without); the value it has already is no change and no error."""
        revision = cli.revision()
        code, _, err = cli("label", "file/index", "app=web")
        assert code == 2
        assert '"app" already has a value (site), and --overwrite is false' in err
        assert cli.revision() == revision
        code, out, _ = cli("label", "file/index", "app=site")
        assert (code, out) == (0, f"{INDEX} not labeled\n")
        assert cli.revision() == revision
        code, out, _ = cli("label", "file/index", "app=web", "--overwrite")
        assert (code, out) == (0, f"{INDEX} labeled\n")
        assert stored(cli)["metadata"]["labels"] == {"app": "web"}

    def test_removing_what_is_not_there(self, cli: Cli) -> None:
        """Removing a missing key says so and changes nothing."""
        revision = cli.revision()
        code, out, err = cli("label", "file/other", "nope-")
        assert (code, out) == (0, "file.files.reconcile.dev/other not labeled\n")
        assert 'label "nope" not found.' in err
        assert cli.revision() == revision

    def test_several_objects(self, cli: Cli) -> None:
        """NAME..., -l SELECTOR and --all name several objects; each is said."""
        code, out, _ = cli("label", "file", "index", "about", "tier=web")
        assert code == 0
        assert out.splitlines() == [f"{INDEX} labeled", "file.files.reconcile.dev/about labeled"]
        code, out, _ = cli("annotate", "file", "-l", "tier=web", "owner=me")
        assert code == 0
        assert len(out.splitlines()) == 2
        assert stored(cli, "about")["metadata"]["annotations"] == {"owner": "me"}
        code, out, _ = cli("label", "file", "--all", "seen=yes")
        assert code == 0
        assert len(out.splitlines()) == 3
        assert stored(cli, "other")["metadata"]["labels"] == {"seen": "yes"}

    def test_one_refusal_changes_none(self, cli: Cli) -> None:
        """Several objects: a value one of them would lose without --overwrite, or one
        that is not there, stops the command before any is changed."""
        revision = cli.revision()
        code, out, err = cli("label", "file", "--all", "app=web")
        assert (code, out) == (2, "")
        clash = '"app" already has a value (site), and --overwrite is false'
        assert err.splitlines() == [
            f"error: file.files.reconcile.dev/about: {clash}",
            f"error: {INDEX}: {clash}",
        ]
        code, out, _ = cli("label", "file", "other", "nope", "app=web")
        assert (code, out) == (1, "")
        assert cli.revision() == revision

    def test_annotate(self, cli: Cli) -> None:
        """annotate: a value may hold "=" and spaces; --overwrite the same way."""
        code, out, _ = cli("annotate", "file/index", "note=a = b")
        assert (code, out) == (0, f"{INDEX} annotated\n")
        code, _, err = cli("annotate", "file/index", "note=c")
        assert code == 2
        assert '"note" already has a value (a = b), and --overwrite is false' in err
        assert cli("annotate", "file/index", "note-")[1] == f"{INDEX} annotated\n"
        assert "annotations" not in stored(cli)["metadata"]

    def test_bad_input(self, cli: Cli) -> None:
        """Bad keys and values (admission's rules), bad arguments: exit 2, nothing written."""
        revision = cli.revision()
        for args, expected in [
            (["label", "file/index", "bad key=x"], "metadata.labels['bad key']: key"),
            (["label", "file/index", "ok=not a value"], "metadata.labels['ok']"),
            (["label", "file/index"], "no labels to change"),
            (["label", "file/index", "a=1", "a-"], 'can not both modify and remove label "a"'),
            (["label", "file", "a=1", "index"], "give the objects first, then the changes"),
            (["label", "file", "a=1"], "which file? give NAME..., -l SELECTOR or --all"),
            (
                ["label", "file", "index", "-l", "app=site", "a=1"],
                "give NAME... or -l SELECTOR/--all, not both",
            ),
            (["annotate", "file/index", "=x"], "invalid annotation spec: =x"),
        ]:
            code, _, err = cli(*args)
            assert code == 2, (args, err)
            assert expected in err, (args, err)
        assert cli.revision() == revision

    def test_resource_version(self, cli: Cli) -> None:
        """--resource-version: the change is made only on that version (else exit 1)."""
        version = stored(cli)["metadata"]["resourceVersion"]
        code, _, err = cli("label", "file/index", "a=1", "--resource-version", str(version - 1))
        assert code == 1
        assert "was modified" in err
        assert cli("label", "file/index", "a=1", "--resource-version", str(version))[0] == 0
        assert stored(cli)["metadata"]["labels"]["a"] == "1"


EDITOR_SCRIPT = """\
import json, os, pathlib, subprocess, sys
path = pathlib.Path(sys.argv[-1])
log = pathlib.Path(os.environ["TEST_EDITOR_LOG"])
seen = sorted(log.glob("*.yaml"))
(log / f"{len(seen):02}.yaml").write_text(path.read_text())
steps = json.loads(os.environ["TEST_EDITOR_STEPS"])
step = steps[min(len(seen), len(steps) - 1)]
if step.get("run"):
    subprocess.run(step["run"], check=True, env={**os.environ, "PYTHONPATH": os.environ["TEST_ROOT"]})
if "write" in step:
    path.write_text(step["write"])
for old, new in step.get("replace", []):
    path.write_text(path.read_text().replace(old, new))
sys.exit(step.get("exit", 0))
"""


@attrs.define
class Editor:
    """$EDITOR: a script that makes the edits it is given, one step per time it is
    opened, and keeps what it was shown."""

    log: Path
    monkeypatch: pytest.MonkeyPatch

    def steps(self, *steps: dict[str, Any]) -> None:
        """What to do each time the editor is opened (the last step repeats)."""
        self.monkeypatch.setenv("TEST_EDITOR_STEPS", json.dumps(steps))

    def shown(self) -> list[str]:
        """What the editor was shown, each time it was opened."""
        return [path.read_text() for path in sorted(self.log.glob("*.yaml"))]


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Editor:
    """$EDITOR set to the editing script."""
    script = tmp_path / "editor.py"
    script.write_text(EDITOR_SCRIPT)
    log = tmp_path / "editor-log"
    log.mkdir()
    monkeypatch.delenv("RECONCILE_EDITOR", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.setenv("TEST_EDITOR_LOG", str(log))
    monkeypatch.setenv("TEST_ROOT", str(ROOT))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return Editor(log, monkeypatch)


def leftovers(tmp_path: Path) -> list[Path]:
    """The edit files left in the temporary folder."""
    return sorted(tmp_path.glob("reconcile-edit-*.yaml"))


class TestEdit:
    """edit: $EDITOR on the object's YAML, applied on save, on the version opened."""

    def test_edit(self, cli: Cli, editor: Editor, tmp_path: Path) -> None:
        """The editor is shown the object (spec, labels, status); what it changes is
        stored; the file is removed."""
        editor.steps({"replace": [["hello", "edited"], ["app: site", "app: edited"]]})
        code, out, err = cli("edit", "file/index")
        assert (code, out) == (0, f"{INDEX} edited\n"), err
        (shown,) = editor.shown()
        assert shown.startswith("# Please edit the object below.")
        assert "  content: |\n    hello\n" in shown
        assert "status:" in shown
        obj = stored(cli)
        assert obj["spec"]["content"] == "edited\n"
        assert obj["metadata"]["labels"] == {"app": "edited"}
        assert history_types(cli)[-1] == "SpecChanged"
        assert leftovers(tmp_path) == []

    def test_edit_owns_what_it_changed(self, cli: Cli, editor: Editor) -> None:
        """The fields an edit changes are reconcile-edit's (its Update entry), or the
        --field-manager's; the applier keeps the rest."""
        editor.steps({"replace": [["hello", "edited"]]})
        assert cli("edit", "file/index")[0] == 0
        managed = stored(cli)["metadata"]["managedFields"]
        assert managed["reconcile-edit (Update)"] == ["spec/content"]
        assert "spec/content" not in managed["reconcile"]
        editor.steps({"replace": [["app: site", "app: other"]]})
        assert cli("edit", "file/index", "--field-manager", "ops")[0] == 0
        managed = stored(cli)["metadata"]["managedFields"]
        assert managed["ops (Update)"] == ["labels/app"]
        assert "labels/app" not in managed["reconcile"]

    def test_unchanged_or_emptied(self, cli: Cli, editor: Editor, tmp_path: Path) -> None:
        """Saved as it was (or only comments and blanks changed): nothing written, exit
        0; emptied: the same; each said on stderr as kubectl says it."""
        revision = cli.revision()
        editor.steps({"replace": [["# Please", "#  Please"], ["kind: File", "kind:   File\n\n"]]})
        assert cli("edit", "file", "index") == (0, "", "Edit cancelled, no changes made.\n")
        editor.steps({"write": "# nothing\n\n"})
        assert cli("edit", "file", "index") == (0, "", "Edit cancelled, saved file was empty.\n")
        assert cli.revision() == revision
        assert leftovers(tmp_path) == []

    def test_invalid_reopens_with_the_error(self, cli: Cli, editor: Editor) -> None:
        """A change admission refuses opens the editor again on what was saved, with the
        reasons at the top; the fix is then stored."""
        editor.steps(
            {"replace": [["mode: '0644'", "mode: '0999'"]]},
            {"replace": [["mode: '0999'", "mode: '0600'"]]},
        )
        code, out, err = cli("edit", "file/index")
        assert (code, out) == (0, f"{INDEX} edited\n"), err
        first, second = editor.shown()
        head = second.split("apiVersion:")[0]
        assert f"# {INDEX} was not saved:\n" in head
        assert "# * File \"index\": spec.mode: '0999' is not an octal permission" in head
        assert "mode: '0999'" in second, "the editor shows what was saved, not the original"
        assert first.count("# Please edit") == second.count("# Please edit") == 1
        assert stored(cli)["spec"]["mode"] == "0600"

    def test_invalid_yaml_and_read_only_fields(self, cli: Cli, editor: Editor) -> None:
        """YAML that does not parse, and a field that may not change, reopen too; a
        change to status alone is ignored, said so."""
        editor.steps(
            {"replace": [["mode: '0644'", "mode: ''0644''"]]},
            {"replace": [["mode: ''0644''", "mode: '0644'"], ["  name: index", "  name: renamed"]]},
            {
                "replace": [
                    ["  name: renamed", "  name: index"],
                    ["observedGeneration: 0", "observedGeneration: 5"],
                ]
            },
        )
        revision = cli.revision()
        code, out, err = cli("edit", "file/index")
        assert (code, out) == (0, ""), err
        assert err.splitlines() == [
            "warning: status is written by the controllers; the change to it was ignored",
            "Edit cancelled, no changes made.",
        ]
        _, second, third = editor.shown()
        said = re.search(r"# \* invalid YAML at line (\d+), column (\d+): (.*)", second)
        assert said is not None, second
        line, column = int(said[1]), int(said[2])
        assert second.splitlines()[line - 1][column - 1 :] == "0644''", "it names the line the editor shows"
        assert '# * File "index": metadata.name: cannot be changed here' in third
        assert cli.revision() == revision

    def test_saved_again_unchanged_after_an_error(self, cli: Cli, editor: Editor, tmp_path: Path) -> None:
        """After an error, saving again without a change gives up: exit 1, nothing
        written, and the file with the edit is kept and named."""
        editor.steps({"replace": [["mode: '0644'", "mode: '0999'"]]}, {})
        revision = cli.revision()
        code, _, err = cli("edit", "file/index")
        assert code == 1
        assert "Edit cancelled, no valid changes were saved." in err
        (kept,) = leftovers(tmp_path)
        assert f'A copy of your changes has been stored to "{kept}"' in err
        assert "mode: '0999'" in kept.read_text()
        assert cli.revision() == revision

    def test_a_change_made_meanwhile_is_not_overwritten(
        self, cli: Cli, editor: Editor, tmp_path: Path
    ) -> None:
        """Another process changes the object while it is being edited: the edit is not
        written (exit 1, said clearly), the other change stays, the edit file is kept."""
        other = [sys.executable, "-m", "reconcile", "--db", str(cli.db), "label", "file/index", "by=other"]
        editor.steps({"run": other, "replace": [["hello", "edited"]]})
        code, _, err = cli("edit", "file/index")
        assert code == 1
        assert f"{INDEX} was changed by someone else while it was being edited" in err
        assert "nothing was saved" in err
        obj = stored(cli)
        assert obj["spec"]["content"] == "hello\n"
        assert obj["metadata"]["labels"]["by"] == "other"
        (kept,) = leftovers(tmp_path)
        assert "edited" in kept.read_text()

    def test_the_editor_fails(self, cli: Cli, editor: Editor, tmp_path: Path) -> None:
        """An editor that exits non-zero, or that is not installed: exit 1, nothing
        written, no file left."""
        revision = cli.revision()
        editor.steps({"replace": [["hello", "edited"]], "exit": 3})
        code, _, err = cli("edit", "file/index")
        assert code == 1
        assert "exited with status 3; nothing saved" in err
        editor.monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
        code, _, err = cli("edit", "file/index")
        assert code == 1
        assert "cannot run the editor" in err
        assert cli.revision() == revision
        assert leftovers(tmp_path) == []

    def test_which_editor(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """RECONCILE_EDITOR, then EDITOR, then VISUAL, then vi; arguments split as a
        shell would."""
        for variable in editing.EDITOR_VARIABLES:
            monkeypatch.delenv(variable, raising=False)
        assert editing.editor_command() == ["vi"]
        monkeypatch.setenv("VISUAL", "nano")
        assert editing.editor_command() == ["nano"]
        monkeypatch.setenv("EDITOR", "code --wait")
        assert editing.editor_command() == ["code", "--wait"]
        monkeypatch.setenv("RECONCILE_EDITOR", "'/opt/my editor/bin/ed' -s")
        assert editing.editor_command() == ["/opt/my editor/bin/ed", "-s"]


class Waiting:
    """``wait`` run on a thread (as in another terminal), its outcome awaited."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, args=(cli, args), daemon=True)
        self.thread.start()

    def _run(self, cli: Cli, args: tuple[str, ...]) -> None:
        self.code = main(["--db", str(cli.db), "wait", *args])

    def result(self) -> int:
        """The exit code, once it ended (failing after the deadline)."""
        self.thread.join(timeout=DEADLINE)
        assert not self.thread.is_alive(), "wait did not return"
        assert self.code is not None
        return self.code


class _Watched(Client):
    """A client that says when a watch starts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watching = asyncio.Event()

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        self.watching.set()
        return super().watch(*args, **kwargs)


class TestWait:
    """wait --for=condition=NAME[=VALUE] and --for=delete."""

    def test_already_met(self, cli: Cli) -> None:
        """A condition that holds: exit 0 at once, said per object; VALUE and names
        compare ignoring case."""
        set_ready(cli.db, "index")
        set_ready(cli.db, "about", "False", message="boom")
        code, out, _ = cli("wait", "file/index", "--for=condition=Ready", "--timeout", "0")
        assert (code, out) == (0, f"{INDEX} condition met\n")
        code, out, _ = cli("wait", "file", "about", "--for", "condition=ready=false", "--timeout", "0")
        assert (code, out) == (0, "file.files.reconcile.dev/about condition met\n")

    def test_times_out_naming_what_it_saw(self, cli: Cli) -> None:
        """Not met within --timeout: exit 1, with the condition as last seen."""
        code, _, err = cli("wait", "file/index", "--for=condition=Ready", "--timeout", "0")
        assert code == 1
        assert f"timed out waiting for the condition on {INDEX}: it has no Ready condition yet" in err
        set_ready(cli.db, "index", "False", message="disk\nfull")
        code, _, err = cli("wait", "file/index", "--for=condition=Ready", "--timeout", "50ms")
        assert code == 1
        assert f"on {INDEX}: Ready is False (ReconcileError: disk full)" in err

    def test_a_condition_for_an_older_spec_does_not_count(self, cli: Cli) -> None:
        """Ready=True for the previous generation is not Ready for the current spec."""
        set_ready(cli.db, "index")
        assert cli("patch", "file/index", "-p", '{"spec": {"content": "v2"}}')[0] == 0
        code, _, err = cli("wait", "file/index", "--for=condition=Ready", "--timeout", "0")
        assert code == 1
        assert "Ready is True for generation 1, but the spec is at generation 2" in err
        set_ready(cli.db, "index")
        assert cli("wait", "file/index", "--for=condition=Ready", "--timeout", "0")[0] == 0

    def test_waits_for_a_change(self, cli: Cli) -> None:
        """Waiting sees a change written after it started (by a controller elsewhere)."""
        waiting = Waiting(cli, "file/index", "--for=condition=Ready", "--timeout", "30s")
        set_ready(cli.db, "index", "False")
        set_ready(cli.db, "index")
        assert waiting.result() == 0
        assert f"{INDEX} condition met" in cli.capsys.readouterr().out

    async def test_sees_what_is_written_after_it_looked(self, cli: Cli) -> None:
        """A change written once the wait has looked (and started watching) is seen:
        the condition as it changes, then the deletion."""
        async with connect(cli.db, kinds=KindRegistry.from_entry_points()) as plain:
            client = _Watched(plain.store, plain.kinds)
            target = Target(client.kinds.resolve("file"), "index", "default")
            deadline = asyncio.get_running_loop().time() + DEADLINE
            waiting = asyncio.create_task(
                waiting_module.wait_one(client, target, HasCondition("Ready"), deadline)
            )
            await asyncio.wait_for(client.watching.wait(), DEADLINE)
            await asyncio.to_thread(set_ready, cli.db, "index", "False")
            assert not waiting.done()
            await asyncio.to_thread(set_ready, cli.db, "index")
            assert await asyncio.wait_for(waiting, DEADLINE) == f"{INDEX} condition met"
            client.watching.clear()
            gone = asyncio.create_task(waiting_module.wait_one(client, target, Gone(), deadline))
            await asyncio.wait_for(client.watching.wait(), DEADLINE)
            await client.delete("file", "index")
            await client.remove_finalizer("file", "index", "reconcile.dev/managed")
            assert await asyncio.wait_for(gone, DEADLINE) == f"{INDEX} deleted"

    def test_delete(self, cli: Cli) -> None:
        """--for=delete: exit 0 once the object is gone (at once when it is not
        there); on timeout, says what it waits on."""
        assert cli("delete", "file", "index")[0] == 0
        code, _, err = cli("wait", "file/index", "--for=delete", "--timeout", "0")
        assert code == 1
        assert "it is still there, deleting since" in err
        assert "waiting on finalizers: reconcile.dev/managed (is a runner up?)" in err
        code, _, err = cli("wait", "file/about", "--for=delete", "--timeout", "0")
        assert "nothing asked to delete it" in err
        waiting = Waiting(cli, "file/index", "--for=delete", "--timeout", "30s")

        async def release() -> None:
            async with connect(cli.db, kinds=KindRegistry.from_entry_points()) as client:
                await client.remove_finalizer("file", "index", "reconcile.dev/managed")

        asyncio.run(release())
        assert waiting.result() == 0
        assert cli("wait", "file/index", "--for=delete") == (0, f"{INDEX} deleted\n", "")

    def test_with_a_runner(self, cli: Cli) -> None:
        """The real thing: wait in another process while run --once makes the files."""
        env = {**os.environ, "PYTHONPATH": checkout_path()}
        waiting = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconcile",
                "--db",
                str(cli.db),
                "wait",
                "file",
                "-l",
                "app=site",
                "--for=condition=Ready",
                "--timeout",
                "60s",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert cli("run", "--once", "-q")[0] == 0
            out, err = waiting.communicate(timeout=DEADLINE)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.communicate()
        assert waiting.returncode == 0, err
        assert sorted(out.splitlines()) == [
            "file.files.reconcile.dev/about condition met",
            f"{INDEX} condition met",
        ]

    def test_bad_input(self, cli: Cli) -> None:
        """A missing object (for a condition), a bad --for or --timeout."""
        code, _, err = cli("wait", "file/nope", "--for=condition=Ready")
        assert code == 1
        assert 'file.files.reconcile.dev/nope not found in namespace "default"' in err
        for args, expected in [
            (["--for=ready"], "expected condition=NAME[=VALUE]"),
            (["--for=condition="], "expected condition=NAME[=VALUE]"),
            (["--for=condition=Ready", "--timeout", "soon"], "is not a duration"),
            (["--for=condition=Ready", "--timeout", "-1"], "must not be negative"),
        ]:
            code, _, err = cli("wait", "file/index", *args)
            assert code == 2, args
            assert expected in err, (args, err)


class TestCompletion:
    """completion bash|zsh|fish prints click's script for the reconcile command."""

    @pytest.mark.parametrize(
        ("shell", "marker"),
        [
            ("bash", "complete -o nosort -F _reconcile_completion reconcile"),
            ("zsh", "#compdef reconcile"),
            ("fish", "complete --no-files --command reconcile"),
        ],
    )
    def test_script(self, cli: Cli, shell: str, marker: str) -> None:
        """Each shell's script, for the reconcile command, asking through _RECONCILE_COMPLETE."""
        code, out, _ = cli("completion", shell)
        assert code == 0
        assert marker in out
        assert "_RECONCILE_COMPLETE" in out

    def test_bash_completes(self, cli: Cli, tmp_path: Path) -> None:
        """Sourced into bash, the script completes commands, kinds and stored names."""
        bash = shutil.which("bash")
        assert bash is not None
        code, script, _ = cli("completion", "bash")
        assert code == 0
        (tmp_path / "bin").mkdir()
        shim = tmp_path / "bin" / "reconcile"
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m reconcile "$@"\n')
        shim.chmod(0o755)
        (tmp_path / "completion.bash").write_text(script)

        def complete(line: str) -> list[str]:
            words = line.split(" ")
            program = textwrap.dedent(f"""\
                source {tmp_path / "completion.bash"}
                COMP_WORDS=({" ".join(f"'{w}'" for w in words)})
                COMP_CWORD={len(words) - 1}
                _reconcile_completion reconcile
                printf '%s\\n' "${{COMPREPLY[@]}}"
            """)
            env = {
                **os.environ,
                "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                "PYTHONPATH": checkout_path(),
                "RECONCILE_DB": str(cli.db),
            }
            done = subprocess.run(
                [bash, "-c", program], capture_output=True, text=True, env=env, check=True, timeout=DEADLINE
            )
            return done.stdout.split()

        assert complete("reconcile ed") == ["edit"]
        assert set(complete("reconcile wa")) == {"wait", "watch"}
        assert complete("reconcile label fil") == ["file", "files"]
        assert complete("reconcile edit file ab") == ["about"]

    def test_unknown_shell(self, cli: Cli) -> None:
        """Another shell: exit 2, naming the ones there are."""
        code, _, err = cli("completion", "tcsh")
        assert code == 2
        assert "bash" in err


class TestDiffExitCodes:
    """diff: 0 no differences, 1 differences, 2 an error (kubectl's convention)."""

    def test_exit_codes(self, cli: Cli) -> None:
        """Differences exit 1 without any flag; --exit-code is still accepted (no effect)."""
        path = cli.manifests / "site.yaml"
        assert cli("diff", "-f", str(path))[:2] == (0, "")
        path.write_text(SITE.replace("hello", "bye"))
        code, out, _ = cli("diff", "-f", str(path))
        assert code == 1
        assert "+  content: |\n+    bye\n" in out or "+    bye" in out
        assert cli("diff", "-f", str(path), "--exit-code")[0] == 1

    def test_errors_exit_2(self, cli: Cli) -> None:
        """A store it cannot read, or bad input: exit 2, never 1 (which means "differs")."""
        path = cli.manifests / "site.yaml"
        flip_byte(cli.db, b'"kind":"File"')
        code, _, err = cli("diff", "-f", str(path))
        assert code == 2
        assert "cannot be decoded" in err
        path.write_text("kind: [")
        assert cli("diff", "-f", str(path))[0] == 2
