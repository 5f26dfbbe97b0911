"""The embedding example of the HTTP API: a Starlette and a FastAPI service serve their
own routes beside reconcile's API mounted under ``/k8s``, over one client."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from reconcile import connect

sys.path.insert(0, str(Path(__file__).parents[1] / "examples" / "http_service"))

from embedding import PREFIX, fastapi_host, starlette_host

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
