"""A security review of the HTTP API, from an attacker's side: each test is a way in that
was open (or a limit that could be slipped past), shut."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import orjson
from http_helpers import api
from starlette.middleware import Middleware

from reconcile.http.authn import Authenticating, Authenticator
from reconcile.http.rbac import load_rbac
from reconcile.http.tokens import hash_token, load_tokens

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"
ADMIN = secrets.token_urlsafe(32)  # group ops: everything
PATCHER = secrets.token_urlsafe(32)  # may get and patch files in default, not create them

RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: admin}
rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ops-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: Group, name: ops}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: patcher, namespace: default}
rules:
  - {apiGroups: [files.reconcile.dev], resources: [files], verbs: [get, list, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: patcher, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: patcher}
subjects: [{kind: User, name: patcher}]
"""


def secured(tmp_path: Path, *, anonymous: bool = False) -> dict[str, Any]:
    """create_app's options: the tokens above, the RBAC rules above."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f'{hash_token(ADMIN)},admin,1,"ops"\n{hash_token(PATCHER)},patcher,2\n')
    rules = tmp_path / "rbac.yaml"
    rules.write_text(RBAC)
    authenticator = Authenticator(load_tokens(tokens), anonymous=anonymous)
    return {
        "authorizer": load_rbac(rules),
        "middleware": [Middleware(Authenticating, authenticator=authenticator)],
    }


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


def manifest(name: str, root: Path) -> dict[str, Any]:
    """A File manifest confined to ``root``."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": f"{name}.html", "root": str(root), "content": "hello\n"},
    }


def json_bytes(document: dict[str, Any]) -> bytes:
    """``document`` as JSON."""
    return orjson.dumps(document)


APPLY = {"Content-Type": "application/apply-patch+yaml"}


class TestCreateOnApply:
    """A server-side apply that creates its object is a create, as Kubernetes authorizes it."""

    async def test_an_apply_creating_an_object_needs_create(self, tmp_path: Path) -> None:
        """patcher may patch files but not create them: an apply of a new one is 403 and
        stores nothing (with and without dryRun); an apply of an existing one is allowed."""
        async with api(tmp_path, **secured(tmp_path)) as (client, http):
            params = {"fieldManager": "me"}
            url = f"{FILES}/fresh"
            before = await client.store.revision()
            created = await http.patch(
                url, json=manifest("fresh", tmp_path), params=params, headers=bearer(PATCHER) | APPLY
            )
            rehearsed = await http.patch(
                url,
                json=manifest("fresh", tmp_path),
                params=params | {"dryRun": "All"},
                headers=bearer(PATCHER) | APPLY,
            )
            after = await client.store.revision()
            made = await http.post(FILES, json=manifest("fresh", tmp_path), headers=bearer(ADMIN))
            changed = manifest("fresh", tmp_path)
            changed["spec"]["content"] = "changed\n"
            applied = await http.patch(
                url, json=changed, params=params | {"force": "true"}, headers=bearer(PATCHER) | APPLY
            )
        assert (created.status_code, rehearsed.status_code) == (403, 403), created.text
        assert 'cannot create resource "files"' in created.json()["message"]
        assert before == after
        assert made.status_code == 201
        assert applied.status_code == 200, applied.text


class TestBrowsers:
    """A web page must not reach the API through what its browser sends on its own."""

    async def test_an_unsecured_server_answers_loopback_host_names_only(self, tmp_path: Path) -> None:
        """No tokens, no client CA (system:masters for all): a request whose Host is a name
        an attacker's DNS points at 127.0.0.1 (rebinding) is 403; loopback names are served."""
        middleware = [Middleware(Authenticating, authenticator=Authenticator())]
        async with api(tmp_path, middleware=middleware) as (client, http):
            rebound = await http.post(
                FILES, json=manifest("evil", tmp_path), headers={"Host": "attacker.example:6443"}
            )
            listed = await http.get(FILES, headers={"Host": "attacker.example"})
            served = [
                (await http.get(FILES, headers={"Host": host})).status_code
                for host in ("127.0.0.1:6443", "[::1]:6443", "localhost:6443", "localhost", "127.0.0.2")
            ]
            stored = await client.store.revision()
        assert (rebound.status_code, listed.status_code) == (403, 403)
        assert rebound.json()["reason"] == "Forbidden"
        assert "loopback" in rebound.json()["message"]
        assert served == [200] * 5
        assert stored == 0

    async def test_a_cross_origin_write_is_refused(self, tmp_path: Path) -> None:
        """A page's POST with no Content-Type (a fetch of a Blob: a request no preflight
        guards) carries an Origin: 403 and nothing stored, on an unsecured server and with
        a token alike; a same-origin request and one without an Origin are served."""
        unsecured = [Middleware(Authenticating, authenticator=Authenticator())]
        body = json_bytes(manifest("csrf", tmp_path))
        loopback = {"Host": "127.0.0.1:6443"}
        async with api(tmp_path, middleware=unsecured) as (client, http):
            forged = await http.post(
                FILES, content=body, headers=loopback | {"Origin": "https://attacker.example"}
            )
            null = await http.post(FILES, content=body, headers=loopback | {"Origin": "null"})
            stored = await client.store.revision()
            same = await http.post(
                FILES, content=body, headers=loopback | {"Origin": "http://127.0.0.1:6443"}
            )
        assert (forged.status_code, null.status_code) == (403, 403)
        assert "cross-origin" in forged.json()["message"]
        assert stored == 0
        assert same.status_code == 201, same.text
        (tmp_path / "t").mkdir()
        async with api(tmp_path / "t", **secured(tmp_path)) as (client, http):
            forged = await http.post(
                FILES, content=body, headers=bearer(ADMIN) | {"Origin": "https://attacker.example"}
            )
            plain = await http.post(FILES, content=body, headers=bearer(ADMIN))
        assert forged.status_code == 403
        assert plain.status_code == 201, plain.text
