"""The HTTP API's reads: one object and lists, in the wire form kubectl expects."""

from __future__ import annotations

from pathlib import Path

from http_helpers import api

MANIFEST = {
    "apiVersion": "files.reconcile.dev/v1",
    "kind": "File",
    "metadata": {"name": "index", "labels": {"app": "site"}},
    "spec": {"path": "index.html", "content": "hello\n"},
}
FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"


async def test_get_returns_the_document_in_the_wire_form(tmp_path: Path) -> None:
    """resourceVersion a string, managedFields Kubernetes' entries, no null metadata."""
    async with api(tmp_path) as (client, http):
        await client.apply(MANIFEST, origin=tmp_path / "site.yaml")
        response = await http.get(f"{FILES}/index")
    assert response.status_code == 200
    document = response.json()
    assert document["kind"] == "File"
    assert document["metadata"]["resourceVersion"] == "1"  # a string, as client-go reads it
    assert "deletionTimestamp" not in document["metadata"]
    [entry] = document["metadata"]["managedFields"]
    assert entry["manager"] == "reconcile"
    assert entry["operation"] == "Apply"
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert document["spec"]["content"] == "hello\n"


async def test_a_list_across_namespaces_and_by_label(tmp_path: Path) -> None:
    """Every namespace's objects in order, a label selector, a page with a continue token."""
    async with api(tmp_path) as (client, http):
        await client.apply(MANIFEST, origin=tmp_path / "site.yaml")
        other = {
            **MANIFEST,
            "metadata": {"name": "about", "labels": {"app": "blog"}},
            "spec": {"path": "about.html", "content": "about\n"},
        }
        await client.apply(other, origin=tmp_path / "site.yaml")
        every = (await http.get("/apis/files.reconcile.dev/v1/files")).json()
        selected = (await http.get(FILES, params={"labelSelector": "app=site"})).json()
        page = (await http.get(FILES, params={"limit": "1"})).json()
    assert every["kind"] == "FileList"
    assert [i["metadata"]["name"] for i in every["items"]] == ["about", "index"]
    assert [i["metadata"]["name"] for i in selected["items"]] == ["index"]
    assert len(page["items"]) == 1
    assert page["metadata"]["continue"]


async def test_unknown_group_kind_and_object_are_404_statuses(tmp_path: Path) -> None:
    """A missing object, group, plural or version: a NotFound Status naming it."""
    async with api(tmp_path) as (_, http):
        missing = await http.get(f"{FILES}/nothing")
        group = await http.get("/apis/nowhere.dev/v1/namespaces/default/files")
        plural = await http.get("/apis/files.reconcile.dev/v1/namespaces/default/nothings")
        version = await http.get("/apis/files.reconcile.dev/v9/namespaces/default/files")
    for response in (missing, group, plural, version):
        assert response.status_code == 404
        status = response.json()
        assert status["kind"] == "Status"
        assert status["reason"] == "NotFound"
        assert status["code"] == 404
    assert "nothing" in missing.json()["message"]
