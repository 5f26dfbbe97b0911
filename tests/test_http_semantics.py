"""Kubernetes' REST semantics the HTTP API must keep, found by review: the words and
details of its refusals as client-go and kubectl read them, and preconditions."""

from __future__ import annotations

import json
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


async def test_apply_naming_another_uid_is_409(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """An applied configuration whose ``metadata.uid`` is not the stored object's (a
    precondition, as for any update): 409 Conflict, nothing stored; the object's own uid
    is accepted."""
    client, http = served
    url = f"{FILES}/index"
    document = (
        await http.patch(url, json=manifest(tmp_path), headers=APPLY, params={"fieldManager": "m"})
    ).json()
    applied = manifest(tmp_path, content="second\n")
    applied["metadata"]["uid"] = "an-older-one"
    response = await http.patch(url, json=applied, headers=APPLY, params={"fieldManager": "m"})
    status = status_of(response, 409, "Conflict")
    assert "Precondition failed: UID in precondition: an-older-one" in status["message"]
    assert await client.revision() == 1
    applied["metadata"]["uid"] = document["metadata"]["uid"]
    accepted = await http.patch(url, json=applied, headers=APPLY, params={"fieldManager": "m"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["spec"]["content"] == "second\n"


async def test_a_watch_from_a_later_pages_version_misses_no_change(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """Every page of a list says the first page's resourceVersion (as Kubernetes' pages
    do), so a watch started from the last page's version still gets a change made, while
    the pages were read, to an object of an earlier page."""
    _, http = served
    for name in ("a", "b"):
        assert (await http.post(FILES, json=manifest(tmp_path, name))).status_code == 201
    first = (await http.get(FILES, params={"limit": "1"})).json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["a"]
    changed = await http.patch(f"{FILES}/a", json={"spec": {"content": "changed\n"}}, headers=MERGE)
    assert changed.status_code == 200
    last = (await http.get(FILES, params={"limit": "1", "continue": first["metadata"]["continue"]})).json()
    assert [i["metadata"]["name"] for i in last["items"]] == ["b"]
    assert last["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": last["metadata"]["resourceVersion"], "timeoutSeconds": "1"}
    watched = await http.get(FILES, params=params)
    events = [json.loads(line) for line in watched.text.splitlines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "a")]
    assert events[0]["object"]["metadata"]["resourceVersion"] == changed.json()["metadata"]["resourceVersion"]


@pytest.mark.parametrize("token", ["W10=.1", "WyJkZWZhdWx0IiwgImEiXQ==.-1", "WyJkZWZhdWx0IiwgImEiXQ==.x"])
async def test_a_continue_token_with_a_bad_revision_is_a_400(
    served: tuple[Client, httpx.AsyncClient], token: str
) -> None:
    """A token whose key or first-page revision this server did not give: 400 naming continue."""
    _, http = served
    status = status_of(await http.get(FILES, params={"continue": token}), 400, "BadRequest")
    assert status["details"]["causes"][0]["field"] == "continue"


async def test_preconditions_fail_in_kubernetes_words(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """A delete whose preconditions name another resourceVersion or uid, and a replace
    naming another uid: 409 Conflict saying ``Operation cannot be fulfilled on ...:
    Precondition failed: ...`` as the apiserver's ``Preconditions.Check``; nothing stored."""
    client, http = served
    document = (await http.post(FILES, json=manifest(tmp_path))).json()
    uid = document["metadata"]["uid"]
    assert (await http.patch(f"{FILES}/index", json={"spec": {"content": "2\n"}}, headers=MERGE)).is_success
    prefix = 'Operation cannot be fulfilled on files.files.reconcile.dev "index": Precondition failed: '
    stale = await http.request("DELETE", f"{FILES}/index", json={"preconditions": {"resourceVersion": "1"}})
    assert status_of(stale, 409, "Conflict")["message"] == (
        prefix + "ResourceVersion in precondition: 1, ResourceVersion in object meta: 2"
    )
    other = await http.request("DELETE", f"{FILES}/index", json={"preconditions": {"uid": "someone-else"}})
    assert status_of(other, 409, "Conflict")["message"] == (
        prefix + f"UID in precondition: someone-else, UID in object meta: {uid}"
    )
    replaced = {
        **document,
        "metadata": {**document["metadata"], "uid": "someone-else", "resourceVersion": "2"},
    }
    status = status_of(await http.put(f"{FILES}/index", json=replaced), 409, "Conflict")
    assert status["message"] == prefix + f"UID in precondition: someone-else, UID in object meta: {uid}"
    assert status["details"] == {"name": "index", "group": "files.reconcile.dev", "kind": "files"}
    assert await client.revision() == 2


async def test_a_long_generate_name_is_cut_as_kubernetes_cuts_it(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """``generateName`` longer than 58 characters: the name is its first 58 and five
    random ones (63 in all), as the apiserver's name generator makes it."""
    _, http = served
    document = manifest(tmp_path)
    prefix = "a" * 70
    document["metadata"] = {"generateName": prefix}
    response = await http.post(FILES, json=document)
    assert response.status_code == 201, response.text
    name = response.json()["metadata"]["name"]
    assert len(name) == 63
    assert name.startswith(prefix[:58])
    assert not name.startswith(prefix[:59])


async def test_a_status_replace_naming_another_uid_is_409(
    served: tuple[Client, httpx.AsyncClient], tmp_path: Path
) -> None:
    """``PUT .../status`` whose ``metadata.uid`` is another object's: 409, as every other
    write's uid precondition; nothing stored."""
    client, http = served
    document = (await http.post(FILES, json=manifest(tmp_path))).json()
    document["metadata"]["uid"] = "an-older-one"
    document["status"] = {**document["status"], "observedGeneration": 1}
    response = await http.put(f"{FILES}/index/status", json=document)
    status = status_of(response, 409, "Conflict")
    assert "Precondition failed: UID in precondition: an-older-one" in status["message"]
    assert await client.revision() == 1
