"""End to end: ``reconcile serve --run`` (the API and the controllers in one process)
spoken to by clients nobody here wrote, kubectl and the official ``kubernetes`` Python
client, each as a person would use it against a cluster; what they declare converges
(a File on disk, a bucket in moto_server, a record set in BIND) through the runner in
the server's own process."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import yaml
from dns_server import ZONE, Bind
from http_helpers import kubeconfig, kubectl, reconcile_command, serve_process, served, wait_until
from s3_server import moto_server, reset
from servers import stop
from test_dns import ByHand

from reconcile.http.hosting import SHUTDOWN_DEADLINE

CHECKOUT = Path(__file__).parents[1]
GROUP_VERSION = "files.reconcile.dev/v1"
FILES = f"/apis/{GROUP_VERSION}/namespaces/default/files"
DEADLINE = 30.0  # seconds anything here may take to converge


def file_manifest(name: str, content: str, *, path: str | None = None, **labels: str) -> dict[str, Any]:
    """A File manifest (its path under the root: ``NAME.txt`` unless given)."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "File",
        "metadata": metadata,
        "spec": {"path": path or f"{name}.txt", "content": content},
    }


def condition(document: dict[str, Any], kind: str) -> str | None:
    """The status (True/False/Unknown) of one condition of a wire document."""
    for entry in (document.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return str(entry.get("status"))
    return None


def environment(**more: str) -> dict[str, str]:
    """The environment of a child process: this one's, this checkout's code, and ``more``."""
    return {**os.environ, "PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", **more}


@attrs.frozen
class Server:
    """A ``reconcile serve --run`` and the ways to reach it."""

    url: str
    db: Path
    root: Path
    config: Path  # a kubeconfig pointing at it

    def get(self, path: str) -> httpx.Response:
        """GET ``path`` of the API."""
        return httpx.get(f"{self.url}{path}", timeout=DEADLINE)

    def document(self, name: str) -> dict[str, Any] | None:
        """The File ``name`` as the API serves it (None: not found)."""
        response = self.get(f"{FILES}/{name}")
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        document: dict[str, Any] = response.json()
        return document

    def on_disk(self, name: str) -> str | None:
        """What ``NAME.txt`` under the root holds (None: no such file)."""
        target = self.root / f"{name}.txt"
        return target.read_text() if target.exists() else None

    def wait_on_disk(self, name: str, content: str | None) -> None:
        """Wait until ``NAME.txt`` holds ``content`` (None: until it is gone)."""
        wait_until(lambda: self.on_disk(name) == content, f"{name}.txt holding {content!r}", DEADLINE)

    def kubectl(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        """kubectl against this server."""
        return kubectl(self.config, *args, **options)


@pytest.fixture
def server(tmp_path: Path, root: Path) -> Iterator[Server]:
    """``reconcile serve --run`` with the files provider confined to ``root`` (the
    environment's form of ``--root``), and a kubeconfig for it."""
    db = tmp_path / "state.db"
    with served(db, "--run", env={"RECONCILE_FILES__ROOTS": str(root)}) as url:
        yield Server(url, db, root, kubeconfig(tmp_path / "kubeconfig", url))


def cli(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``reconcile --db DB ARGS`` as another process on the same store."""
    return subprocess.run(
        reconcile_command("--db", str(db), *args),
        capture_output=True,
        text=True,
        env=environment(**env),
        cwd=CHECKOUT,
        timeout=120,
        check=False,
    )


@contextlib.contextmanager
def serving(db: Path, *options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``reconcile --db DB OPTIONS serve --port 0 --run`` as a process the test signals
    itself, and the URL it serves on; killed afterwards if still running, its pipes
    closed either way."""
    with serve_process(db, "--run", options=options, env=environment()) as found:
        yield found


class TestServeRun:
    """``serve --run``: the controllers run in the server's process, on its store."""

    def test_what_is_declared_converges_and_the_api_shows_it(self, server: Server, tmp_path: Path) -> None:
        """A File declared by ``reconcile apply`` in another process is written under the
        root by the server's runner (its ``--root``, given by the environment, applies),
        and the API serves it Ready."""
        manifest = tmp_path / "index.yaml"
        manifest.write_text(yaml.safe_dump(file_manifest("index", "hello\n")))
        applied = cli(server.db, "--root", str(server.root), "apply", "-f", str(manifest))
        assert applied.returncode == 0, applied.stderr
        server.wait_on_disk("index", "hello\n")
        wait_until(
            lambda: condition(server.document("index") or {}, "Ready") == "True", "index Ready", DEADLINE
        )

    def test_the_runtimes_health_is_the_servers(self, server: Server) -> None:
        """``/readyz`` checks the runtime beside the store once its controllers are
        synced; ``/health`` lists them."""
        wait_until(lambda: server.get("/readyz").status_code == 200, "ready", DEADLINE)
        assert "[+]runtime ok" in server.get("/readyz?verbose").text
        document = server.get("/health").json()
        assert document["runtime"]
        assert "file.files.reconcile.dev" in json.dumps(document["runtime"])

    def test_the_runner_is_the_servers(self, server: Server) -> None:
        """While it serves, the store's runner lock is the server's: another runner is
        refused, naming it."""
        other = cli(server.db, "run", "--once", "--timeout", "10")
        assert other.returncode == 1
        assert "another runner is reconciling" in other.stderr

    def test_sigterm_stops_the_api_and_the_runner_cleanly(self, tmp_path: Path, root: Path) -> None:
        """The global ``--root`` reaches the runner (a File POSTed is written under it);
        SIGTERM: the server stops serving, the controllers drain, the store closes and
        the process exits 0 within the shutdown deadline; the runner lock is free again."""
        db = tmp_path / "state.db"
        with serving(db, "--root", str(root)) as (process, url):
            created = httpx.post(f"{url}{FILES}", json=file_manifest("index", "hello\n"), timeout=DEADLINE)
            assert created.status_code == 201, created.text
            wait_until((root / "index.txt").exists, "index.txt under --root", DEADLINE)
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=SHUTDOWN_DEADLINE + DEADLINE)
        assert process.returncode == 0, err
        assert "Traceback" not in err
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}{FILES}", timeout=5)
        after = cli(db, "--root", str(root), "run", "--once", "--timeout", "30")
        assert after.returncode == 0, after.stderr

    def test_sigterm_ends_an_open_watch_cleanly(self, tmp_path: Path, root: Path) -> None:
        """SIGTERM while a client watches: its stream ends (a complete chunked
        response, no error), and the process still exits 0 within the deadline."""
        with serving(tmp_path / "state.db", "--root", str(root)) as (process, url):
            seen: list[str] = []
            params = {"watch": "true", "allowWatchBookmarks": "true"}
            with httpx.stream("GET", f"{url}{FILES}", params=params, timeout=DEADLINE) as watch:
                assert watch.status_code == 200
                process.send_signal(signal.SIGTERM)
                seen.extend(watch.iter_lines())  # ends when the server ends the stream
            _, err = process.communicate(timeout=SHUTDOWN_DEADLINE + DEADLINE)
        assert process.returncode == 0, err
        assert all(json.loads(line)["type"] in {"BOOKMARK", "ERROR"} for line in seen if line), seen

    def test_an_imported_operator_runs_in_the_server(self, tmp_path: Path, root: Path) -> None:
        """``--import sites:operator`` (here ``RECONCILE_IMPORT``): its kind is served
        (kubectl applies a StaticSite), and its controller runs in the server beside the
        providers' (the site's page is written under the root through its child File)."""
        operator = CHECKOUT / "examples" / "operator"
        env = {
            "RECONCILE_IMPORT": "sites:operator",
            "RECONCILE_FILES__ROOTS": str(root),
            "PYTHONPATH": f"{operator}:{CHECKOUT}:{CHECKOUT / 'providers'}",
        }
        with served(tmp_path / "state.db", "--run", env=env) as url:
            server = Server(url, tmp_path / "state.db", root, kubeconfig(tmp_path / "kubeconfig", url))
            site = {
                "apiVersion": "sites.example.dev/v1",
                "kind": "StaticSite",
                "metadata": {"name": "docs", "namespace": "default"},
                "spec": {"title": "Docs", "pages": {"index.html": "<h1>hello</h1>"}},
            }
            applied = server.kubectl("apply", "-f", "-", stdin=yaml_of(site))
            assert applied.stdout.strip() == "staticsite.sites.example.dev/docs created"
            page = root / "docs" / "index.html"
            wait_until(page.exists, "the site's page on disk", DEADLINE)
            assert "<h1>hello</h1>" in page.read_text()
            children = server.kubectl("get", "files", "-o", "name").stdout.split()
            assert children == ["file.files.reconcile.dev/docs.index.html"]

    def test_a_database_that_cannot_be_opened_is_a_usage_error(self, tmp_path: Path) -> None:
        """``--db`` in a folder that does not exist: exit 2 naming it, as ``run`` does."""
        refused = cli(tmp_path / "nowhere" / "state.db", "serve", "--port", "0", "--run")
        assert refused.returncode == 2
        assert f"error: --db: {tmp_path / 'nowhere' / 'state.db'}" in refused.stderr

    def test_a_second_server_with_run_is_refused(self, server: Server) -> None:
        """``serve --run`` on a store another runner holds exits 1 saying so, with no
        traceback."""
        refused = cli(server.db, "serve", "--port", "0", "--run")
        assert refused.returncode == 1
        assert "another runner is reconciling" in refused.stderr
        assert "Traceback" not in refused.stderr


def yaml_of(*documents: dict[str, Any]) -> str:
    """Manifests as a YAML stream, as ``kubectl apply -f -`` reads it."""
    return yaml.safe_dump_all(documents)


class Lines:
    """The output of a long-running process, line by line, read by a thread so that the
    test can wait for a line with a deadline (``kubectl get -w``)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_for(self, predicate: Any, what: str, timeout: float = DEADLINE) -> str:
        """The first line not yet read that ``predicate`` holds for; fail after
        ``timeout`` seconds or when the output ends first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"not within {timeout} s: {what}; output so far: {self.seen}"
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"the output ended before {what}: {self.seen}; {self._stderr()}"
            self.seen.append(line)
            if predicate(line):
                return line

    def _stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()


@contextlib.contextmanager
def watching(server: Server, *args: str) -> Iterator[Lines]:
    """``kubectl ARGS`` (a ``get -w``) running in the background; stopped afterwards."""
    process = subprocess.Popen(
        ["kubectl", *args],  # noqa: S607 - kubectl from PATH, as a user runs it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "KUBECONFIG": str(server.config),
            "KUBECACHEDIR": str(server.config.parent / "kube-cache"),
        },
    )
    try:
        yield Lines(process)
    finally:
        stop(process)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


class TestKubectl:
    """kubectl against ``serve --run``: each verb answers as against a cluster, and what
    it declares converges on disk."""

    def test_apply_creates_configures_and_leaves_unchanged(self, server: Server) -> None:
        """Client-side ``apply -f``: created (on disk, Ready), configured by a changed
        manifest (on disk), unchanged by the same one again.

        The path is absolute: the files provider's admission makes a relative one
        absolute, and kubectl, seeing the live path differ from the declared one, would
        patch it back every time and say ``configured``, as against a cluster with such a
        mutating webhook."""
        path = str(server.root / "index.txt")
        one = yaml_of(file_manifest("index", "one\n", path=path))
        created = server.kubectl("apply", "-f", "-", stdin=one)
        assert created.stdout.strip() == "file.files.reconcile.dev/index created"
        server.wait_on_disk("index", "one\n")
        document = server.document("index")
        assert document is not None
        assert "kubectl.kubernetes.io/last-applied-configuration" in document["metadata"]["annotations"]
        two = yaml_of(file_manifest("index", "two\n", path=path))
        configured = server.kubectl("apply", "-f", "-", stdin=two)
        assert configured.stdout.strip() == "file.files.reconcile.dev/index configured"
        server.wait_on_disk("index", "two\n")
        again = server.kubectl("apply", "-f", "-", stdin=two)
        assert again.stdout.strip() == "file.files.reconcile.dev/index unchanged"

    def test_server_side_apply_and_its_conflicts(self, server: Server) -> None:
        """``apply --server-side``: applied and converged; another field manager
        declaring the same field with another value conflicts (naming the manager),
        and wins with ``--force-conflicts``."""
        applied = server.kubectl(
            "apply", "--server-side", "-f", "-", stdin=yaml_of(file_manifest("ssa", "mine\n"))
        )
        assert applied.stdout.strip() == "file.files.reconcile.dev/ssa serverside-applied"
        server.wait_on_disk("ssa", "mine\n")
        theirs = yaml_of(file_manifest("ssa", "theirs\n"))
        conflict = server.kubectl(
            "apply", "--server-side", "--field-manager", "other", "-f", "-", stdin=theirs, check=False
        )
        assert conflict.returncode != 0
        assert "conflict" in conflict.stderr.lower()
        assert "kubectl" in conflict.stderr  # the manager that owns the field
        forced = server.kubectl(
            "apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", "-", stdin=theirs
        )
        assert forced.stdout.strip() == "file.files.reconcile.dev/ssa serverside-applied"
        server.wait_on_disk("ssa", "theirs\n")

    def test_diff_shows_what_apply_would_change_and_changes_nothing(self, server: Server) -> None:
        """``diff -f``: exit 1 with the change as a unified diff; nothing stored or
        written; exit 0 and no output once there is nothing to change."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("index", "old\n")))
        server.wait_on_disk("index", "old\n")
        before = server.document("index")
        newer = yaml_of(file_manifest("index", "new\n"))
        changed = server.kubectl("diff", "-f", "-", stdin=newer, check=False)
        assert changed.returncode == 1, changed.stderr
        lines = changed.stdout.splitlines()
        assert [line for line in lines if line.startswith("-") and "old" in line], changed.stdout
        assert [line for line in lines if line.startswith("+") and "new" in line], changed.stdout
        after = server.document("index")
        assert after is not None
        assert before is not None
        assert after["spec"] == before["spec"]
        assert server.on_disk("index") == "old\n"
        same = server.kubectl("diff", "-f", "-", stdin=yaml_of(file_manifest("index", "old\n")), check=False)
        assert (same.returncode, same.stdout) == (0, ""), same.stderr

    def test_patch_label_and_annotate(self, server: Server) -> None:
        """``patch`` (merge and JSON patch) converges on disk; ``label`` and ``annotate``
        change the metadata, and ``get -l`` selects by the new label."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("index", "one\n")))
        merged = server.kubectl(
            "patch", "file", "index", "--type=merge", "-p", '{"spec":{"content":"two\\n"}}'
        )
        assert merged.stdout.strip() == "file.files.reconcile.dev/index patched"
        server.wait_on_disk("index", "two\n")
        operations = json.dumps([{"op": "replace", "path": "/spec/content", "value": "three\n"}])
        server.kubectl("patch", "file", "index", "--type=json", "-p", operations)
        server.wait_on_disk("index", "three\n")
        labelled = server.kubectl("label", "file", "index", "tier=web")
        assert labelled.stdout.strip() == "file.files.reconcile.dev/index labeled"
        annotated = server.kubectl("annotate", "file", "index", "note=hello")
        assert annotated.stdout.strip() == "file.files.reconcile.dev/index annotated"
        selected = server.kubectl(
            "get", "files", "-l", "tier=web", "-o", "jsonpath={.items[*].metadata.name}"
        )
        assert selected.stdout == "index"
        note = server.kubectl("get", "file", "index", "-o", "jsonpath={.metadata.annotations.note}")
        assert note.stdout == "hello"
        relabelled = server.kubectl("label", "file", "index", "tier=db", check=False)
        assert relabelled.returncode != 0
        assert "--overwrite" in relabelled.stderr
        server.kubectl("label", "file", "index", "tier-")
        assert server.kubectl("get", "files", "-l", "tier", "-o", "name").stdout == ""
        assert server.on_disk("index") == "three\n"

    def test_edit_with_an_editor_script(self, server: Server, tmp_path: Path) -> None:
        """``edit``: kubectl hands the object to ``$EDITOR``; what the script changes is
        stored and converges on disk."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("index", "before\n")))
        editor = tmp_path / "editor.py"
        editor.write_text(
            "import sys, pathlib\n"
            "path = pathlib.Path(sys.argv[-1])\n"
            "path.write_text(path.read_text().replace('before', 'after'))\n"
        )
        edited = server.kubectl("edit", "file", "index", env={"EDITOR": f"{sys.executable} {editor}"})
        assert edited.stdout.strip() == "file.files.reconcile.dev/index edited"
        server.wait_on_disk("index", "after\n")

    def test_wait_for_ready(self, server: Server) -> None:
        """``wait --for=condition=Ready``: returns once the runner made the file."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("index", "hello\n")))
        waited = server.kubectl("wait", "--for=condition=Ready", "file/index", "--timeout=60s")
        assert waited.stdout.strip() == "file.files.reconcile.dev/index condition met"
        assert server.on_disk("index") == "hello\n"

    @pytest.mark.parametrize(
        ("cascade", "child_left"), [("background", False), ("foreground", False), ("orphan", True)]
    )
    def test_delete_with_cascade(self, server: Server, cascade: str, *, child_left: bool) -> None:
        """``delete --cascade``: the File goes, and its file from disk; its dependent (a
        File whose owner reference names it) goes too, unless orphaned: then it stays,
        on disk, its owner reference removed."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("parent", "p\n")))
        parent = server.document("parent")
        assert parent is not None
        child = file_manifest("child", "c\n")
        child["metadata"]["ownerReferences"] = [
            {
                "apiVersion": GROUP_VERSION,
                "kind": "File",
                "name": "parent",
                "uid": parent["metadata"]["uid"],
                "blockOwnerDeletion": True,
            }
        ]
        server.kubectl("apply", "-f", "-", stdin=yaml_of(child))
        server.wait_on_disk("parent", "p\n")
        server.wait_on_disk("child", "c\n")
        deleted = server.kubectl("delete", "file", "parent", f"--cascade={cascade}", timeout=DEADLINE * 2)
        assert deleted.stdout.strip() == 'file.files.reconcile.dev "parent" deleted'
        assert server.document("parent") is None  # kubectl waited until it was gone
        missing = server.kubectl("get", "file", "parent", check=False)
        assert missing.returncode == 1
        assert 'files.reconcile.dev "parent" not found' in missing.stderr
        server.wait_on_disk("parent", None)
        if child_left:
            orphan = server.document("child")
            assert orphan is not None
            assert not orphan["metadata"].get("ownerReferences")
            assert server.on_disk("child") == "c\n"
        else:
            wait_until(lambda: server.document("child") is None, "the dependent collected", DEADLINE)
            server.wait_on_disk("child", None)

    def test_get_watch_prints_each_change(self, server: Server) -> None:
        """``get -w``: started, it prints the object; a change made afterwards is printed
        as it happens, and so is the deletion."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("index", "one\n")))
        template = "jsonpath={.metadata.name} {.spec.content}{'\\n'}"
        with watching(server, "get", "file", "index", "-w", "-o", template) as lines:
            lines.wait_for(lambda line: line == "index one", "the object as it is")
            server.kubectl("patch", "file", "index", "--type=merge", "-p", '{"spec":{"content":"two"}}')
            lines.wait_for(lambda line: line == "index two", "the patched content")
        with watching(server, "get", "files", "-w", "--output-watch-events") as lines:
            lines.wait_for(lambda line: line.startswith("ADDED") and " index " in f"{line} ", "ADDED index")
            server.kubectl("delete", "file", "index")
            lines.wait_for(lambda line: line.startswith("DELETED") and " index " in f"{line} ", "DELETED")

    def test_get_prints_the_kinds_columns(self, server: Server) -> None:
        """``get`` prints a table with the kind's printer columns (as ``reconcile get``);
        ``-o yaml`` the document."""
        server.kubectl("apply", "-f", "-", stdin=yaml_of(file_manifest("index", "hello\n")))
        server.kubectl("wait", "--for=condition=Ready", "file/index", "--timeout=60s")
        table = server.kubectl("get", "files").stdout.splitlines()
        assert table[0].split()[0] == "NAME"
        assert "READY" in table[0].split()
        assert table[1].split()[0] == "index"
        document = yaml.safe_load(server.kubectl("get", "file", "index", "-o", "yaml").stdout)
        assert document["spec"]["content"] == "hello\n"
        assert document["metadata"]["resourceVersion"]


@pytest.fixture
def kube(server: Server, tmp_path: Path) -> Iterator[Any]:
    """The official ``kubernetes`` client's dynamic client, from the kubeconfig (its
    discovery cached under ``tmp_path``)."""
    from kubernetes import config, dynamic  # noqa: PLC0415 - a test dependency, loaded by these tests only

    api_client = config.new_client_from_config(config_file=str(server.config))
    try:
        yield dynamic.DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    finally:
        api_client.close()


class TestPythonClient:
    """The ``kubernetes`` Python client's dynamic client against ``serve --run``."""

    def test_create_get_list_patch_apply_delete(self, server: Server, kube: Any) -> None:
        """Each verb answers as a cluster does (409 for a second create, NotFound after
        the delete), and each change converges on disk."""
        from kubernetes.dynamic.exceptions import ConflictError, NotFoundError  # noqa: PLC0415

        files = kube.resources.get(api_version=GROUP_VERSION, kind="File")
        created = files.create(body=file_manifest("py", "hello\n", app="py"), namespace="default")
        assert created.metadata.name == "py"
        assert created.metadata.uid
        server.wait_on_disk("py", "hello\n")
        with pytest.raises(ConflictError) as refused:
            files.create(body=file_manifest("py", "again\n"), namespace="default")
        assert json.loads(refused.value.body)["reason"] == "AlreadyExists"
        got = files.get(name="py", namespace="default")
        assert got.spec.content == "hello\n"
        listed = files.get(namespace="default", label_selector="app=py")
        assert listed.kind == "FileList"
        assert [item.metadata.name for item in listed.items] == ["py"]
        patched = files.patch(
            name="py",
            namespace="default",
            body={"spec": {"content": "patched\n"}},
            content_type="application/merge-patch+json",
        )
        assert patched.spec.content == "patched\n"
        server.wait_on_disk("py", "patched\n")
        applied = files.server_side_apply(
            body=file_manifest("py", "applied\n"),
            name="py",
            namespace="default",
            field_manager="python",
            force_conflicts=True,
        )
        assert applied.spec.content == "applied\n"
        server.wait_on_disk("py", "applied\n")
        files.delete(name="py", namespace="default")
        server.wait_on_disk("py", None)

        def gone() -> bool:
            try:
                files.get(name="py", namespace="default")
            except NotFoundError:
                return True
            return False

        wait_until(gone, "py gone from the API", DEADLINE)

    def test_watch_from_a_resource_version(self, server: Server, kube: Any) -> None:
        """A watch from a list's resourceVersion sees the object ADDED, MODIFIED as it was
        patched, then DELETED, in that order."""
        files = kube.resources.get(api_version=GROUP_VERSION, kind="File")
        # Something first: an empty store's lists say resourceVersion "0", which a watch
        # takes (as Kubernetes does) as "from any point", not "from the beginning".
        files.create(body=file_manifest("before", "first\n"), namespace="default")
        start = files.get(namespace="default").metadata.resourceVersion
        assert start != "0"
        files.create(body=file_manifest("seen", "one\n"), namespace="default")
        server.wait_on_disk("seen", "one\n")
        files.patch(
            name="seen",
            namespace="default",
            body={"spec": {"content": "two\n"}},
            content_type="application/merge-patch+json",
        )
        server.wait_on_disk("seen", "two\n")
        files.delete(name="seen", namespace="default")
        events: list[tuple[str, str]] = []
        for event in files.watch(namespace="default", resource_version=start, timeout=int(DEADLINE)):
            obj = event["raw_object"]
            if obj["metadata"]["name"] != "seen":
                continue  # the runner's own changes to the first object, after the list
            events.append((event["type"], obj["spec"]["content"]))
            if event["type"] == "DELETED":
                break
        assert events[0] == ("ADDED", "one\n")
        assert ("MODIFIED", "two\n") in events
        assert events[-1] == ("DELETED", "two\n")
        assert {kind for kind, _ in events} == {"ADDED", "MODIFIED", "DELETED"}


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """One moto_server for these tests."""
    with moto_server() as url:
        yield url


@pytest.fixture
def providers(
    tmp_path: Path, root: Path, s3_url: str, tsig: Bind, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Server]:
    """``serve --run`` with every provider configured: files under ``root``, s3 on the
    moto endpoint (test credentials from the environment), dns on the test's named (the
    TSIG secret from the environment), from a ``--provider-config`` file named by the
    environment."""
    reset(s3_url)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret-of-anybody")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    config = tmp_path / "providers.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "files": {"roots": [str(root)]},
                "s3": {"endpoint_url": s3_url, "addressing_style": "path"},
                "dns": tsig.config(),
            }
        )
    )
    db = tmp_path / "state.db"
    with served(db, "--run", env={"RECONCILE_PROVIDER_CONFIG": str(config)}) as url:
        yield Server(url, db, root, kubeconfig(tmp_path / "kubeconfig", url))


class TestEveryProvider:
    """A file, a bucket, an object in it and a record set applied through kubectl
    converge through the server's runner, and go when deleted through kubectl."""

    def test_file_bucket_object_and_record_set(self, providers: Server, s3_url: str, tsig: Bind) -> None:
        """One ``kubectl apply`` of four kinds; each is made as declared (on disk, in
        moto_server, in BIND); ``kubectl wait`` sees them Ready; ``kubectl delete -f``
        removes them from the world too."""
        import botocore.session  # noqa: PLC0415 - the s3 provider's dependency, for the check by hand

        scope = secrets.token_hex(4)
        bucket = f"e2e-{scope}"
        record = f"www-{scope}"
        manifests = yaml_of(
            file_manifest("index", "hello\n"),
            {
                "apiVersion": "s3.reconcile.dev/v1",
                "kind": "Bucket",
                "metadata": {"name": bucket, "namespace": "default"},
                "spec": {"tags": {"team": "web"}},
            },
            {
                "apiVersion": "s3.reconcile.dev/v1",
                "kind": "Object",
                "metadata": {"name": f"page-{scope}", "namespace": "default"},
                "spec": {"bucket": bucket, "key": "index.html", "content": "<h1>hello</h1>\n"},
            },
            {
                "apiVersion": "dns.reconcile.dev/v1",
                "kind": "RecordSet",
                "metadata": {"name": record, "namespace": "default"},
                "spec": {"zone": ZONE, "name": record, "type": "A", "records": ["192.0.2.7"]},
            },
        )
        applied = providers.kubectl("apply", "-f", "-", stdin=manifests)
        assert applied.stdout.splitlines() == [
            "file.files.reconcile.dev/index created",
            f"bucket.s3.reconcile.dev/{bucket} created",
            f"object.s3.reconcile.dev/page-{scope} created",
            f"recordset.dns.reconcile.dev/{record} created",
        ]
        providers.kubectl("wait", "--for=condition=Ready", "-f", "-", "--timeout=60s", stdin=manifests)
        assert providers.on_disk("index") == "hello\n"
        s3 = botocore.session.get_session().create_client("s3", region_name="eu-west-1", endpoint_url=s3_url)
        try:
            tags = {tag["Key"]: tag["Value"] for tag in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}
            assert tags["team"] == "web"
            page = s3.get_object(Bucket=bucket, Key="index.html")
            assert page["Body"].read() == b"<h1>hello</h1>\n"
            assert page["ContentType"] == "text/html"
            assert asyncio.run(ByHand(tsig).records(record, "A")) == ["192.0.2.7"]
            providers.kubectl("delete", "-f", "-", stdin=manifests, timeout=DEADLINE * 2)
            providers.wait_on_disk("index", None)
            buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
            assert bucket not in buckets
            assert asyncio.run(ByHand(tsig).records(record, "A")) == []
        finally:
            s3.close()


def test_the_authenticated_user_is_recorded_and_the_runner_converges(tmp_path: Path, root: Path) -> None:
    """With ``--token-file``, a File created by the Python client with alice's token is
    recorded as alice's doing in its history (the API's), made on disk by the server's
    runner (recorded as the engine's), and the token is nowhere in the store; no token
    is 401."""
    from kubernetes import config, dynamic  # noqa: PLC0415
    from kubernetes.dynamic.exceptions import UnauthorizedError  # noqa: PLC0415

    token = secrets.token_urlsafe(24)
    tokens = tmp_path / "tokens.yaml"
    digest = hashlib.sha256(token.encode()).hexdigest()
    tokens.write_text(yaml.safe_dump({"tokens": [{"hash": f"sha256:{digest}", "user": "alice"}]}))
    db = tmp_path / "state.db"
    env = {"RECONCILE_FILES__ROOTS": str(root)}
    with served(db, "--run", "--token-file", str(tokens), env=env) as url:
        server = Server(url, db, root, kubeconfig(tmp_path / "kubeconfig", url, token=token))
        api_client = config.new_client_from_config(config_file=str(server.config))
        try:
            files = dynamic.DynamicClient(
                api_client, cache_file=str(tmp_path / "discovery.json")
            ).resources.get(api_version=GROUP_VERSION, kind="File")
            files.create(body=file_manifest("index", "hello\n"), namespace="default")
            server.wait_on_disk("index", "hello\n")
        finally:
            api_client.close()
        history = httpx.get(
            f"{url}{FILES}/index/history", headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE
        ).json()
        anonymous = kubeconfig(tmp_path / "anonymous", url)
        nobody = config.new_client_from_config(config_file=str(anonymous))
        try:
            with pytest.raises(UnauthorizedError):
                dynamic.DynamicClient(nobody, cache_file=str(tmp_path / "anonymous.json"))
        finally:
            nobody.close()
    by = {(item["type"], item["user"]) for item in history["items"]}
    assert ("Created", "alice") in by
    assert any(item["actor"] == "reconcile-engine" and item["user"] is None for item in history["items"])
    assert token not in db.read_bytes().decode(errors="replace")
