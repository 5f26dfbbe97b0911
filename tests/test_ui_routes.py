"""The web view's server side, without a browser: the page and its assets (shipped in the
package, nothing from the internet), the helpers it asks (kinds, access), the history's
documents per revision, and the guard against cross-site request forgery."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from http_helpers import api
from starlette.applications import Starlette
from starlette.routing import Mount

from reconcile.api import connect
from reconcile.http import create_app
from reconcile.http.context import Attributes, User
from reconcile.http.ui.public import is_public_asset
from reconcile.http.ui.routes import ASSETS
from reconcile.model import KindRegistry

MANIFEST = {
    "apiVersion": "files.reconcile.dev/v1",
    "kind": "File",
    "metadata": {"name": "index", "labels": {"app": "site"}},
    "spec": {"path": "index.html", "content": "hello\n"},
}
FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"
PAUSE = {"metadata": {"annotations": {"reconcile.dev/paused": "true"}}}
MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_the_page_and_every_asset_it_names_are_served(tmp_path: Path) -> None:
    """``/ui`` leads to ``/ui/``, an HTML page under a strict Content-Security-Policy whose
    stylesheet and script modules are served with their types."""
    async with api(tmp_path) as (_, http):
        redirect = await http.get("/ui")
        page = await http.get("/ui/")
        assert redirect.status_code == 308
        assert redirect.headers["location"] == "/ui/"
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert '<meta name="reconcile-root" content="">' in page.text
        named = re.findall(r'(?:href|src)="(static/[^"]+)"', page.text)
        assert named == ["static/app.css", "static/main.js"]
        modules = {path.name for path in ASSETS.glob("*.js")}
        for name in ["app.css", *sorted(modules)]:
            asset = await http.get(f"/ui/static/{name}")
            assert asset.status_code == 200, name
            expected = "text/css" if name.endswith(".css") else "javascript"
            assert expected in asset.headers["content-type"], name
        missing = await http.get("/ui/static/nothing.js")
        assert missing.status_code == 404


def test_no_asset_names_anything_on_the_internet() -> None:
    """Every import is a relative module of the package; no URL outside the page's origin."""
    for path in ASSETS.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), path.name
        for module in re.findall(r'from "([^"]+)"', text):
            assert module.startswith("./"), (path.name, module)
            assert (ASSETS / module.removeprefix("./")).is_file(), (path.name, module)


async def test_the_view_knows_where_a_host_mounted_the_app(tmp_path: Path) -> None:
    """Mounted at ``/k8s``, the page's API root is ``/k8s`` and ``/k8s/ui`` leads to it."""
    async with connect(f"sqlite:///{tmp_path / 'api.db'}") as client:
        host = Starlette(routes=[Mount("/k8s", create_app(client))])
        transport = httpx.ASGITransport(app=host)
        async with httpx.AsyncClient(transport=transport, base_url="http://host") as http:
            page = await http.get("/k8s/ui/")
            redirect = await http.get("/k8s/ui")
            kinds = await http.get("/k8s/ui/api/kinds")
    assert '<meta name="reconcile-root" content="/k8s">' in page.text
    assert redirect.headers["location"] == "/k8s/ui/"
    assert kinds.status_code == 200


async def test_kinds_name_their_resources_and_printer_columns(tmp_path: Path) -> None:
    """Each kind's group, version, plural and the columns' JSON paths (the page fills the
    cells of the documents the watch brings)."""
    from examples.operator.sites import SITE  # noqa: PLC0415 - needs the checkout on the path

    kinds = KindRegistry.from_entry_points()
    kinds.register(SITE)
    async with connect(f"sqlite:///{tmp_path / 'api.db'}", kinds=kinds) as client:
        transport = httpx.ASGITransport(app=create_app(client))
        async with httpx.AsyncClient(transport=transport, base_url="http://reconcile") as http:
            listed = (await http.get("/ui/api/kinds")).json()["kinds"]
    file = next(k for k in listed if k["kind"] == "File")
    assert (file["group"], file["version"], file["plural"]) == ("files.reconcile.dev", "v1", "files")
    site = next(k for k in listed if k["kind"] == "StaticSite")
    assert site["columns"]
    assert {c["name"]: c["jsonPath"] for c in site["columns"]}["Title"] == ".spec.title"


class ReadersOnly:
    """Reads for everybody, changes for ``editor`` alone."""

    def allowed(self, user: User, attributes: Attributes) -> bool:
        """Get, list and watch; anything for the editor."""
        return attributes.verb in {"get", "list", "watch"} or user.name == "editor"


async def test_access_says_which_actions_the_user_may_take(tmp_path: Path) -> None:
    """The same authorizer as the API's: a reader may neither patch nor delete."""
    async with api(tmp_path, authorizer=ReadersOnly()) as (_, http):
        query = {"group": "files.reconcile.dev", "plural": "files", "namespace": "default", "name": "index"}
        answer = (await http.get("/ui/api/access", params=query)).json()
        alone = (await http.get("/ui/api/access")).json()
    assert answer["user"]["name"] == "system:anonymous"
    assert answer["allowed"] == {"patch": False, "delete": False}
    assert alone["allowed"] == {}


async def test_the_history_holds_each_revisions_document_when_asked(tmp_path: Path) -> None:
    """``includeObject=Object``: each change's item holds the document after it; without
    it, the items are as before."""
    async with api(tmp_path) as (client, http):
        await client.apply(MANIFEST, origin=tmp_path / "site.yaml")
        changed = {**MANIFEST, "spec": {**MANIFEST["spec"], "content": "changed\n"}}
        await client.apply(changed, origin=tmp_path / "site.yaml")
        plain = (await http.get(f"{FILES}/index/history")).json()
        full = (await http.get(f"{FILES}/index/history", params={"includeObject": "Object"})).json()
    assert all("object" not in item for item in plain["items"])
    first, second = full["items"]
    assert first["object"]["spec"]["content"] == "hello\n"
    assert second["object"]["spec"]["content"] == "changed\n"
    assert second["object"]["metadata"]["resourceVersion"] == str(second["revision"])
    assert [c["path"] for c in second["changes"]] == ["metadata.generation", "spec.content"]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"Origin": "http://evil.example", "X-Requested-With": "reconcile-ui"}, "another origin"),
        ({"Sec-Fetch-Site": "cross-site", "X-Requested-With": "reconcile-ui"}, "cross-site"),
        ({"Origin": "http://reconcile"}, "x-requested-with"),
        ({"Origin": "null", "X-Requested-With": "reconcile-ui"}, "another origin"),
    ],
)
async def test_a_forged_change_is_refused_and_nothing_changes(
    tmp_path: Path, headers: dict[str, str], reason: str
) -> None:
    """A browser's PATCH from another site, or without the header a form cannot send: a
    403 Status naming why; the object is as it was."""
    async with api(tmp_path) as (client, http):
        await client.apply(MANIFEST, origin=tmp_path / "site.yaml")
        response = await http.patch(f"{FILES}/index", json=PAUSE, headers={**MERGE, **headers})
        stored = await client.get("File", "index")
    assert response.status_code == 403
    status = response.json()
    assert status["kind"] == "Status"
    assert status["reason"] == "Forbidden"
    assert reason in status["message"].lower()
    assert "reconcile.dev/paused" not in stored.metadata.annotations


@pytest.mark.parametrize(
    "headers",
    [
        {},  # kubectl, the client libraries: no Origin
        {"Origin": "http://reconcile", "X-Requested-With": "reconcile-ui", "Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://reconcile:80", "Authorization": "Bearer not-checked-here"},
    ],
)
async def test_the_pages_own_changes_and_other_clients_pass(tmp_path: Path, headers: dict[str, str]) -> None:
    """Same origin with the page's header (or a bearer token), or no browser at all."""
    async with api(tmp_path) as (client, http):
        await client.apply(MANIFEST, origin=tmp_path / "site.yaml")
        response = await http.patch(f"{FILES}/index", json=PAUSE, headers={**MERGE, **headers})
        stored = await client.get("File", "index")
    assert response.status_code == 200, response.text
    assert stored.metadata.annotations["reconcile.dev/paused"] == "true"


@pytest.mark.parametrize(
    ("method", "path", "root", "public"),
    [
        ("GET", "/ui/", "", True),
        ("GET", "/ui", "", True),
        ("HEAD", "/ui/static/main.js", "", True),
        ("GET", "/k8s/ui/static/app.css", "/k8s", True),
        ("POST", "/ui/", "", False),
        ("GET", "/ui/api/kinds", "", False),
        ("GET", "/ui/api/access", "", False),
        ("GET", "/ui/static/../api/kinds", "", False),
        ("GET", "/apis/files.reconcile.dev/v1/files", "", False),
        ("GET", "/health", "", False),
    ],
)
def test_only_the_pages_assets_are_public(method: str, path: str, root: str, *, public: bool) -> None:
    """Authentication lets the page and its assets through without credentials; the
    helpers that answer with data, and the API, need them."""
    scope = {"type": "http", "method": method, "path": path, "root_path": root, "headers": []}
    assert is_public_asset(scope) is public
