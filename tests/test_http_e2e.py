"""End to end: ``reconcile serve --run`` (the API and the controllers in one process)
spoken to by clients nobody here wrote, kubectl and the official ``kubernetes`` Python
client, each as a person would use it against a cluster; what they declare converges
(a File on disk, a bucket in moto_server, a record set in BIND) through the runner in
the server's own process."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import yaml
from http_helpers import kubeconfig, kubectl, reconcile_command, served, wait_until

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

    def test_the_runner_is_the_servers(self, server: Server) -> None:
        """While it serves, the store's runner lock is the server's: another runner is
        refused, naming it."""
        other = cli(server.db, "run", "--once", "--timeout", "10")
        assert other.returncode == 1
        assert "another runner is reconciling" in other.stderr

    def test_sigterm_stops_the_api_and_the_runner_cleanly(self, tmp_path: Path, root: Path) -> None:
        """SIGTERM: the server stops serving, the controllers drain, the store closes and
        the process exits 0 within the shutdown deadline; the runner lock is free again."""
        db = tmp_path / "state.db"
        process = subprocess.Popen(
            reconcile_command("--db", str(db), "--root", str(root), "serve", "--port", "0", "--run"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
            cwd=CHECKOUT,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("serving on "), line
            url = line.removeprefix("serving on ").strip()
            assert httpx.get(f"{url}{FILES}", timeout=DEADLINE).status_code == 200
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=SHUTDOWN_DEADLINE + DEADLINE)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, err
        assert "Traceback" not in err
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}{FILES}", timeout=5)
        after = cli(db, "--root", str(root), "run", "--once", "--timeout", "30")
        assert after.returncode == 0, after.stderr

    def test_a_second_server_with_run_is_refused(self, server: Server) -> None:
        """``serve --run`` on a store another runner holds exits 1 saying so, with no
        traceback."""
        refused = cli(server.db, "serve", "--port", "0", "--run")
        assert refused.returncode == 1
        assert "another runner is reconciling" in refused.stderr
        assert "Traceback" not in refused.stderr
