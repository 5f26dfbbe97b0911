"""Kubernetes' REST semantics the HTTP API must keep, found by review: the words and
details of its refusals as client-go and kubectl read them, and preconditions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_helpers import api

from reconcile.api import Client

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"
MERGE = {"content-type": "application/merge-patch+json"}
JSON_PATCH = {"content-type": "application/json-patch+json"}
APPLY = {"content-type": "application/apply-patch+yaml"}
#: client-go's ``OptimisticLockErrorMsg``.
MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def manifest(root: Path, name: str = "index", **spec: Any) -> dict[str, Any]:
    """A File manifest confined to ``root``."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name, "labels": {"app": "site"}},
        "spec": {"path": f"{name}.html", "root": str(root), "content": "hello\n", **spec},
    }


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    """A client and an httpx client on the app."""
    async with api(tmp_path) as pair:
        yield pair


def status_of(response: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    """``response`` is a failure Status of ``code`` and ``reason``; the Status."""
    assert response.status_code == code, response.text
    status: dict[str, Any] = response.json()
    assert (status["kind"], status["status"], status["code"], status["reason"]) == (
        "Status",
        "Failure",
        code,
        reason,
    )
    return status


async def test_stale_resource_version_says_kubernetes_message(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """A replace, a merge patch and a JSON patch naming a resourceVersion that is no
    longer the object's: 409 Conflict with the apiserver's words, details naming the
    object; nothing stored."""
    client, http = served
    old = (await http.post(FILES, json=manifest(tmp_path))).json()
    changed = await http.patch(f"{FILES}/index", json={"spec": {"content": "two\n"}}, headers=MERGE)
    assert changed.status_code == 200
    stale = old["metadata"]["resourceVersion"]
    refusals = [
        await http.put(f"{FILES}/index", json={**old, "spec": {**old["spec"], "content": "three\n"}}),
        await http.patch(
            f"{FILES}/index",
            json={"metadata": {"resourceVersion": stale}, "spec": {"content": "three\n"}},
            headers=MERGE,
        ),
        await http.patch(
            f"{FILES}/index",
            json=[
                {"op": "replace", "path": "/metadata/resourceVersion", "value": stale},
                {"op": "replace", "path": "/spec/content", "value": "three\n"},
            ],
            headers=JSON_PATCH,
        ),
    ]
    for response in refusals:
        status = status_of(response, 409, "Conflict")
        assert status["message"] == (
            f'Operation cannot be fulfilled on files.files.reconcile.dev "index": {MODIFIED}'
        )
        assert status["details"] == {"name": "index", "group": "files.reconcile.dev", "kind": "files"}
    assert await client.revision() == 2


async def test_replace_with_resource_version_and_another_uid_is_409(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """A replace that names the current resourceVersion but another object's uid (a
    precondition, as Kubernetes reads ``metadata.uid`` of an update): 409, nothing stored."""
    client, http = served
    document = (await http.post(FILES, json=manifest(tmp_path))).json()
    document["metadata"]["uid"] = "an-older-one"
    document["spec"]["content"] = "changed\n"
    response = await http.put(f"{FILES}/index", json=document)
    status = status_of(response, 409, "Conflict")
    assert "Precondition failed: UID in precondition: an-older-one" in status["message"]
    assert await client.revision() == 1


async def test_apply_conflict_names_managers_as_managed_fields_do(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """An apply over fields an updater and an applier own: Kubernetes' message and a
    ``FieldManagerConflict`` cause per field (``.spec.content``), each naming the manager
    as ``managedFields`` does (an updater's with its version, never our suffix)."""
    client, http = served
    url = f"{FILES}/index"
    created = await http.patch(url, json=manifest(tmp_path), headers=APPLY, params={"fieldManager": "deploy"})
    assert created.status_code == 201
    edited = await http.patch(
        url,
        json={"metadata": {"labels": {"app": "x"}}},
        headers=MERGE,
        params={"fieldManager": "kubectl-edit"},
    )
    assert edited.status_code == 200
    managers = {e["manager"]: e["operation"] for e in edited.json()["metadata"]["managedFields"]}
    assert managers == {"deploy": "Apply", "kubectl-edit": "Update"}
    theirs = manifest(tmp_path, content="theirs\n")
    one = await http.patch(url, json=theirs, headers=APPLY, params={"fieldManager": "other"})
    status = status_of(one, 409, "Conflict")
    assert status["message"] == (
        'Apply failed with 2 conflicts: conflicts with "deploy":\n- .spec.content\n'
        'conflicts with "kubectl-edit" using files.reconcile.dev/v1:\n- .metadata.labels.app'
    )
    causes = sorted((c["field"], c["message"], c["reason"]) for c in status["details"]["causes"])
    assert causes == [
        (
            ".metadata.labels.app",
            'conflict with "kubectl-edit" using files.reconcile.dev/v1',
            "FieldManagerConflict",
        ),
        (".spec.content", 'conflict with "deploy"', "FieldManagerConflict"),
    ]
    alone = manifest(tmp_path, content="theirs\n")
    del alone["metadata"]["labels"]
    single = await http.patch(url, json=alone, headers=APPLY, params={"fieldManager": "other"})
    status = status_of(single, 409, "Conflict")
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "deploy": .spec.content'
    assert await client.revision() == 2


async def test_create_without_name_is_invalid_with_details(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """A create with neither name nor generateName: 422 whose details name the kind and
    group (client-go's ``IsInvalid`` callers read them) and a FieldValueRequired cause."""
    client, http = served
    document = manifest(tmp_path)
    del document["metadata"]["name"]
    status = status_of(await http.post(FILES, json=document), 422, "Invalid")
    assert status["details"]["kind"] == "File"
    assert status["details"]["group"] == "files.reconcile.dev"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]
    assert await client.revision() == 0
