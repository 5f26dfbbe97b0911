"""The HTTP API's lists: field selectors, resourceVersion and resourceVersionMatch, pages,
and the 400s (and 422s) bad list parameters get, as the apiserver answers them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from http_helpers import api
from watch_helpers import FILES, manifest

from reconcile.api import Client

EVERY = "/apis/files.reconcile.dev/v1/files"


async def _objects(client: Client, tmp_path: Path) -> None:
    origin = tmp_path / "site.yaml"
    await client.apply(manifest("index", app="site"), origin=origin)
    await client.apply(manifest("about", app="blog"), origin=origin)
    await client.apply(manifest("index", app="site", namespace="other"), origin=origin)


def names(response: httpx.Response) -> list[str]:
    """``namespace/name`` of each item of a list response."""
    assert response.status_code == 200, response.text
    return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in response.json()["items"]]


def status(response: httpx.Response, code: int) -> dict[str, Any]:
    """The Status of a refusal, checked to be one with ``code``."""
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status"
    assert body["code"] == code
    return body


class TestFieldSelectors:
    """metadata.name and metadata.namespace, with =, == and !=."""

    async def test_name_and_namespace_terms(self, tmp_path: Path) -> None:
        """Each operator, and both fields together, across namespaces."""
        async with api(tmp_path) as (client, http):
            await _objects(client, tmp_path)
            by_name = await http.get(EVERY, params={"fieldSelector": "metadata.name=index"})
            double = await http.get(FILES, params={"fieldSelector": "metadata.name==index"})
            not_name = await http.get(EVERY, params={"fieldSelector": "metadata.name!=index"})
            spaced = await http.get(EVERY, params={"fieldSelector": "metadata.namespace=other"})
            both = await http.get(
                EVERY, params={"fieldSelector": "metadata.namespace!=other,metadata.name=index"}
            )
            elsewhere = await http.get(FILES, params={"fieldSelector": "metadata.namespace=other"})
            with_labels = await http.get(
                EVERY, params={"fieldSelector": "metadata.name=index", "labelSelector": "app=site"}
            )
        assert names(by_name) == ["default/index", "other/index"]
        assert names(double) == ["default/index"]
        assert names(not_name) == ["default/about"]
        assert names(spaced) == ["other/index"]
        assert names(both) == ["default/index"]
        assert names(elsewhere) == []  # (the path's namespace and the selector's disagree)
        assert names(with_labels) == ["default/index", "other/index"]

    @pytest.mark.parametrize(
        ("selector", "named"),
        [
            ("spec.path=index.html", "field label not supported: spec.path"),
            ("status.phase!=Ready", "field label not supported: status.phase"),
            ("metadata.name", "can't understand"),
            ("metadata.name=a=b", "unescaped '='"),
        ],
    )
    async def test_unsupported_or_malformed_is_a_400(self, tmp_path: Path, selector: str, named: str) -> None:
        """A field other than name and namespace, or a term that does not parse: 400 naming it."""
        async with api(tmp_path) as (_, http):
            response = await http.get(FILES, params={"fieldSelector": selector})
        body = status(response, 400)
        assert body["reason"] == "BadRequest"
        assert named in body["message"]
        assert body["details"]["causes"][0]["field"] == "fieldSelector"


class TestResourceVersions:
    """What a list's resourceVersion and resourceVersionMatch get from this store."""

    async def test_not_older_than_and_legacy_are_served_at_the_head(self, tmp_path: Path) -> None:
        """NotOlderThan (or no match) an older revision: the current list, at the head."""
        async with api(tmp_path) as (client, http):
            await _objects(client, tmp_path)
            head = await client.revision()
            newer = await http.get(
                FILES, params={"resourceVersion": "1", "resourceVersionMatch": "NotOlderThan"}
            )
            legacy = await http.get(FILES, params={"resourceVersion": "1"})
            anything = await http.get(FILES, params={"resourceVersion": "0"})
        for response in (newer, legacy, anything):
            assert response.json()["metadata"]["resourceVersion"] == str(head)
            assert names(response) == ["default/about", "default/index"]

    async def test_exact_is_served_only_when_nothing_changed_since(self, tmp_path: Path) -> None:
        """Exact at the head, or at an older revision after which the listed namespace did
        not change: served at that revision; after a change there: 410 Expired."""
        async with api(tmp_path) as (client, http):
            await client.apply(manifest("index", namespace="other"), origin=tmp_path / "a.yaml")
            quiet_since = await client.revision()
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            head = await client.revision()
            params = {"resourceVersionMatch": "Exact"}
            at_head = await http.get(FILES, params={**params, "resourceVersion": str(head)})
            other = "/apis/files.reconcile.dev/v1/namespaces/other/files"
            unchanged = await http.get(other, params={**params, "resourceVersion": str(quiet_since)})
            changed = await http.get(FILES, params={**params, "resourceVersion": str(quiet_since)})
            paged = await http.get(FILES, params={"resourceVersion": str(quiet_since), "limit": "10"})
        assert at_head.json()["metadata"]["resourceVersion"] == str(head)
        assert unchanged.json()["metadata"]["resourceVersion"] == str(quiet_since)
        assert names(unchanged) == ["other/index"]
        for response in (changed, paged):  # (a limit without a match is Exact, as in Kubernetes)
            assert status(response, 410)["reason"] == "Expired"

    async def test_a_future_revision_is_a_504_too_large(self, tmp_path: Path) -> None:
        """A revision after the head: Kubernetes' "Too large resource version", Retry-After."""
        async with api(tmp_path) as (client, http):
            await _objects(client, tmp_path)
            listed = await http.get(FILES, params={"resourceVersion": "999"})
            watched = await http.get(FILES, params={"resourceVersion": "999", "watch": "true"})
        for response in (listed, watched):
            body = status(response, 504)
            assert body["reason"] == "Timeout"
            assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
            assert response.headers["retry-after"] == "1"


class TestPages:
    """limit and continue."""

    async def test_pages_follow_each_other(self, tmp_path: Path) -> None:
        """Every object once, in order, across pages of one."""
        async with api(tmp_path) as (client, http):
            await _objects(client, tmp_path)
            seen: list[str] = []
            params = {"limit": "1"}
            for _ in range(5):
                page = await http.get(EVERY, params=params)
                seen += names(page)
                token = page.json()["metadata"].get("continue")
                if not token:
                    break
                params = {"limit": "1", "continue": token}
        assert seen == ["default/about", "default/index", "other/index"]

    @pytest.mark.parametrize("token", ["not-a-token", "W10=", "e30="])
    async def test_a_bad_continue_token_is_a_400(self, tmp_path: Path, token: str) -> None:
        """A token this server did not give out: 400 BadRequest naming continue."""
        async with api(tmp_path) as (_, http):
            response = await http.get(FILES, params={"continue": token})
        body = status(response, 400)
        assert body["details"]["causes"][0]["field"] == "continue"

    @pytest.mark.parametrize("selector", [None, "app=site"])
    async def test_the_largest_limit_is_every_object(self, tmp_path: Path, selector: str | None) -> None:
        """A limit of int64's largest (Kubernetes' own bound) lists every object in one
        page, with or without a selector."""
        async with api(tmp_path) as (client, http):
            await _objects(client, tmp_path)
            params = {"limit": str(2**63 - 1)} | ({} if selector is None else {"labelSelector": selector})
            response = await http.get(EVERY, params=params)
        assert response.status_code == 200, response.text
        assert "continue" not in response.json()["metadata"]
        assert names(response) == (
            ["default/about", "default/index", "other/index"]
            if selector is None
            else ["default/index", "other/index"]
        )

    async def test_continue_with_a_resource_version_is_a_400(self, tmp_path: Path) -> None:
        """As the apiserver: no resourceVersion beside a continue token."""
        async with api(tmp_path) as (client, http):
            await _objects(client, tmp_path)
            token = (await http.get(FILES, params={"limit": "1"})).json()["metadata"]["continue"]
            response = await http.get(FILES, params={"continue": token, "resourceVersion": "3"})
        assert "continue" in status(response, 400)["message"]


class TestBadParameters:
    """Parameters that do not parse: 400 naming them; combinations refused: 422."""

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ({"labelSelector": "app in (site"}, "labelSelector"),
            ({"labelSelector": "=x"}, "labelSelector"),
            ({"limit": "-1"}, "limit"),
            ({"limit": "ten"}, "limit"),
            ({"limit": str(2**63)}, "limit"),
            ({"limit": "9" * 5000}, "limit"),
            ({"resourceVersion": "abc"}, "resourceVersion"),
            ({"resourceVersion": "-3"}, "resourceVersion"),
            ({"timeoutSeconds": "soon"}, "timeoutSeconds"),
            ({"watch": "true", "timeoutSeconds": "1.5"}, "timeoutSeconds"),
            ({"watch": "true", "resourceVersion": "x1"}, "resourceVersion"),
            ({"watch": "true", "fieldSelector": "spec.path=x"}, "fieldSelector"),
            ({"watch": "maybe"}, "watch"),
            ({"watch": "true", "allowWatchBookmarks": "yes"}, "allowWatchBookmarks"),
        ],
    )
    async def test_a_parameter_that_does_not_parse_is_a_400(
        self, tmp_path: Path, params: dict[str, str], field: str
    ) -> None:
        """400 BadRequest, the cause naming the parameter; nothing streamed."""
        async with api(tmp_path) as (_, http):
            response = await http.get(FILES, params=params)
            after = await http.get(FILES)
        body = status(response, 400)
        assert body["reason"] == "BadRequest"
        assert body["details"]["causes"][0]["field"] == field
        assert after.status_code == 200  # the server stays up

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ({"resourceVersionMatch": "Exact"}, "resourceVersionMatch"),
            ({"resourceVersionMatch": "Exact", "resourceVersion": "0"}, "resourceVersionMatch"),
            ({"resourceVersionMatch": "Newest", "resourceVersion": "1"}, "resourceVersionMatch"),
            ({"sendInitialEvents": "true"}, "sendInitialEvents"),
            ({"watch": "true", "resourceVersionMatch": "NotOlderThan"}, "resourceVersionMatch"),
            (
                {"watch": "true", "sendInitialEvents": "true", "allowWatchBookmarks": "true"},
                "resourceVersionMatch",
            ),
            (
                {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"},
                "allowWatchBookmarks",
            ),
        ],
    )
    async def test_a_combination_kubernetes_refuses_is_a_422(
        self, tmp_path: Path, params: dict[str, str], field: str
    ) -> None:
        """ValidateListOptions' refusals: 422 Invalid ListOptions with the field's cause."""
        async with api(tmp_path) as (_, http):
            response = await http.get(FILES, params=params)
        body = status(response, 422)
        assert body["details"]["kind"] == "ListOptions"
        assert field in [c["field"] for c in body["details"]["causes"]]
