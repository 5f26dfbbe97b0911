"""The HTTP API's discovery, OpenAPI and Table documents, checked in-process: what kubectl
and the client libraries read before anything else, and the columns of kubectl get."""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from starlette.requests import Request

from reconcile.api import Client, connect
from reconcile.cli.reading import TableOptions, table_rows
from reconcile.http import create_app, discovery, tables
from reconcile.http.mapping import ResourceMap
from reconcile.http.schemas import type_schema
from reconcile.model import KindRegistry
from reconcile.model.spelling import camel
from reconcile.testing.kinds import GIZMO, GizmoSpec, GizmoV1Alpha1Spec

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_DISCOVERY = (
    f"{AGGREGATED},application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
SITES = "/apis/sites.example.dev/v1/namespaces/default/staticsites"
SITE = {
    "apiVersion": "sites.example.dev/v1",
    "kind": "StaticSite",
    "metadata": {"name": "docs", "labels": {"app": "site"}},
    "spec": {"title": "Docs", "pages": {"index.html": "<h1>Hi</h1>"}, "bucket": "public"},
}


@contextlib.asynccontextmanager
async def served_kinds(tmp_path: Path) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    """The app over the installed kinds and the example operator's StaticSite."""
    from examples.operator.sites import SITE as SITE_KIND  # noqa: PLC0415 - needs the checkout on the path

    kinds = KindRegistry.from_entry_points()
    kinds.register(SITE_KIND)
    async with connect(f"sqlite:///{tmp_path / 'api.db'}", kinds=kinds) as client:
        transport = httpx.ASGITransport(app=create_app(client))
        async with httpx.AsyncClient(transport=transport, base_url="http://reconcile") as http:
            yield client, http


def by_name(entries: list[dict[str, Any]], key: str = "name") -> dict[str, dict[str, Any]]:
    """Entries of a discovery list by their name."""
    return {entry[key]: entry for entry in entries}


class TestDiscovery:
    """/version, /api, /apis and each group and group version."""

    async def test_version_is_a_kubernetes_version_info(self, tmp_path: Path) -> None:
        """Major 1, minor 32 (within kubectl 1.32's skew), a semantic gitVersion naming reconcile."""
        async with served_kinds(tmp_path) as (_, http):
            info = (await http.get("/version")).json()
        assert (info["major"], info["minor"]) == ("1", "32")
        assert info["gitVersion"].startswith("v1.32.0-reconcile.")

    async def test_the_core_group_is_v1_with_nothing_in_it(self, tmp_path: Path) -> None:
        """/api lists v1; /api/v1 is an empty APIResourceList; the aggregated /api has the
        core group's v1 and no resources."""
        async with served_kinds(tmp_path) as (_, http):
            legacy = await http.get("/api", headers={"Accept": "application/json"})
            resources = (await http.get("/api/v1")).json()
            aggregated = await http.get("/api", headers={"Accept": KUBECTL_DISCOVERY})
        assert legacy.json()["kind"] == "APIVersions"
        assert legacy.json()["versions"] == ["v1"]
        assert legacy.headers["content-type"] == "application/json"
        assert resources == {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": "v1",
            "resources": [],
        }
        assert aggregated.headers["content-type"] == AGGREGATED
        [core] = aggregated.json()["items"]
        assert core["versions"] == [{"version": "v1", "resources": [], "freshness": "Current"}]

    async def test_apis_lists_every_group_with_its_preferred_version(self, tmp_path: Path) -> None:
        """The legacy APIGroupList: each group, its versions, the storage one preferred."""
        async with served_kinds(tmp_path) as (_, http):
            groups = (await http.get("/apis")).json()
            group = (await http.get("/apis/files.reconcile.dev")).json()
        assert groups["kind"] == "APIGroupList"
        files = by_name(groups["groups"])["files.reconcile.dev"]
        version = {"groupVersion": "files.reconcile.dev/v1", "version": "v1"}
        assert files == {"name": "files.reconcile.dev", "versions": [version], "preferredVersion": version}
        assert "sites.example.dev" in by_name(groups["groups"])
        assert group == {"kind": "APIGroup", "apiVersion": "v1", **files}

    async def test_a_group_version_lists_its_resources_and_their_status(self, tmp_path: Path) -> None:
        """An APIResourceList: plural, singular, kind, verbs, short names, categories,
        namespaced, and each kind's status subresource."""
        async with served_kinds(tmp_path) as (_, http):
            found = (await http.get("/apis/files.reconcile.dev/v1")).json()
        assert found["groupVersion"] == "files.reconcile.dev/v1"
        resources = by_name(found["resources"])
        assert set(resources) == {"directories", "directories/status", "files", "files/status"}
        directories = resources["directories"]
        assert directories["singularName"] == "directory"
        assert directories["kind"] == "Directory"
        assert directories["namespaced"] is True
        assert directories["shortNames"] == ["dir"]
        assert directories["categories"] == ["all", "reconcile"]
        assert {"get", "list", "watch", "create", "patch", "update", "delete"} <= set(directories["verbs"])
        assert resources["files/status"]["verbs"] == ["get", "patch", "update"]
        assert resources["files/status"]["kind"] == "File"

    async def test_the_aggregated_form_holds_every_resource(self, tmp_path: Path) -> None:
        """kubectl's Accept gets an APIGroupDiscoveryList (v2) with each resource in full."""
        async with served_kinds(tmp_path) as (_, http):
            response = await http.get("/apis", headers={"Accept": KUBECTL_DISCOVERY})
            plain = await http.get("/apis", headers={"Accept": "application/json"})
        assert response.headers["content-type"] == AGGREGATED
        assert response.headers["vary"] == "Accept"
        document = response.json()
        assert (document["kind"], document["apiVersion"]) == (
            "APIGroupDiscoveryList",
            "apidiscovery.k8s.io/v2",
        )
        groups = {item["metadata"]["name"]: item for item in document["items"]}
        [version] = groups["sites.example.dev"]["versions"]
        assert (version["version"], version["freshness"]) == ("v1", "Current")
        [site] = version["resources"]
        assert site["resource"] == "staticsites"
        assert site["singularResource"] == "staticsite"
        assert site["scope"] == "Namespaced"
        assert site["shortNames"] == ["site"]
        assert site["responseKind"] == {"group": "sites.example.dev", "version": "v1", "kind": "StaticSite"}
        assert site["subresources"][0]["subresource"] == "status"
        assert plain.json()["kind"] == "APIGroupList"  # the plain form for a client that asks for it

    @pytest.mark.parametrize(
        "path",
        [
            "/apis/nowhere.dev",
            "/apis/nowhere.dev/v1",
            "/apis/files.reconcile.dev/v9",
            "/openapi/v3/apis/nowhere.dev/v1",
            "/openapi/v3/apis/files.reconcile.dev/v9",
        ],
    )
    async def test_an_unknown_group_or_version_is_a_404_status(self, tmp_path: Path, path: str) -> None:
        """A group or version not served: a NotFound Status naming it."""
        async with served_kinds(tmp_path) as (_, http):
            response = await http.get(path)
        assert response.status_code == 404
        status = response.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
        assert ("nowhere.dev" in status["message"]) or ("v9" in status["message"])


class TestOpenApi:
    """/openapi/v3: the index and each group version's document."""

    async def test_the_index_names_each_group_version_with_a_hash(self, tmp_path: Path) -> None:
        """Each served group version, its URL carrying the document's hash."""
        async with served_kinds(tmp_path) as (_, http):
            index = (await http.get("/openapi/v3")).json()
            url = index["paths"]["apis/files.reconcile.dev/v1"]["serverRelativeURL"]
            again = (await http.get("/openapi/v3")).json()
        assert url.startswith("/openapi/v3/apis/files.reconcile.dev/v1?hash=")
        assert "apis/sites.example.dev/v1" in index["paths"]
        assert again == index  # built once, the same hash

    async def test_a_kinds_schema_carries_its_field_docs(self, tmp_path: Path) -> None:
        """The File schema: its GVK, the spec's fields typed and described from the
        attrs class, the required ones, the allowed values, the status's conditions."""
        async with served_kinds(tmp_path) as (_, http):
            document = (await http.get("/openapi/v3/apis/files.reconcile.dev/v1")).json()
        schema = document["components"]["schemas"]["dev.reconcile.files.v1.File"]
        assert schema["x-kubernetes-group-version-kind"] == [
            {"group": "files.reconcile.dev", "version": "v1", "kind": "File"}
        ]
        assert schema["description"].startswith("A regular file")
        spec = schema["properties"]["spec"]
        assert spec["properties"]["content"] == {
            "type": "string",
            "nullable": True,
            "description": "The file's text (UTF-8).",
        }
        assert spec["required"] == ["path"]
        assert spec["properties"]["ensure"]["enum"] == ["present", "absent"]
        assert spec["properties"]["mode"]["default"] == "0644"
        assert spec["properties"]["sensitive"]["type"] == "boolean"
        conditions = schema["properties"]["status"]["properties"]["conditions"]
        assert conditions["type"] == "array"
        assert conditions["items"]["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
        assert "dev.reconcile.files.v1.FileList" in document["components"]["schemas"]
        assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in document["components"]["schemas"]

    async def test_the_patch_operation_says_what_the_server_takes(self, tmp_path: Path) -> None:
        """kubectl looks for fieldValidation among the PATCH parameters of the kind's path,
        and for a strategic merge patch among the bodies it takes."""
        async with served_kinds(tmp_path) as (_, http):
            document = (await http.get("/openapi/v3/apis/files.reconcile.dev/v1")).json()
        patch = document["paths"]["/apis/files.reconcile.dev/v1/namespaces/{namespace}/files/{name}"]["patch"]
        assert patch["x-kubernetes-group-version-kind"] == {
            "group": "files.reconcile.dev",
            "version": "v1",
            "kind": "File",
        }
        assert {"fieldValidation", "dryRun", "fieldManager", "force"} <= {
            p["name"] for p in patch["parameters"]
        }
        # no strategic merge patch: kubectl apply then sends a JSON merge patch, as to a CRD
        assert set(patch["requestBody"]["content"]) == {
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/apply-patch+yaml",
        }

    def test_annotations_map_to_openapi_types(self) -> None:
        """Scalars, optionals, sequences, mappings; what cannot be read keeps any field."""
        assert type_schema(int) == {"type": "integer", "format": "int64"}
        assert type_schema(tuple[str, ...]) == {"type": "array", "items": {"type": "string"}}
        assert type_schema(dict[str, int]) == {
            "type": "object",
            "additionalProperties": {"type": "integer", "format": "int64"},
        }
        assert type_schema(float | None) == {"type": "number", "format": "double", "nullable": True}
        assert type_schema(Any)["x-kubernetes-preserve-unknown-fields"] is True


class TestTables:
    """Accept: ...;as=Table;v=v1;g=meta.k8s.io: kubectl get's columns."""

    async def test_a_list_as_a_table_has_reconcile_gets_columns_and_cells(self, tmp_path: Path) -> None:
        """Name, the printer columns, Ready, Synced, Reason, Age, then the wide ones at
        priority 1; the cells are those reconcile get -o wide prints."""
        async with served_kinds(tmp_path) as (client, http):
            await client.apply(SITE)
            response = await http.get(SITES, headers={"Accept": TABLE})
            objects = (await client.list("StaticSite")).items
            header, rows = table_rows(
                client, objects, namespaces=False, kinds=False, options=TableOptions(wide=True)
            )
        assert response.status_code == 200
        table = response.json()
        assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        columns = table["columnDefinitions"]
        assert [c["name"].upper() for c in columns] == header
        priorities = {c["name"]: c["priority"] for c in columns}
        assert priorities["Bucket"] == priorities["Generation"] == priorities["Message"] == 1
        assert priorities["Title"] == priorities["Ready"] == priorities["Age"] == 0
        assert columns[0]["format"] == "name"
        assert by_name(columns)["Pages"]["type"] == "integer"
        [row] = table["rows"]
        assert [str(cell) for cell in row["cells"]] == rows[0]
        assert row["object"]["kind"] == "PartialObjectMetadata"
        assert row["object"]["metadata"]["labels"] == {"app": "site"}
        assert table["metadata"]["resourceVersion"]

    async def test_one_object_as_a_table_is_one_row(self, tmp_path: Path) -> None:
        """GET of one object with the Table Accept: a Table of its row."""
        async with served_kinds(tmp_path) as (client, http):
            await client.apply(SITE)
            response = await http.get(f"{SITES}/docs", headers={"Accept": TABLE})
        [row] = response.json()["rows"]
        assert row["cells"][:3] == ["docs", "Docs", 0]

    async def test_include_object_chooses_the_rows_object(self, tmp_path: Path) -> None:
        """includeObject=Object: the whole document; None: no object."""
        async with served_kinds(tmp_path) as (client, http):
            await client.apply(SITE)
            whole = await http.get(SITES, params={"includeObject": "Object"}, headers={"Accept": TABLE})
            none = await http.get(SITES, params={"includeObject": "None"}, headers={"Accept": TABLE})
        assert whole.json()["rows"][0]["object"]["spec"]["title"] == "Docs"
        assert "object" not in none.json()["rows"][0]

    async def test_a_bad_include_object_is_a_400_naming_it(self, tmp_path: Path) -> None:
        """An includeObject that is none of None, Metadata, Object: a BadRequest Status."""
        async with served_kinds(tmp_path) as (client, http):
            await client.apply(SITE)
            response = await http.get(SITES, params={"includeObject": "All"}, headers={"Accept": TABLE})
            after = await http.get(SITES)
        assert response.status_code == 400
        assert response.json()["reason"] == "BadRequest"
        assert "includeObject" in response.json()["message"]
        assert after.status_code == 200  # the server stays up

    async def test_without_the_table_accept_a_list_is_documents(self, tmp_path: Path) -> None:
        """Plain application/json: the {Kind}List, as before."""
        async with served_kinds(tmp_path) as (client, http):
            await client.apply(SITE)
            listed = (await http.get(SITES, headers={"Accept": "application/json"})).json()
        assert listed["kind"] == "StaticSiteList"

    async def test_ages_and_readiness_come_from_the_document(self, tmp_path: Path) -> None:
        """Age from creationTimestamp at the client's clock; Ready Unknown before any reconcile."""
        now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).timestamp()
        clock = [now]
        kinds = KindRegistry.from_entry_points()
        async with connect(f"sqlite:///{tmp_path / 'api.db'}", kinds=kinds, clock=lambda: clock[0]) as client:
            await client.apply(
                {
                    "apiVersion": "files.reconcile.dev/v1",
                    "kind": "File",
                    "metadata": {"name": "index"},
                    "spec": {"path": "index.html", "content": "hi\n"},
                },
                origin=tmp_path / "site.yaml",
            )
            clock[0] = now + 300
            transport = httpx.ASGITransport(app=create_app(client))
            async with httpx.AsyncClient(transport=transport, base_url="http://reconcile") as http:
                table = (
                    await http.get("/apis/files.reconcile.dev/v1/files", headers={"Accept": TABLE})
                ).json()
        assert [c["name"] for c in table["columnDefinitions"][:5]] == [
            "Name",
            "Ready",
            "Synced",
            "Reason",
            "Age",
        ]
        assert table["rows"][0]["cells"][:5] == ["index", "Unknown", "Unknown", "", "5m"]


class TestVersions:
    """A kind served in several versions, and the two forms of discovery agreeing."""

    @staticmethod
    @contextlib.asynccontextmanager
    async def gizmos(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
        """The app over Gizmo, served as v1 (storage) and v1alpha1."""
        async with connect(f"sqlite:///{tmp_path / 'api.db'}", kinds=KindRegistry([GIZMO])) as client:
            transport = httpx.ASGITransport(app=create_app(client))
            async with httpx.AsyncClient(transport=transport, base_url="http://reconcile") as http:
                yield http

    async def test_each_served_version_is_listed_the_storage_one_preferred(self, tmp_path: Path) -> None:
        """Both versions in the group, v1 preferred and first; each lists the kind."""
        async with self.gizmos(tmp_path) as http:
            group = (await http.get("/apis/example.reconcile.dev")).json()
            spoke = (await http.get("/apis/example.reconcile.dev/v1alpha1")).json()
            aggregated = (await http.get("/apis", headers={"Accept": AGGREGATED})).json()
        assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha1"]
        assert group["preferredVersion"]["version"] == "v1"
        assert by_name(spoke["resources"])["gizmos"]["shortNames"] == ["gz"]
        [item] = [i for i in aggregated["items"] if i["metadata"]["name"] == "example.reconcile.dev"]
        assert [v["version"] for v in item["versions"]] == ["v1", "v1alpha1"]

    async def test_a_spoke_versions_schema_is_its_own_spec_class(self, tmp_path: Path) -> None:
        """v1alpha1's document describes v1alpha1's spec (its own fields), under its GVK."""
        async with self.gizmos(tmp_path) as http:
            storage = (await http.get("/openapi/v3/apis/example.reconcile.dev/v1")).json()
            spoke = (await http.get("/openapi/v3/apis/example.reconcile.dev/v1alpha1")).json()
        v1 = storage["components"]["schemas"]["dev.reconcile.example.v1.Gizmo"]
        alpha = spoke["components"]["schemas"]["dev.reconcile.example.v1alpha1.Gizmo"]
        assert alpha["x-kubernetes-group-version-kind"][0]["version"] == "v1alpha1"
        assert set(v1["properties"]["spec"]["properties"]) == {camel(f.name) for f in attrs.fields(GizmoSpec)}
        assert set(alpha["properties"]["spec"]["properties"]) == {
            camel(f.name) for f in attrs.fields(GizmoV1Alpha1Spec)
        }

    async def test_the_aggregated_and_legacy_forms_agree(self, tmp_path: Path) -> None:
        """Every group version's resources, read from either form, are the same."""
        async with served_kinds(tmp_path) as (_, http):
            aggregated = (await http.get("/apis", headers={"Accept": AGGREGATED})).json()
            legacy: dict[str, Any] = {}
            for item in aggregated["items"]:
                for version in item["versions"]:
                    group_version = f"{item['metadata']['name']}/{version['version']}"
                    legacy[group_version] = (await http.get(f"/apis/{group_version}")).json()["resources"]
        for item in aggregated["items"]:
            for version in item["versions"]:
                flattened = []
                for r in version["resources"]:
                    kind = r["responseKind"]["kind"]
                    flattened.append(
                        {
                            "name": r["resource"],
                            "singularName": r["singularResource"],
                            "namespaced": r["scope"] == "Namespaced",
                            "kind": kind,
                            "verbs": r["verbs"],
                            "shortNames": r["shortNames"],
                            "categories": r["categories"],
                        }
                    )
                    flattened += [
                        {
                            "name": f"{r['resource']}/{s['subresource']}",
                            "singularName": "",
                            "namespaced": True,
                            "kind": s["responseKind"]["kind"],
                            "verbs": s["verbs"],
                        }
                        for s in r["subresources"]
                    ]
                assert flattened == legacy[f"{item['metadata']['name']}/{version['version']}"]


def test_a_table_without_headers_has_no_column_definitions() -> None:
    """headers=False (a watch's later events): the rows, no columnDefinitions."""
    [resource] = ResourceMap(KindRegistry([GIZMO])).in_version("example.reconcile.dev", "v1")
    request = Request({"type": "http", "query_string": b"", "headers": []})
    document = {"metadata": {"name": "g", "generation": 1}, "spec": {"size": 1}}
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    first = tables.table(request, resource, [document], now=now, resource_version="3")
    later = tables.table(request, resource, [document], now=now, resource_version="3", headers=False)
    assert first["columnDefinitions"]
    assert later["columnDefinitions"] == []
    assert later["rows"] == first["rows"]


async def test_a_resource_served_beside_the_kinds_is_discovered(tmp_path: Path) -> None:
    """serve_in_discovery: a cluster-scoped resource of another group in both forms."""
    async with connect(f"sqlite:///{tmp_path / 'api.db'}", kinds=KindRegistry([GIZMO])) as client:
        app = create_app(client)
        review = discovery.ServedResource(
            "reviews.example.dev", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview"
        )
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://r") as http:
            before = (await http.get("/apis")).json()
            discovery.serve_in_discovery(app.state.reconcile, review)
            groups = (await http.get("/apis")).json()
            listed = (await http.get("/apis/reviews.example.dev/v1")).json()
            aggregated = (await http.get("/apis", headers={"Accept": AGGREGATED})).json()
    assert "reviews.example.dev" not in by_name(before["groups"])
    assert by_name(groups["groups"])["reviews.example.dev"]["preferredVersion"]["version"] == "v1"
    [entry] = listed["resources"]
    assert (entry["name"], entry["namespaced"], entry["verbs"]) == (
        "selfsubjectaccessreviews",
        False,
        ["create"],
    )
    found = {item["metadata"]["name"]: item for item in aggregated["items"]}["reviews.example.dev"]
    assert found["versions"][0]["resources"][0]["scope"] == "Cluster"
