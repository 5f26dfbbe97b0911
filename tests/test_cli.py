"""The ``reconcile`` command line, in process: every command, every listed bad input
(the message, the exit code, and no change to the database or the filesystem)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import pytest
import yaml
from helpers import checkout_path, widget

from reconcile import Runtime, connect
from reconcile.cli import main, maintaining, reading, running
from reconcile.store import locate_store
from reconcile.store.sqlite import writing
from reconcile.store.sqlite.schema import SCHEMA_VERSION
from reconcile.testing import example_kinds

HEAD = "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: x}\n"
SITE = """\
apiVersion: files.reconcile.dev/v1
kind: Directory
metadata: {name: public}
spec: {path: out}
---
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: index, labels: {app: site}}
spec:
  path: out/index.html
  content: "<h1>Hello</h1>\\n"
"""


class Cli:
    """Runs ``reconcile`` with a database and a manifest folder under a temporary path."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp = tmp_path
        self.db = tmp_path / "state.db"
        self.manifests = tmp_path / "manifests"
        self.manifests.mkdir()
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """Exit code, stdout, stderr."""
        self.capsys.readouterr()
        code = main(["--db", str(self.db), *args])
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def write(self, name: str, text: str) -> Path:
        """A manifest file."""
        path = self.manifests / name
        path.write_text(text)
        return path

    def revision(self) -> int:
        """The store's revision (0 when there is no database)."""
        if not self.db.exists():
            return 0
        with sqlite3.connect(self.db) as conn:
            return int(conn.execute("SELECT max(revision) FROM events").fetchone()[0] or 0)

    def written(self) -> list[str]:
        """Every entry under the manifest folder but the manifests themselves."""
        return sorted(
            str(p.relative_to(self.manifests)) for p in self.manifests.rglob("*") if p.suffix != ".yaml"
        )


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a fresh database."""
    return Cli(tmp_path, capsys)


class TestApplyAndRead:
    """apply, get, describe, history, diff, delete, on the files provider."""

    def test_apply_then_reapply(self, cli: Cli) -> None:
        """apply creates, a second apply changes nothing, both exit 0."""
        cli.write("site.yaml", SITE)
        code, out, _ = cli("apply", "-f", str(cli.manifests))
        assert code == 0
        assert out.splitlines() == [
            "directory.files.reconcile.dev/public created",
            "file.files.reconcile.dev/index created",
        ]
        revision = cli.revision()
        code, out, _ = cli("apply", "-f", str(cli.manifests))
        assert code == 0
        assert "file.files.reconcile.dev/index unchanged" in out
        assert cli.revision() == revision

    def test_a_folder_passes_over_a_file_that_is_not_a_manifest(self, cli: Cli) -> None:
        """``apply -f DIR`` skips a provider config inside the folder, saying so on
        stderr; the same file named on its own is still refused."""
        config = cli.write("providers.yaml", "files: {}\n")
        cli.write("site.yaml", SITE)
        code, out, err = cli("apply", "-f", str(cli.manifests))
        assert code == 0, err
        assert "file.files.reconcile.dev/index created" in out
        assert f"skipped {config}: not a manifest (no apiVersion or kind)" in err
        code, _, err = cli("apply", "-f", str(config))
        assert code == 2
        assert "document 1: kind: required string field missing" in err

    def test_apply_from_stdin_needs_a_root(self, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
        """stdin has no folder: without --root the path cannot be confined; with it, fine."""
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SITE.encode())))
        code, _, err = cli("apply", "-f", "-")
        assert code == 2
        assert '<stdin>, document 1: Directory "public": spec.path: no root directory' in err
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SITE.encode())))
        assert main(["--db", str(cli.db), "--root", str(cli.tmp / "www"), "apply", "-f", "-"]) == 0
        assert (cli.tmp / "www").exists() is False, "apply wrote into the root (only run may)"

    def test_sources_from_stdin_need_a_source_root(self, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
        """stdin has no folder to read sources from: without --source-root a source is
        refused; with it, read there and fingerprinted."""
        (cli.tmp / "pages").mkdir()
        (cli.tmp / "pages" / "a.html").write_text("<p>a</p>\n")
        doc = HEAD + f"spec: {{path: a.html, source: {cli.tmp / 'pages' / 'a.html'}}}\n"
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(doc.encode())))
        code, _, err = cli("--root", str(cli.tmp / "www"), "apply", "-f", "-")
        assert code == 2
        assert "spec.source: no folder to read sources from" in err
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(doc.encode())))
        args = ["--root", str(cli.tmp / "www"), "--source-root", str(cli.tmp / "pages"), "apply", "-f", "-"]
        assert cli(*args)[0] == 0
        code, out, _ = cli("get", "file", "x", "-o", "json")
        assert json.loads(out)["spec"]["sourceDigest"].startswith("sha256:")

    def test_apply_conflict_is_a_runtime_failure(self, cli: Cli) -> None:
        """A stale resourceVersion precondition: exit 1 with the conflict, nothing changed."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        revision = cli.revision()
        stale = SITE.replace(
            "metadata: {name: index, labels: {app: site}}", "metadata: {name: index, resourceVersion: 1}"
        )
        path = cli.write("site.yaml", stale.replace("Hello", "Bye"))
        code, out, err = cli("apply", "-f", str(path))
        assert code == 1
        assert "resourceVersion" in err
        assert "file.files.reconcile.dev/index" not in out
        assert cli.revision() == revision

    def test_get_outputs(self, cli: Cli) -> None:
        """get: table, json (a List of stored bodies), yaml, name, selector, single object."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("get")
        assert code == 0
        assert out.splitlines()[0].split() == ["KIND", "NAME", "READY", "SYNCED", "REASON", "AGE"]
        code, out, _ = cli("get", "files", "-o", "json")
        data = json.loads(out)
        assert data["kind"] == "List"
        assert [item["metadata"]["name"] for item in data["items"]] == ["index"]
        assert data["items"][0]["spec"]["path"] == str(cli.manifests / "out" / "index.html")
        code, out, _ = cli("get", "file", "index", "-o", "yaml")
        assert "content: |\n    <h1>Hello</h1>" in out
        code, out, _ = cli("get", "-o", "name", "-l", "app=site")
        assert out.split() == ["file.files.reconcile.dev/index"]
        code, out, _ = cli("get", "-A")
        assert out.splitlines()[1].split()[:2] == ["default", "Directory"]
        code, _, err = cli("get", "file", "missing")
        assert code == 1
        assert "not found" in err

    def test_get_freezes_what_it_shows_only_while_it_shows_it(self, cli: Cli) -> None:
        """``get`` keeps the pages it lists in the collector's permanent generation while
        it shows them, and nothing stays frozen after it (a process that goes on: this
        one); where something was frozen before, it freezes nothing and thaws nothing."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        gc.unfreeze()
        frozen: list[int] = []
        render = reading.render_objects

        def rendering(*args: Any, **kwargs: Any) -> Any:
            frozen.append(gc.get_freeze_count())
            return render(*args, **kwargs)

        with mock.patch.object(reading, "render_objects", rendering):
            code, out, _ = cli("get", "files")
            assert code == 0
            assert "index" in out
            assert frozen[-1] > 0
            assert gc.get_freeze_count() == 0
            gc.freeze()  # something of the process's own, frozen before
            before = gc.get_freeze_count()
            code, _, _ = cli("get", "files")
            assert code == 0
            # (Frozen objects that die leave the count: it may only go down.)
            assert frozen[-1] <= before
            assert 0 < gc.get_freeze_count() <= before
            gc.unfreeze()

    def test_get_table_options(self, cli: Cli) -> None:
        """-o wide adds the generations and the Synced message; --show-labels a LABELS
        column; --no-headers drops the header; --sort-by orders by a stored field."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("get", "-o", "wide", "--show-labels")
        assert code == 0
        assert out.splitlines()[0].split() == [
            "KIND",
            "NAME",
            "READY",
            "SYNCED",
            "REASON",
            "AGE",
            "GENERATION",
            "OBSERVED",
            "MESSAGE",
            "LABELS",
        ]
        assert "app=site" in out
        code, out, _ = cli("get", "--no-headers", "--sort-by", ".spec.path", "-o", "wide")
        rows = [line.split() for line in out.splitlines()]
        assert [row[1] for row in rows] == ["public", "index"]  # out, then out/index.html
        code, out, _ = cli("get", "--no-headers", "--sort-by", ".metadata.name")
        assert [line.split()[1] for line in out.splitlines()] == ["index", "public"]
        code, _, err = cli("get", "--sort-by", ".")
        assert code == 2
        assert "--sort-by" in err

    def test_get_jsonpath(self, cli: Cli) -> None:
        """-o jsonpath= as kubectl takes it: over the List, or over one object; filters;
        a bad expression is a usage error."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("get", "files", "-o", "jsonpath={.items[*].metadata.name}")
        assert (code, out.strip()) == (0, "index")
        code, out, _ = cli("get", "file/index", "-o", "jsonpath={.spec.mode}")
        assert (code, out.strip()) == (0, "0644")
        code, out, _ = cli("get", "-o", 'jsonpath={.items[?(@.kind=="Directory")].metadata.name}')
        assert (code, out.strip()) == (0, "public")
        code, _, err = cli("get", "files", "-o", "jsonpath={.items[}")
        assert code == 2
        assert "jsonpath" in err

    def test_colour_only_on_a_terminal_without_no_color(
        self, cli: Cli, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On a terminal READY/SYNCED and "error:" are coloured; under NO_COLOR, or piped
        (the other tests), they are plain."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        cli("run", "--once", "--timeout", "30", "-q")
        monkeypatch.setattr(reading, "colour", lambda: True)
        _, out, _ = cli("get", "files")
        assert "\x1b[32mTrue\x1b[0m" in out
        assert out.splitlines()[0].split() == ["NAME", "READY", "SYNCED", "REASON", "AGE"]
        monkeypatch.setattr(reading, "colour", lambda: False)
        _, out, _ = cli("get", "files")
        assert "\x1b[" not in out
        monkeypatch.setenv("NO_COLOR", "1")
        monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
        from reconcile.cli.main import colour  # noqa: PLC0415

        assert colour() is False

    def test_explain_fields(self, cli: Cli) -> None:
        """explain: a description per field, an enumeration's values, no RST markup;
        explain File.spec.path one field; an unknown field is a usage error."""
        code, out, _ = cli("explain", "file")
        assert code == 0
        assert "``" not in out
        assert ":mod:" not in out
        assert "One of: present, absent." in out
        assert "IDENTITY:  deterministic (spec.path)" in out
        assert "BEHAVIOUR: MarkedOnCreate (creating is idempotent by name and marks ownership" in out
        code, out, _ = cli("explain", "File.spec.path")
        assert code == 0
        assert "FIELD:    spec.path <str>" in out
        assert "NOTES:    immutable, identity" in out
        assert "DEFAULT:  none (required)" in out
        code, out, _ = cli("explain", "File.spec.mode")
        assert code == 0
        assert 'DEFAULT:  "0644"\n' in out, "the default is said once, not 'default: default: ...'"
        code, _, err = cli("explain", "File.spec.nope")
        assert code == 2
        assert "File.spec has no field 'nope'" in err

    def test_type_slash_name_and_kind_hints(self, cli: Cli) -> None:
        """KIND/NAME (the form apply prints) works for get, describe, history and delete;
        a misspelt kind gets a "did you mean"."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("get", "file.files.reconcile.dev/index", "-o", "name")
        assert (code, out.strip()) == (0, "file.files.reconcile.dev/index")
        assert cli("describe", "file/index")[0] == 0
        code, out, _ = cli("history", "file/index", "-o", "json")
        assert code == 0
        assert json.loads(out)[0]["type"] == "Created"
        code, _, err = cli("get", "fiel", "index")
        assert code == 2
        assert 'unknown kind "fiel" (did you mean "file"?)' in err
        code, _, err = cli("get", "file/index", "index")
        assert code == 2
        assert "not both" in err
        code, out, _ = cli("delete", "file/index", "directory/public")
        assert code == 2
        code, out, _ = cli("delete", "file/index")
        assert (code, out.strip()) == (0, "file.files.reconcile.dev/index deleted")

    def test_get_says_which_kinds_it_skipped(self, cli: Cli) -> None:
        """Objects of a kind whose provider is not installed: get without a kind says it
        skipped them, and how many, instead of only "No resources found"."""

        async def store_widgets() -> None:
            async with connect(cli.db, kinds=example_kinds()) as client:
                for name in ("a", "b"):
                    await client.apply(widget(name))

        asyncio.run(store_widgets())
        code, _, err = cli("get")
        assert code == 0
        skipped = "skipped objects of kinds no installed provider declares: Widget.example.reconcile.dev (2)"
        assert skipped in err
        assert "No resources found" in err

    def test_messages_say_what_happened(self, cli: Cli) -> None:
        """An absent-file rule whose file is not there records "nothing to create", not
        "found in place, marked as this resource's"; run --help shows the poll default;
        watch --help says --since replays the events after the revision."""
        cli.write("absent.yaml", HEAD + "spec: {path: gone.txt, ensure: absent}\n")
        cli("apply", "-f", str(cli.manifests))
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 0
        _, out, _ = cli("history", "file", "x", "-o", "json")
        created = [e for e in json.loads(out) if e["type"] == "CreateSucceeded"]
        assert created[0]["data"]["message"].startswith("nothing to create: ")
        assert "is declared absent and is not there" in created[0]["data"]["message"]
        _, out, _ = cli("run", "--help")
        assert "the kind's own, else 60" in " ".join(out.split())
        _, out, _ = cli("watch", "--help")
        assert "Replay the events after this revision" in " ".join(out.split())

    def test_every_output_format_after_a_run(self, cli: Cli) -> None:
        """After run, objects carry conditions: every format of get, describe and history
        renders them (-o yaml crashed on the conditions' status enum), yaml as json does."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 0
        for args in (
            ["get"],
            ["get", "-A"],
            ["get", "files", "-o", "yaml"],
            ["get", "file", "index", "-o", "yaml"],
            ["get", "files", "-o", "json"],
            ["get", "-o", "name"],
            ["describe", "file", "index"],
            ["history", "file", "index"],
            ["history", "file", "index", "-o", "json"],
        ):
            code, out, err = cli(*args)
            assert (code, err) == (0, ""), args
            assert out.strip(), args
        _, as_yaml, _ = cli("get", "file", "index", "-o", "yaml")
        _, as_json, _ = cli("get", "file", "index", "-o", "json")

        assert yaml.safe_load(as_yaml) == json.loads(as_json)
        assert json.loads(as_json)["status"]["conditions"][0]["status"] == "True"

    def test_describe_and_history(self, cli: Cli) -> None:
        """describe shows spec, status and events; history the object's log."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("describe", "file", "index")
        assert code == 0
        assert "Name:              index" in out
        assert "ensure: present" in out
        assert "Created" in out
        code, out, _ = cli("history", "file", "index", "-o", "json")
        events = json.loads(out)
        assert [e["type"] for e in events] == ["Created"]
        assert set(events[0]) == {
            "revision",
            "time",
            "type",
            "actor",
            "user",
            "kind",
            "namespace",
            "name",
            "uid",
            "data",
            "changes",
        }

    def test_diff_writes_nothing(self, cli: Cli) -> None:
        """diff shows the change and writes nothing; a difference exits 1 (--exit-code,
        deprecated, changes nothing)."""
        path = cli.write("site.yaml", SITE)
        code, out, _ = cli("diff", "-f", str(path))
        assert code == 1
        assert "+++ file.files.reconcile.dev/index (declared)" in out
        assert not cli.db.exists(), "diff created the database"
        cli("apply", "-f", str(path))
        code, out, _ = cli("diff", "-f", str(path), "--exit-code")
        assert (code, out) == (0, "")
        path.write_text(SITE.replace("Hello", "Bye"))
        revision = cli.revision()
        code, out, _ = cli("diff", "-f", str(path), "--exit-code")
        assert code == 1
        assert "   content: |\n-    <h1>Hello</h1>\n+    <h1>Bye</h1>\n" in out
        assert cli.revision() == revision

    def test_delete(self, cli: Cli) -> None:
        """delete by name and by file; a missing one is an error unless ignored."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("delete", "file", "index")
        assert (code, out) == (0, "file.files.reconcile.dev/index deleted\n")
        # Marked: the managed finalizer (on since the apply) holds it until a runner has
        # cleaned up, as kubectl's objects wait on their controllers' finalizers.
        assert cli("get", "file", "index", "-o", "name")[1] == "file.files.reconcile.dev/index\n"
        assert cli("delete", "file", "index")[0] == 0
        assert cli("run", "--once", "--timeout", "20")[0] == 0
        code, _, err = cli("delete", "file", "index")
        assert code == 1
        assert "not found" in err
        assert cli("delete", "file", "index", "--ignore-not-found")[0] == 0
        code, out, _ = cli("delete", "-f", str(cli.manifests), "--ignore-not-found")
        assert "directory.files.reconcile.dev/public deleted" in out
        assert cli("delete")[0] == 2

    def test_no_zombie_after_releasing_a_finalizer(self, cli: Cli) -> None:
        """apply with ``finalizers: [x]``, delete, apply adding a finalizer (refused), apply
        with ``finalizers: []``: the object goes, and ``run --once`` has nothing left to
        wait for."""
        held = HEAD.replace("metadata: {name: x}", "metadata: {name: x, finalizers: [example.dev/x]}")
        path = cli.write("x.yaml", held + "spec: {path: x.txt}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        assert cli("delete", "file", "x")[0] == 0
        more = held.replace("[example.dev/x]", "[example.dev/x, example.dev/y]")
        changed = cli.write("x.yaml", more + "spec: {path: x.txt, content: new}\n")
        err = TestBadInput().refused(cli, "apply", "-f", str(changed))
        assert "metadata.finalizers: cannot add finalizer 'example.dev/y': the object is being deleted" in err
        cli.write("x.yaml", held.replace("[example.dev/x]", "[]") + "spec: {path: x.txt}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        # Only the engine's own finalizer is left: the runner's cleanup releases it.
        code, out, _ = cli("get", "file", "x", "-o", "jsonpath={.metadata.finalizers}")
        assert (code, out.strip()) == (0, '["reconcile.dev/managed"]')
        assert cli("run", "--once", "--timeout", "20")[0] == 0
        code, _, err = cli("get", "file", "x")
        assert code == 1
        assert "not found" in err

    def test_delete_by_selector_and_all(self, cli: Cli) -> None:
        """-l deletes the matching objects of a kind, --all every one; NAME and --all conflict."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        assert cli("delete", "file", "index", "--all")[0] == 2
        code, out, _ = cli("delete", "file", "-l", "app=other")
        assert (code, out) == (0, "")
        code, out, _ = cli("delete", "file", "-l", "app=site")
        assert out == "file.files.reconcile.dev/index deleted\n"
        code, out, _ = cli("delete", "dir", "--all")
        assert out == "directory.files.reconcile.dev/public deleted\n"
        assert cli("run", "--once", "--timeout", "20")[0] == 0
        assert cli("get", "-o", "name")[1] == ""

    def test_explain(self, cli: Cli) -> None:
        """explain lists a kind's spec fields with types and defaults; an unknown kind is bad input."""
        code, out, _ = cli("explain", "file")
        assert code == 0
        assert "VERSION:   files.reconcile.dev/v1" in out
        spec = out.split("SPEC FIELDS:")[1].split("STATUS FIELDS:")[0]
        fields = {line.split()[0]: line.split()[1:] for line in spec.splitlines()[2:] if line.strip()}
        assert fields["path"][:2] == ["str", "required"]
        assert fields["mode"][:3] == ["str", "default:", '"0644"']
        code, _, err = cli("explain", "fiel")
        assert code == 2
        assert 'unknown kind "fiel"' in err

    def test_providers_verify_compact(self, cli: Cli) -> None:
        """providers lists File and Directory; verify passes; compact drops history."""
        code, out, _ = cli("providers", "-o", "json")
        kinds = {(row["provider"], row["kind"]): row for row in json.loads(out)}
        assert {("files", "File"), ("files", "Directory")} <= kinds.keys()
        assert kinds["files", "File"]["behaviour"] == "MarkedOnCreate"
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("verify")
        assert code == 0
        assert "ok" in out
        code, out, _ = cli("compact")
        assert code == 0
        assert out.startswith("dropped ")
        assert cli("verify")[0] == 0

    def test_compact_asks_on_a_terminal(self, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
        """On a terminal compact says how many events it drops and asks; no: nothing is
        dropped (exit 130); --yes does not ask; version names the schema and providers."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        cli.write("site.yaml", SITE.replace("Hello", "Hi"))
        cli("apply", "-f", str(cli.manifests))
        before = cli.revision()
        monkeypatch.setattr(maintaining, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
        code, out, _ = cli("compact")
        assert code == 130
        assert "drop 1 events before revision 4 for good?" in out
        with sqlite3.connect(cli.db) as conn:
            assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == before
        code, out, _ = cli("compact", "--yes")
        assert (code, out.strip()) == (0, "dropped 1 events before revision 4")
        code, out, _ = cli("version")
        assert code == 0
        assert f"schema {SCHEMA_VERSION}" in out
        assert "provider files: Directory, File" in out

    def test_version_reads_the_stored_schema_without_writing(self, cli: Cli) -> None:
        """version names the schema the database holds, read without writing: a newer
        one as it is, what is not a reconcile store as unreadable; no database, no line."""
        code, out, _ = cli("version", "-o", "json")
        assert code == 0
        assert "database" not in json.loads(out)
        assert not cli.db.exists()
        cli.write("site.yaml", SITE)
        assert cli("apply", "-f", str(cli.manifests))[0] == 0
        with contextlib.closing(sqlite3.connect(cli.db)) as conn:
            conn.execute("UPDATE reconcile_schema SET version = ?", (SCHEMA_VERSION + 1,))
            conn.commit()
        code, out, _ = cli("version", "-o", "json")
        assert json.loads(out)["database"] == {"path": str(cli.db), "schema": SCHEMA_VERSION + 1}
        code, out, _ = cli("version")
        assert f"database {cli.db}: schema {SCHEMA_VERSION + 1}" in out
        for path in cli.db.parent.glob(f"{cli.db.name}*"):
            path.unlink()
        cli.db.write_text("not a database\n")
        code, out, _ = cli("version")
        assert code == 0
        assert f"database {cli.db}: schema unreadable (not a reconcile store?)" in out
        assert cli.db.read_text() == "not a database\n"

    def test_compact_does_not_grow_the_file(self, cli: Cli) -> None:
        """compact without --vacuum, with another connection on the file (a running
        ``reconcile run``): the database and its write-ahead log are no larger after."""
        docs = "---\n".join(
            HEAD.replace("name: x", f"name: f{i}") + f"spec: {{path: f{i}.txt, content: '{'y' * 500}'}}\n"
            for i in range(100)
        )
        path = cli.write("many.yaml", docs)
        for n in range(5):
            path.write_text(docs.replace("'y", f"'{n}y"))
            assert cli("apply", "-f", str(path))[0] == 0
        with contextlib.closing(sqlite3.connect(cli.db)) as other:
            other.execute("SELECT count(*) FROM events").fetchone()
            before = locate_store(cli.db).size()
            code, out, _ = cli("compact", "--yes")
            assert code == 0, out
            after = locate_store(cli.db).size()
        assert after <= before, f"{before:,} -> {after:,} bytes"
        assert cli("verify", "--deep")[0] == 0

    def test_compact_vacuum_shrinks_the_file(self, cli: Cli) -> None:
        """After churn, compact --vacuum gives the space back: the file shrinks, and the
        store still verifies."""
        docs = "---\n".join(
            HEAD.replace("name: x", f"name: f{i}") + f"spec: {{path: f{i}.txt, content: '{'y' * 500}'}}\n"
            for i in range(100)
        )
        path = cli.write("many.yaml", docs)
        for n in range(5):
            path.write_text(docs.replace("'y", f"'{n}y"))
            assert cli("apply", "-f", str(path))[0] == 0
        code, out, _ = cli("compact", "--vacuum")
        assert code == 0, out
        sizes = out.splitlines()[-1].split(": ")[1].removesuffix(" bytes").split(" -> ")
        before, after = (int(size.replace(",", "")) for size in sizes)
        assert after < before / 2, out
        assert cli("verify", "--deep")[0] == 0

    def test_run_once_converges(self, cli: Cli) -> None:
        """run --once writes the files and exits 0 with everything Ready."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        code, out, _ = cli("run", "--once", "--timeout", "60")
        assert code == 0, out
        assert (cli.manifests / "out" / "index.html").read_text() == "<h1>Hello</h1>\n"
        assert "ready 2/2" in out
        assert "ready 0/0" not in out, "the caches loading is not progress to print"
        rows = [line.split() for line in out.splitlines() if line.startswith("default")]
        assert [row[3:5] for row in rows] == [["True", "True"], ["True", "True"]]

    def test_run_once_on_an_empty_store_says_nothing_is_declared(self, cli: Cli) -> None:
        """run --once with no objects: exit 0, saying nothing is declared (not ``ready 0/0``)."""
        code, out, err = cli("run", "--once", "--timeout", "60")
        assert code == 0, err
        assert out.splitlines() == ["nothing declared: no objects to reconcile (apply some first)"]

    def test_run_passes_the_provider_timeout(self, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
        """--provider-timeout reaches the Runtime; 0 means no limit."""
        seen: list[float | None] = []
        real = running.Runtime

        def recording(*args: object, **kwargs: Any) -> Runtime:
            seen.append(kwargs["provider_timeout"])
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(running, "Runtime", recording)
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        assert cli("run", "--once", "--timeout", "60", "-q", "--provider-timeout", "5")[0] == 0
        assert cli("run", "--once", "--timeout", "60", "-q", "--provider-timeout", "0")[0] == 0
        assert seen == [5.0, None]

    def test_run_once_fails_when_not_ready(self, cli: Cli) -> None:
        """A file that cannot be written: run --once names it and exits 1."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        (cli.manifests / "out").mkdir()
        (cli.manifests / "out" / "index.html").mkdir()  # a folder where the file should be
        code, _, err = cli("run", "--once", "--timeout", "3", "-q")
        assert code == 1
        assert "File default/index: Ready=" in err
        assert "is a directory" in err

    @pytest.mark.parametrize("case", ["permanent", "not-owned"])
    def test_run_once_does_not_wait_for_what_will_not_change(self, cli: Cli, case: str) -> None:
        """A permanent failure (a folder where the file goes) or a file that is not ours:
        run --once ends as soon as the rest is settled, far before its timeout, exit 1,
        naming each with its reason (it waited out the whole --timeout)."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        (cli.manifests / "out").mkdir()
        if case == "permanent":
            (cli.manifests / "out" / "index.html").mkdir()
        else:
            (cli.manifests / "out" / "index.html").write_text("somebody else's\n")
        started = time.monotonic()
        code, _, err = cli("run", "--once", "--timeout", "300", "-q")
        assert time.monotonic() - started < 60
        assert code == 1
        assert "2 not Synced and Ready, and no retry is scheduled" in err  # the folder made by hand too
        reason = "is a directory" if case == "permanent" else "NotOwned"
        assert "File default/index: Ready=" in err
        assert reason in err

    def test_run_once_says_why_when_status_cannot_be_written(
        self, cli: Cli, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The database's disk is full: no status can say why, so run --once names the
        last failure (it used to show Ready=Unknown with no reason)."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))

        def full(*_: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(writing, "commit_batch", full)
        code, _, err = cli("run", "--once", "--timeout", "0.5", "-q")
        assert code == 1
        assert "File default/index: Ready=Unknown" in err
        assert "last reconcile failed:" in err
        assert "disk full: database or disk is full" in err


class TestBadInput:
    """Each bad input: one clear line, exit 2, nothing written anywhere."""

    def refused(self, cli: Cli, *args: str) -> str:
        """Run, expect exit 2 and no change; return stderr."""
        before = cli.revision(), cli.written()
        code, out, err = cli(*args)
        assert code == 2, (out, err)
        assert "Traceback" not in err
        assert (cli.revision(), cli.written()) == before
        return err

    def test_invalid_yaml(self, cli: Cli) -> None:
        """A YAML syntax error names the file and the line."""
        path = cli.write("bad.yaml", "kind: File\nspec: [unclosed\n")
        err = self.refused(cli, "apply", "-f", str(path))
        assert f"error: {path}: invalid YAML" in err
        assert "line" in err

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("[" * 100_000 + "]" * 100_000, "invalid JSON: nested deeper than 64 levels"),
            ("a: " + "[" * 100_000, "invalid YAML: nested deeper than 64 levels"),
            (
                HEAD + "spec:\n  path: x\n  content: " + "[" * 990 + "]" * 990,
                "invalid YAML: nested deeper than 64 levels",
            ),
        ],
        ids=["json-100000", "yaml-100000", "yaml-990-in-a-manifest"],
    )
    def test_deep_nesting(self, cli: Cli, text: str, reason: str) -> None:
        """Nesting deep enough to overflow a recursive parser or encoder: a clear error, exit 2."""
        path = cli.write("deep.json" if "JSON" in reason else "deep.yaml", text)
        err = self.refused(cli, "apply", "-f", str(path))
        assert f"error: {path}: {reason}" in err

    def test_too_large_object_is_all_or_nothing(self, cli: Cli) -> None:
        """Three small manifests and a 2 MB one in a folder: nothing is stored, and the
        error names the file and the document."""
        for name in ("a", "b", "c"):
            cli.write(
                f"{name}.yaml", HEAD.replace("name: x", f"name: {name}") + f"spec: {{path: {name}.txt}}\n"
            )
        big = cli.write(
            "d.yaml",
            HEAD.replace("name: x", "name: d") + f"spec: {{path: d.txt, content: {'x' * 2_000_000}}}\n",
        )
        err = self.refused(cli, "apply", "-f", str(cli.manifests))
        assert f'{big}, document 1: File "d": object is 20' in err
        assert "at most 1507328 may be applied" in err
        assert cli.revision() == 0

    def test_one_object_declared_twice(self, cli: Cli) -> None:
        """The same File twice in one apply (different paths): refused before anything is
        written, naming both documents; delete -f of such a file deletes it once."""
        doc_d = HEAD.replace("name: x", "name: d")
        text = (
            doc_d
            + "spec: {path: d1.txt}\n---\n"
            + HEAD.replace("name: x", "name: e")
            + "spec: {path: e.txt}\n---\n"
            + doc_d
            + "spec: {path: d2.txt}\n"
        )
        path = cli.write("twice.yaml", text)
        err = self.refused(cli, "apply", "-f", str(path))
        assert f'{path}, document 3: File "d": declared again (first in {path}, document 1)' in err
        assert "declared again" in self.refused(cli, "diff", "-f", str(path))
        cli.write("twice.yaml", text.replace("d2.txt", "d1.txt"))
        path.with_name("once.yaml").write_text(doc_d + "spec: {path: d1.txt}\n")
        assert cli("apply", "-f", str(path.with_name("once.yaml")))[0] == 0
        code, out, _ = cli("delete", "-f", str(path), "--ignore-not-found")
        assert code == 0
        assert out.splitlines() == ["file.files.reconcile.dev/d deleted"]

    def test_the_root_is_remembered(self, cli: Cli, tmp_path: Path) -> None:
        """Applied with --root, then diff and apply without it: the stored objects' root is
        used (and said), nothing moves; with another --root: a warning, and a refusal that
        names the root to give, never one that says to delete the objects."""
        path = cli.write("site.yaml", SITE)
        site = tmp_path / "site"
        assert main(["--db", str(cli.db), "--root", str(site), "apply", "-f", str(path)]) == 0
        code, out, err = cli("diff", "-f", str(path), "--exit-code")
        assert (code, out) == (0, ""), err
        assert f"using --root {site}, which the stored objects were applied with" in err
        code, out, _ = cli("apply", "-f", str(path))
        assert code == 0
        assert "file.files.reconcile.dev/index unchanged" in out
        before = cli.revision()
        code, _, err = cli("--root", str(tmp_path / "other"), "apply", "-f", str(path))
        assert code == 2
        assert f"were applied with --root {site}" in err
        assert f"spec.root: {tmp_path / 'other'} is not the root {site} this object was applied with" in err
        assert "delete" not in err
        assert cli.revision() == before

    def test_a_refused_apply_remembers_nothing(self, cli: Cli, tmp_path: Path) -> None:
        """An apply refused with another --root leaves the remembered root as it was."""
        path = cli.write("site.yaml", SITE)
        site = tmp_path / "site"
        assert cli("--root", str(site), "apply", "-f", str(path))[0] == 0
        assert cli("--root", str(tmp_path / "other"), "apply", "-f", str(path))[0] == 2
        code, _, err = cli("diff", "-f", str(path), "--exit-code")
        assert code == 0, err
        assert f"using --root {site}, which the stored objects were applied with" in err

    def test_each_providers_config_is_remembered(self, cli: Cli, tmp_path: Path) -> None:
        """The whole config a provider's kinds were applied with is remembered, key by key:
        what is not given is the remembered value (said), a given value that differs is
        warned about and, once applied, remembered; another provider's config, given but
        not applied with, is not remembered."""
        path = cli.write("site.yaml", SITE)
        site, sources = tmp_path / "site", tmp_path / "sources"
        config = tmp_path / "providers.yaml"
        config.write_text(
            f"files: {{roots: [{site}], source_roots: [{sources}], special_modes: true}}\n"
            "s3: {region: eu-west-1}\n"
        )
        assert cli("--provider-config", str(config), "apply", "-f", str(path))[0] == 0
        with contextlib.closing(sqlite3.connect(cli.db)) as conn:
            names = [row[0] for row in conn.execute("SELECT key FROM meta WHERE key LIKE 'setting:%'")]
        assert names == ["setting:provider:files"]
        code, _, err = cli("diff", "-f", str(path), "--exit-code")
        assert code == 0, err
        assert f"using --root {site}, which" in err
        assert f"using --source-root {sources}, which" in err
        assert "using files.special_modes true, which" in err
        config.write_text("files: {special_modes: false}\n")
        code, _, err = cli("--provider-config", str(config), "apply", "-f", str(path))
        assert code == 0, err
        assert (
            "were applied with files.special_modes true; this applies with another files.special_modes" in err
        )
        assert f"using --root {site}, which" in err
        code, _, err = cli("diff", "-f", str(path))
        assert "using files.special_modes false, which" in err
        assert f"using --root {site}, which" in err

    def test_an_earlier_stores_objects_give_their_roots(self, cli: Cli, tmp_path: Path) -> None:
        """A store that remembers no config (an earlier release applied to it) gives the
        roots its objects were applied with; the next apply remembers them."""
        path = cli.write("site.yaml", SITE)
        site = tmp_path / "site"
        assert cli("--root", str(site), "apply", "-f", str(path))[0] == 0
        with contextlib.closing(sqlite3.connect(cli.db)) as conn:
            conn.execute("DELETE FROM meta WHERE key LIKE 'setting:%'")
            conn.commit()
        code, _, err = cli("apply", "-f", str(path))
        assert code == 0, err
        assert f"using --root {site}, which the stored objects were applied with" in err
        with contextlib.closing(sqlite3.connect(cli.db)) as conn:
            rows = conn.execute("SELECT value FROM meta WHERE key = 'setting:provider:files'").fetchall()
        assert [json.loads(value) for (value,) in rows] == [{"roots": [str(site)]}]

    def test_unknown_kind(self, cli: Cli) -> None:
        """An unknown kind names the file and the document index."""
        path = cli.write(
            "bad.yaml", SITE + "---\napiVersion: files.reconcile.dev/v1\nkind: Fiel\nmetadata: {name: x}\n"
        )
        err = self.refused(cli, "apply", "-f", str(path))
        assert f"{path}, document 3" in err
        assert 'kind: unknown kind "Fiel"' in err
        assert not cli.db.exists()

    def test_invalid_field_is_all_or_nothing(self, cli: Cli) -> None:
        """One invalid document among valid ones: none is stored, even into an existing store."""
        cli.write("a.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        path = cli.write(
            "b.yaml",
            SITE.replace("public}", "public2}")
            .replace("index", "index2")
            .replace("spec:\n  path", "spec:\n  colour: red\n  path"),
        )
        err = self.refused(cli, "apply", "-f", str(cli.manifests))
        assert f'{path}, document 2: File "index2": spec.colour' in err

    @pytest.mark.parametrize(
        ("path", "reason"),
        [
            ("../outside.txt", "escapes the root"),
            ("/etc/reconcile-test.txt", "is outside the allowed roots"),
            ("link/x.txt", "through the symlink"),
        ],
    )
    def test_path_escaping_the_roots(self, cli: Cli, tmp_path: Path, path: str, reason: str) -> None:
        """.., an absolute path elsewhere, a symlink out: refused with the field path."""
        (cli.manifests / "link").symlink_to(tmp_path)
        manifest = cli.write(
            "bad.yaml",
            HEAD + f"spec: {{path: '{path}'}}\n",
        )
        err = self.refused(cli, "apply", "-f", str(manifest))
        assert "spec.path" in err
        assert reason in err
        assert not (tmp_path / "outside.txt").exists()
        assert not (tmp_path / "x.txt").exists()

    def test_changing_an_immutable_path(self, cli: Cli) -> None:
        """Moving a file by changing its path: refused for the whole apply, naming the field."""
        path = cli.write("site.yaml", SITE)
        cli("apply", "-f", str(path))
        path.write_text(SITE.replace("Hello", "Bye").replace("path: out/index.html", "path: out/home.html"))
        err = self.refused(cli, "apply", "-f", str(path))
        assert f'{path}, document 2: File "index": spec.path: is immutable once created' in err

    def test_mode_not_octal(self, cli: Cli) -> None:
        """mode 0999 is not a permission."""
        path = cli.write(
            "bad.yaml",
            HEAD + "spec: {path: x, mode: '0999'}\n",
        )
        assert "spec.mode: '0999' is not an octal permission" in self.refused(cli, "apply", "-f", str(path))

    def test_content_and_source(self, cli: Cli) -> None:
        """content and source together."""
        cli.write("page.html", "<p>")
        path = cli.write(
            "bad.yaml",
            HEAD + "spec: {path: x, content: a, source: page.html}\n",
        )
        assert "spec.source: content and source are mutually exclusive" in self.refused(
            cli, "apply", "-f", str(path)
        )

    def test_missing_source(self, cli: Cli) -> None:
        """A source file that is not there."""
        path = cli.write(
            "bad.yaml",
            HEAD + "spec: {path: x, source: nope.html}\n",
        )
        assert f"spec.source: {cli.manifests / 'nope.html'} does not exist" in self.refused(
            cli, "apply", "-f", str(path)
        )

    def test_database_not_sqlite(self, cli: Cli) -> None:
        """--db naming a file that is not SQLite: refused, the file untouched."""
        cli.write("site.yaml", SITE)
        cli.db.write_text("not a database\n")
        code, _, err = cli("apply", "-f", str(cli.manifests))
        assert code == 2
        assert "not a SQLite database" in err
        assert cli.db.read_text() == "not a database\n"
        assert cli.written() == []
        assert cli("get")[0] == 2

    @pytest.mark.parametrize("special", ["fifo", "device"])
    def test_database_that_is_not_a_regular_file(self, cli: Cli, tmp_path: Path, special: str) -> None:
        """--db naming a FIFO (which hung) or a device (/dev/null grew a /dev/null-journal):
        refused with exit 2, nothing created beside it."""
        cli.write("site.yaml", SITE)
        if special == "fifo":
            target = tmp_path / "pipe.db"
            os.mkfifo(target)
        else:
            target = Path("/dev/null")
        before = sorted(p.name for p in target.parent.iterdir())
        for args in (["apply", "-f", str(cli.manifests)], ["get", "file"]):
            cli.capsys.readouterr()
            code = main(["--db", str(target), *args])
            err = cli.capsys.readouterr().err
            assert code == 2, err
            assert "is not a regular file" in err
        assert sorted(p.name for p in target.parent.iterdir()) == before

    def test_read_only_database_can_still_be_read(self, cli: Cli, tmp_path: Path) -> None:
        """A database in a folder this process may not write (``chattr +i``, which binds
        root too): get, describe, history, diff and verify read it; a write says why."""
        folder = tmp_path / "ro"
        folder.mkdir()
        db = folder / "state.db"
        path = cli.write("site.yaml", SITE)
        assert main(["--db", str(db), "apply", "-f", str(path)]) == 0
        chattr = shutil.which("chattr")
        if chattr is None:
            pytest.skip("chattr (e2fsprogs) is not installed: cannot make a folder read-only for root")
        frozen = subprocess.run(
            [chattr, "+i", str(db), str(folder)], capture_output=True, text=True, check=False
        )
        if frozen.returncode != 0:
            pytest.skip(f"chattr +i is not available here: {frozen.stderr.strip()}")
        try:
            for args in (
                ["get", "file"],
                ["describe", "file", "index"],
                ["history", "file", "index"],
                ["verify", "--deep"],
                ["diff", "-f", str(path)],
            ):
                cli.capsys.readouterr()
                code = main(["--db", str(db), *args])
                assert code == 0, (args, cli.capsys.readouterr().err)
            cli.capsys.readouterr()
            assert main(["--db", str(db), "delete", "file", "index"]) == 2
            assert "cannot be written (a read-only file, folder or mount?)" in cli.capsys.readouterr().err
        finally:
            subprocess.run([chattr, "-i", str(db), str(folder)], check=True)

    def test_unreadable_manifest_path(self, cli: Cli) -> None:
        """A manifest path that cannot be read."""
        err = self.refused(cli, "apply", "-f", str(cli.manifests / "missing.yaml"))
        assert "cannot read: No such file or directory" in err
        blocker = cli.write("file.yaml", SITE)
        err = self.refused(cli, "apply", "-f", str(blocker / "inside.yaml"))
        assert "cannot read: Not a directory" in err

    def test_unknown_option_and_output(self, cli: Cli) -> None:
        """Usage errors exit 2 too."""
        assert cli("get", "-o", "xml")[0] == 2
        assert cli("frobnicate")[0] == 2
        err = self.refused(cli, "run", "--once", "--provider-timeout", "-1")
        assert "--provider-timeout" in err

    def test_no_database_for_reads(self, cli: Cli) -> None:
        """Reading commands do not create a database."""
        code, _, err = cli("get")
        assert code == 1
        assert "no database at" in err
        assert not cli.db.exists()

    def test_logging_is_put_back(self, cli: Cli) -> None:
        """main() configures the library's logger for the terminal and restores it after."""
        logger = logging.getLogger("reconcile")
        before = logger.handlers[:], logger.level, logger.propagate
        cli("get")
        assert (logger.handlers[:], logger.level, logger.propagate) == before

    def test_debug_shows_the_traceback(self, cli: Cli) -> None:
        """--debug adds the traceback; without it there is none."""
        code, _, err = cli("get")
        assert "Traceback" not in err
        code, _, err = cli("--debug", "get")
        assert code == 1
        assert "Traceback" in err


def test_shell_completion_of_kinds_and_names(tmp_path: Path) -> None:
    """Completion offers kind names, and the stored objects' names of the kind typed."""
    db = tmp_path / "state.db"
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "site.yaml").write_text(SITE)
    assert main(["--db", str(db), "apply", "-f", str(manifests)]) == 0

    def complete(words: str, index: int) -> list[str]:
        env = {
            **os.environ,
            "PYTHONPATH": checkout_path(),
            "COMP_WORDS": words,
            "COMP_CWORD": str(index),
            "_RECONCILE_COMPLETE": "bash_complete",
        }
        result = subprocess.run(
            [sys.executable, "-m", "reconcile"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return [line.split(",", 1)[1] for line in result.stdout.splitlines() if "," in line]

    assert complete("reconcile get fi", 2) == ["file", "files"]
    assert complete(f"reconcile --db {db} describe file in", 5) == ["index"]
    assert complete(f"reconcile --db {db} history directory ", 5) == ["public"]


#: A name that would forge a line of output and clear the screen, printed raw.
HOSTILE = "a\nerror: forged\x1b[2J"
#: How it is shown: escaped, quoted.
SHOWN = repr(HOSTILE)


class TestHostileNames:
    """A name with a newline or an escape sequence is shown escaped, never raw."""

    def one_line(self, text: str) -> str:
        """The single line ``text`` holds (it has no second one, and no ESC)."""
        assert "\x1b" not in text
        lines = text.splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    @pytest.mark.parametrize(
        ("args", "said"),
        [
            (("get", "file", HOSTILE), f"error: File.files.reconcile.dev default/{SHOWN} not found"),
            (("describe", "file", HOSTILE), f"error: File.files.reconcile.dev default/{SHOWN} not found"),
            (
                ("history", f"file/{HOSTILE}"),
                f"error: File.files.reconcile.dev default/{SHOWN} has no history",
            ),
            (("delete", "file", HOSTILE), f"error: file.files.reconcile.dev/{SHOWN} not found in namespace"),
            (("get", "file", "-n", HOSTILE), f"No resources found in namespace {SHOWN}."),
            (("get", HOSTILE), f"error: kind: unknown kind {SHOWN}"),
            (("get", f"{HOSTILE}/x/y"), f"error: {HOSTILE + '/x/y'!r}: expected KIND/NAME"),
        ],
        ids=["get", "describe", "history", "delete", "namespace", "kind", "kind/name"],
    )
    def test_names_given_on_the_command_line(self, cli: Cli, args: tuple[str, ...], said: str) -> None:
        """get, describe, history, delete, a namespace, a kind: one line, the name escaped."""
        cli.write("site.yaml", SITE)
        assert cli("apply", "-f", str(cli.manifests))[0] == 0
        code, out, err = cli(*args)
        assert not out
        assert self.one_line(err).startswith(said)
        assert code in (0, 1, 2)

    def test_a_refused_manifest_names_it_escaped(self, cli: Cli) -> None:
        """A manifest whose name holds a newline and ESC: refused, the name escaped."""
        path = cli.write(
            "bad.yaml", HEAD.replace("name: x", f"name: {json.dumps(HOSTILE)}") + "spec: {path: x}\n"
        )
        code, _, err = cli("apply", "-f", str(path))
        assert code == 2
        assert self.one_line(err).startswith(f"error: {path}, document 1: File {SHOWN}: metadata.name: ")

    def test_stored_names_in_tables_and_names(self, cli: Cli) -> None:
        """An object stored before names were checked (made here in memory): the table,
        ``-o name`` and the runner's summary show its name and namespace escaped."""
        cli.write("site.yaml", SITE)
        assert cli("apply", "-f", str(cli.manifests))[0] == 0

        async def render() -> tuple[Any, str, str]:
            async with connect(cli.db) as client:
                stored = await client.get("File", "index")
                meta = attrs.evolve(stored.metadata, name=HOSTILE, namespace="ns\r")
                hostile = attrs.evolve(stored, metadata=meta)
                table = reading.render_objects(client, [hostile], "table", namespaces=True, kinds=False)
                names = reading.render_objects(client, [hostile], "name", namespaces=False, kinds=False)
                return hostile, table, names

        hostile, table, names = asyncio.run(render())
        assert "\x1b" not in table
        assert "\r" not in table
        assert len(table.splitlines()) == 2  # the header and one row
        row = table.splitlines()[1]
        assert row.startswith("'ns\\r' ")
        assert SHOWN in row
        assert self.one_line(names) == f"file.files.reconcile.dev/{SHOWN}"
        assert self.one_line(running._why(hostile)).startswith(f"File 'ns\\r'/{SHOWN}: Ready=")
