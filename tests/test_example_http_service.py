"""The embedding example of the HTTP API: a Starlette and a FastAPI service serve their
own routes beside reconcile's API mounted under ``/k8s``, over one client."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_helpers import CHECKOUT, kubeconfig, kubectl

from reconcile import connect

sys.path.insert(0, str(Path(__file__).parents[1] / "examples" / "http_service"))

from embedding import PREFIX, fastapi_host, starlette_host

EXAMPLE = CHECKOUT / "examples" / "http_service" / "embedding.py"
FILES = f"{PREFIX}/apis/files.reconcile.dev/v1/namespaces/default/files"
MANIFEST = {
    "apiVersion": "files.reconcile.dev/v1",
    "kind": "File",
    "metadata": {"name": "index"},
    "spec": {"path": "index.html", "content": "hello\n"},
}


@pytest.mark.parametrize("host", [starlette_host, fastapi_host], ids=["starlette", "fastapi"])
async def test_the_api_answers_under_the_hosts_prefix(tmp_path: Path, host: Callable[[Any], Any]) -> None:
    """The host's own route and the mounted API's reads answer on one app; the API's
    errors are Kubernetes Status objects under the prefix too; a path neither serves is
    the host's 404, not the API's."""
    async with connect(f"sqlite:///{tmp_path / 'state.db'}") as client:
        await client.apply(MANIFEST, origin=tmp_path / "site.yaml")
        transport = httpx.ASGITransport(app=host(client))
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
            summary = await http.get("/summary")
            one = await http.get(f"{FILES}/index")
            listed = await http.get(FILES)
            missing = await http.get(f"{FILES}/nothing")
            elsewhere = await http.get("/apis/files.reconcile.dev/v1/namespaces/default/files")
    assert summary.json() == {"File": 1}
    assert one.status_code == 200
    assert one.json()["metadata"]["name"] == "index"
    assert one.json()["metadata"]["resourceVersion"] == "1"
    assert [item["metadata"]["name"] for item in listed.json()["items"]] == ["index"]
    assert missing.status_code == 404
    assert missing.json()["kind"] == "Status"
    assert missing.json()["reason"] == "NotFound"
    assert elsewhere.status_code == 404
    assert "Status" not in elsewhere.text  # the host's own answer: the API is under /k8s


@contextlib.contextmanager
def example_served(db: Path, *args: str) -> Iterator[str]:
    """``examples/http_service/embedding.py --port 0 ARGS`` as a process: the URL it
    serves on once it accepts connections; stopped (SIGTERM) afterwards."""
    environment = {**os.environ, "PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}"}
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--db", f"sqlite:///{db}", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until it says where, or exits
        assert line.startswith("serving on "), f"{line!r} {process.stderr.read() if process.stderr else ''}"
        yield line.removeprefix("serving on ").strip()
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_kubectl_reaches_the_api_under_the_prefix(tmp_path: Path) -> None:
    """kubectl, its server URL ending in the prefix, applies and lists through the API
    mounted in the FastAPI service (discovery, the write and the read all under /k8s)."""
    manifest = tmp_path / "index.yaml"
    manifest.write_text(
        "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: index}\n"
        f"spec: {{path: index.html, root: {tmp_path}, content: hello}}\n"
    )
    with example_served(tmp_path / "state.db", "--fastapi") as url:
        config = kubeconfig(tmp_path / "kubeconfig", f"{url}{PREFIX}")
        kubectl(config, "apply", "-f", str(manifest))
        listed = json.loads(kubectl(config, "get", "files", "-o", "json").stdout)
        summary = httpx.get(f"{url}/summary", timeout=30).json()
    assert [item["metadata"]["name"] for item in listed["items"]] == ["index"]
    assert summary == {"File": 1}
