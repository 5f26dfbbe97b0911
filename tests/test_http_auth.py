"""Authentication and authorization of the HTTP API: hashed bearer tokens, client
certificates, anonymous access, RBAC rules, the self-reviews kubectl asks, TLS, and
secrets kept out of logs, errors and the store."""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from http_helpers import CHECKOUT, api, kubeconfig, kubectl, reconcile_command, served
from kubernetes.client.exceptions import ApiException
from starlette.middleware import Middleware
from tls_helpers import make_certificates, tls_args

from reconcile.api import connect
from reconcile.http.authn import PEER_CERTIFICATE_SCOPE_KEY, Authenticating, Authenticator, certificate_user
from reconcile.http.configfiles import ConfigError
from reconcile.http.context import ANONYMOUS, Attributes, User
from reconcile.http.rbac import AllowAuthenticated, load_rbac
from reconcile.http.serving import _security
from reconcile.http.tokens import hash_token, load_tokens

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"
MANIFEST = {
    "apiVersion": "files.reconcile.dev/v1",
    "kind": "File",
    "metadata": {"name": "index"},
    "spec": {"path": "index.html", "content": "hello\n"},
}
ALICE = secrets.token_urlsafe(32)  # may do everything (group ops)
BOB = secrets.token_urlsafe(32)  # may read files in default, and write the one named "index"
EVE = secrets.token_urlsafe(32)  # in no binding

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
metadata: {name: reader, namespace: default}
rules:
  - {apiGroups: [files.reconcile.dev], resources: [files], verbs: [get, list, watch]}
  - {apiGroups: [files.reconcile.dev], resources: [files, files/status], verbs: [create, update, patch],
     resourceNames: [index]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-reads, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: User, name: bob}]
"""


def write_tokens(tmp_path: Path, anonymous_rules: bool = False) -> tuple[Path, Path]:
    """A tokens file (CSV, hashed) and the RBAC file above."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(
        "# hash,user,uid,groups\n"
        f'{hash_token(ALICE)},alice,1001,"ops,dev"\n'
        f"{hash_token(BOB)},bob,1002\n"
        f"{hash_token(EVE)},eve,1003,\n"
    )
    rbac = tmp_path / "rbac.yaml"
    extra = ""
    if anonymous_rules:
        extra = """\
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: strangers-read}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: Group, name: system:unauthenticated}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: discoverer}
rules:
  - {nonResourceURLs: ["/api", "/api/*", "/apis", "/apis/*", "/openapi/*"], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: strangers-discover}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: discoverer}
subjects: [{kind: Group, name: system:unauthenticated}]
"""
    rbac.write_text(RBAC + extra)
    return tokens, rbac


def manifest(name: str, root: Path) -> dict[str, Any]:
    """A File manifest confined to ``root``."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": f"{name}.html", "root": str(root), "content": "hello\n"},
    }


def app_options(tmp_path: Path, *, anonymous: bool = False, rbac: bool = True) -> dict[str, Any]:
    """create_app's options for a server with the tokens above."""
    tokens, rules = write_tokens(tmp_path)
    authenticator = Authenticator(load_tokens(tokens), anonymous=anonymous)
    return {
        "authorizer": load_rbac(rules) if rbac else AllowAuthenticated(),
        "middleware": [Middleware(Authenticating, authenticator=authenticator)],
    }


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


def handshake(url: str, ca: str, ciphers: str | None) -> tuple[str, str, int]:
    """The suite a TLS 1.2 client (offering ``ciphers``, else its defaults) and the server
    at ``url`` agree on: (name, protocol, bits)."""
    host, _, port = url.removeprefix("https://").partition(":")
    context = ssl.create_default_context(cafile=ca)
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
    if ciphers is not None:
        context.set_ciphers(ciphers)
    with (
        socket.create_connection((host, int(port.rstrip("/"))), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        suite = tls.cipher()
    assert suite is not None
    return suite


class TestAuthentication:
    """Who a request is from."""

    async def test_no_credentials_and_a_bad_token_are_401_statuses(self, tmp_path: Path) -> None:
        """No token, an unknown token, a Basic header: 401 Unauthorized Status objects."""
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            answers = [
                await http.get(FILES),
                await http.get(FILES, headers=bearer("not-a-token")),
                await http.get(FILES, headers={"Authorization": "Basic YWxpY2U6c2VjcmV0"}),
                await http.get(FILES, headers={"Authorization": "Bearer "}),
            ]
        for response in answers:
            assert response.status_code == 401
            assert response.json() | {"metadata": {}} == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            }

    async def test_the_probes_answer_without_credentials(self, tmp_path: Path) -> None:
        """/livez, /readyz, /healthz without a token: answered; a wrong token there: 401;
        /health (which says more): 401."""
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            probes = [await http.get(path) for path in ("/livez", "/readyz", "/healthz", "/readyz?verbose")]
            wrong = await http.get("/livez", headers=bearer("wrong"))
            document = await http.get("/health")
            lookalike = await http.get("/livezz")
        assert [p.status_code for p in probes] == [200, 200, 200, 200]
        assert probes[0].text.strip() == "ok"
        assert (wrong.status_code, document.status_code, lookalike.status_code) == (401, 401, 401)

    async def test_a_good_token_is_its_user(self, tmp_path: Path) -> None:
        """alice's token reads; whoami says alice, her groups and system:authenticated."""
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            listed = await http.get(FILES, headers=bearer(ALICE))
            whoami = await http.post(
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                headers=bearer(ALICE),
            )
        assert listed.status_code == 200
        assert whoami.status_code == 201
        assert whoami.json()["status"]["userInfo"] == {
            "username": "alice",
            "groups": ["ops", "dev", "system:authenticated"],
        }

    async def test_anonymous_only_when_enabled(self, tmp_path: Path) -> None:
        """Without --anonymous: 401; with it: system:anonymous, whom no rule allows (403)."""
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            closed = await http.get(FILES)
        async with api(tmp_path, **app_options(tmp_path, anonymous=True)) as (_, http):
            opened = await http.get(FILES)
            bad_token = await http.get(FILES, headers=bearer("nope"))
        assert closed.status_code == 401
        assert opened.status_code == 403
        assert 'User "system:anonymous" cannot list resource "files"' in opened.json()["message"]
        assert bad_token.status_code == 401  # a wrong credential is not anonymous

    async def test_without_rules_the_authenticated_may_everything_and_the_anonymous_nothing(
        self, tmp_path: Path
    ) -> None:
        """No authorization config: eve (in no binding) reads; the anonymous user is refused."""
        async with api(tmp_path, **app_options(tmp_path, anonymous=True, rbac=False)) as (_, http):
            eve = await http.get(FILES, headers=bearer(EVE))
            anonymous = await http.get(FILES)
        assert eve.status_code == 200
        assert anonymous.status_code == 403

    async def test_a_websocket_without_credentials_is_closed_unaccepted(self, tmp_path: Path) -> None:
        """No websocket slips past authentication: closed with 1008 before the app sees it."""
        tokens, _ = write_tokens(tmp_path)
        reached: list[Any] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            reached.append(scope)

        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "websocket.connect"}

        middleware = Authenticating(app, Authenticator(load_tokens(tokens)))
        await middleware({"type": "websocket", "path": "/x", "headers": []}, receive, send)
        await middleware(
            {"type": "websocket", "path": "/x", "headers": [(b"authorization", f"Bearer {BOB}".encode())]},
            receive,
            send,
        )
        assert sent == [{"type": "websocket.close", "code": 1008}]
        assert len(reached) == 1

    def test_a_client_certificate_names_user_and_groups(self) -> None:
        """CN is the user, each O a group; no CN: no user."""
        certificate = {
            "subject": (
                (("organizationName", "ops"),),
                (("organizationName", "dev"),),
                (("commonName", "carol"),),
            )
        }
        assert certificate_user(certificate) == User("carol", ("ops", "dev", "system:authenticated"))
        assert certificate_user({"subject": ((("organizationName", "ops"),),)}) is None
        authenticator = Authenticator(client_certificates=True)
        scope = {"type": "http", "headers": [], PEER_CERTIFICATE_SCOPE_KEY: certificate}
        assert authenticator.authenticate(scope).name == "carol"

    async def test_tokens_never_reach_logs_or_errors(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Good and bad tokens, at DEBUG: neither appears in a log record or a response."""
        caplog.set_level(logging.DEBUG)
        wrong = secrets.token_urlsafe(32)
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            answers = [
                await http.get(FILES, headers=bearer(wrong)),
                await http.get(FILES, headers=bearer(EVE)),
                await http.post(FILES, json={"name": "x"}, headers=bearer(EVE)),
                await http.get(f"{FILES}/missing", headers=bearer(ALICE)),
            ]
        assert [a.status_code for a in answers] == [401, 403, 403, 404]
        shown = caplog.text + "".join(a.text for a in answers)
        assert "401 for GET" in caplog.text  # the refusal is logged, its token is not
        for token in (wrong, EVE, ALICE):
            assert token not in shown


class TestTokensFile:
    """The tokens file: hashed tokens, two spellings, refusals naming the line."""

    def test_yaml_and_csv_spellings(self, tmp_path: Path) -> None:
        """Both give user, uid and groups; a token is found by its hash only."""
        yaml_file = tmp_path / "tokens.yaml"
        yaml_file.write_text(
            f"tokens:\n  - hash: {hash_token(ALICE)}\n    user: alice\n    uid: '7'\n    groups: [ops]\n"
        )
        csv_file, _ = write_tokens(tmp_path)
        assert load_tokens(yaml_file).lookup(ALICE) == User("alice", ("ops", "system:authenticated"))
        table = load_tokens(csv_file)
        assert table.lookup(ALICE) == User("alice", ("ops", "dev", "system:authenticated"))
        assert table.lookup(BOB) == User("bob", ("system:authenticated",))
        assert table.lookup(hash_token(BOB)) is None  # the hash is not the token
        assert table.lookup("") is None
        assert ALICE not in repr(table)

    @pytest.mark.parametrize(
        ("name", "text", "expected"),
        [
            ("t.csv", "{token},alice,1\n", "t.csv:1: column 1 (hash): must be sha256:"),
            ("t.csv", "# c\n{hash},alice\n", "t.csv:2: has 2 columns"),
            ("t.csv", "{hash},,1\n", "t.csv:1: column 2 (user): must not be empty"),
            ("t.csv", "{hash},a,1\n{hash},b,2\n", "one token is listed twice (for 'a' and 'b')"),
            (
                "t.yaml",
                "tokens:\n  - {{hash: {token}, user: a}}\n",
                "t.yaml: tokens[0].hash: must be sha256:",
            ),
            ("t.yaml", "tokens:\n  - {{hash: {hash}}}\n", "t.yaml: tokens[0].user: required"),
            (
                "t.yaml",
                "tokens:\n  - {{hash: {hash}, user: a, group: [x]}}\n",
                "tokens[0].group: unknown field",
            ),
            ("t.yaml", "tokens: [\n", "t.yaml:2: is not valid YAML"),
        ],
    )
    def test_bad_files_name_the_line_or_field_never_the_token(
        self, tmp_path: Path, name: str, text: str, expected: str
    ) -> None:
        """A plain token, a short line, an empty user, a duplicate, unknown fields, bad YAML."""
        path = tmp_path / name
        path.write_text(text.format(token=ALICE, hash=hash_token(ALICE)))
        with pytest.raises(ConfigError) as caught:
            load_tokens(path)
        message = str(caught.value)
        assert message.startswith(str(tmp_path))
        assert expected in message
        assert ALICE not in message
        assert hash_token(ALICE) not in message


class TestRbac:
    """Roles and bindings: verbs, groups, resources, names, namespaces."""

    def test_rules_by_verb_resource_name_and_namespace(self, tmp_path: Path) -> None:
        """bob reads files in default only, writes only "index" and its status; alice (ops) anything."""
        _, rules = write_tokens(tmp_path)
        authorizer = load_rbac(rules)
        bob = User("bob", ("system:authenticated",))
        alice = User("alice", ("ops", "system:authenticated"))
        group = "files.reconcile.dev"

        def may(
            user: User, verb: str, namespace: str | None, name: str | None = None, sub: str | None = None
        ) -> bool:
            return authorizer.allowed(user, Attributes(verb, group, "files", namespace, name, sub))

        assert may(bob, "list", "default")
        assert may(bob, "get", "default", "anything")
        assert not may(bob, "list", "prod")
        assert not may(bob, "list", None)  # across namespaces: a Role binds in its own only
        assert may(bob, "update", "default", "index")
        assert may(bob, "update", "default", "index", "status")
        assert not may(bob, "update", "default", "about")
        assert not may(bob, "create", "default")  # create names no object: resourceNames never match it
        assert not may(bob, "delete", "default", "index")
        assert not authorizer.allowed(bob, Attributes("get", "s3.reconcile.dev", "buckets", "default", "x"))
        assert may(alice, "delete", "prod", "x")
        assert may(alice, "list", None)
        assert not may(ANONYMOUS, "get", "default", "index")
        assert authorizer.allowed(User("root", ("system:masters",)), Attributes("delete", "x", "y"))

    def test_a_role_binding_may_grant_a_cluster_role_in_its_namespace(self, tmp_path: Path) -> None:
        """A RoleBinding to a ClusterRole grants its rules in the binding's namespace only."""
        path = tmp_path / "rbac.yaml"
        path.write_text(
            RBAC.split("---", maxsplit=1)[0]
            + """---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dev-admin, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: Group, name: dev}, {kind: ServiceAccount, name: ci}]
"""
        )
        authorizer = load_rbac(path)
        dev = User("dan", ("dev",))
        assert authorizer.allowed(dev, Attributes("delete", "g", "files", "dev", "x"))
        assert not authorizer.allowed(dev, Attributes("delete", "g", "files", "default", "x"))
        ci = User("system:serviceaccount:dev:ci")
        assert authorizer.allowed(ci, Attributes("create", "g", "files", "dev"))
        assert [sorted(r.verbs) for r in authorizer.rules_for(dev, "dev")] == [["*"]]
        assert authorizer.rules_for(dev, "default") == []

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("kind: Role\n", "document 1: apiVersion: required"),
            (
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Rolle\nmetadata: {name: x}\n",
                "document 1: kind: must be one of Role, ClusterRole",
            ),
            (
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: x}\nrules: []\n",
                "document 1: metadata.namespace: required for a Role",
            ),
            (
                (
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n"
                    "rules: [{apiGroups: [''], resources: [files]}]\n"
                ),
                "document 1: rules[0].verbs: required",
            ),
            (
                (
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n"
                    "rules: [{apiGroups: [''], resources: [files], verbs: get}]\n"
                ),
                "document 1: rules[0].verbs: must be a list of strings, not a string",
            ),
            (
                (
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n"
                    "rules: [{apiGroup: [''], resources: [files], verbs: [get]}]\n"
                ),
                "document 1: rules[0].apiGroup: unknown field",
            ),
            (
                RBAC.split("---", maxsplit=1)[0]
                + "---\n"
                + RBAC.split("---")[1].replace("kind: Group", "kind: Team"),
                "document 2: subjects[0].kind: must be User, Group or ServiceAccount, not 'Team'",
            ),
            (
                RBAC.split("---")[1].replace("name: admin}", "name: admn}"),
                "document 1: roleRef.name: no ClusterRole 'admn' in this file",
            ),
            (
                RBAC.split("---")[1].replace("kind: ClusterRole, name", "kind: Role, name"),
                "document 1: roleRef.kind: must be ClusterRole, not 'Role'",
            ),
            ("- a\n", "document 1: the document: must be a mapping, not a list"),
            ("", "holds no Role, ClusterRole, RoleBinding or ClusterRoleBinding"),
        ],
    )
    def test_bad_configs_name_the_field_path(self, tmp_path: Path, text: str, expected: str) -> None:
        """Each refusal names the file, the document and the field."""
        path = tmp_path / "rbac.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=r".*") as caught:
            load_rbac(path)
        assert str(caught.value).startswith(str(path))
        assert expected in str(caught.value)


class TestReviews:
    """SelfSubjectAccessReview and SelfSubjectRulesReview, in process."""

    async def test_access_reviews_answer_for_the_asking_user(self, tmp_path: Path) -> None:
        """bob may get files, not delete them; a resource without a group is found by its plural."""

        async def review(token: str, **attributes: str) -> bool:
            response = await http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                json={"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attributes}},
                headers=bearer(token),
            )
            assert response.status_code == 201, response.text
            assert response.json()["kind"] == "SelfSubjectAccessReview"
            allowed: bool = response.json()["status"]["allowed"]
            return allowed

        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            group = "files.reconcile.dev"
            assert await review(BOB, verb="get", group=group, resource="files", namespace="default")
            assert not await review(BOB, verb="delete", group=group, resource="files", namespace="default")
            assert await review(BOB, verb="list", resource="files", namespace="default")
            assert await review(BOB, verb="list", resource="files.files.reconcile.dev", namespace="default")
            assert not await review(BOB, verb="list", resource="files", namespace="prod")
            assert await review(ALICE, verb="delete", group=group, resource="files", namespace="prod")
            missing = await http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                json={"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get"}}},
                headers=bearer(BOB),
            )
            malformed = await http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", content=b"{", headers=bearer(BOB)
            )
            rules = await http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                json={"kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}},
                headers=bearer(BOB),
            )
            discovery = await http.get("/apis/authorization.k8s.io/v1", headers=bearer(BOB))
            groups = await http.get("/apis", headers=bearer(BOB))
        assert missing.status_code == 422
        assert missing.json()["details"]["causes"][0]["field"] == "spec.resourceAttributes.resource"
        assert malformed.status_code == 400
        assert rules.json()["status"]["resourceRules"][0] == {
            "verbs": ["get", "list", "watch"],
            "apiGroups": ["files.reconcile.dev"],
            "resources": ["files"],
        }
        listed = {g["name"] for g in groups.json()["groups"]}
        assert {"authorization.k8s.io", "authentication.k8s.io", "files.reconcile.dev"} <= listed
        assert [r["name"] for r in discovery.json()["resources"]] == [
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
        ]


class TestWatchAuthorization:
    """A watch is authorized by the verb watch, in its namespace."""

    async def test_a_watch_needs_the_watch_verb(self, tmp_path: Path) -> None:
        """eve (no binding) and bob in another namespace: 403 before any stream; no token: 401."""
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            eve = await http.get(FILES, params={"watch": "true"}, headers=bearer(EVE))
            elsewhere = await http.get(
                "/apis/files.reconcile.dev/v1/namespaces/prod/files",
                params={"watch": "1"},
                headers=bearer(BOB),
            )
            everywhere = await http.get(
                "/apis/files.reconcile.dev/v1/files", params={"watch": "true"}, headers=bearer(BOB)
            )
            nobody = await http.get(FILES, params={"watch": "true"})
        assert (eve.status_code, elsewhere.status_code, everywhere.status_code) == (403, 403, 403)
        assert 'cannot watch resource "files"' in eve.json()["message"]
        assert nobody.status_code == 401


class TestProtobufReviews:
    """kubectl's protobuf bodies, as it sends them (bytes taken from kubectl 1.32's -v=8)."""

    #: ``kubectl auth can-i create files`` in the namespace default.
    CAN_I = bytes.fromhex(
        "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374"
        "41636365737352657669657712400a100a0012001a0022002a0032003800420012220a200a0764656661756c"
        "7412066372656174651a0022002a0566696c657332003a001a08080012001a0020001a002200"
    )

    async def test_kubectls_access_review_is_read(self, tmp_path: Path) -> None:
        """The envelope and the spec's strings read; bob may not create, alice may; a
        truncated body is 400, another media type 415."""
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        protobuf = {"Content-Type": "application/vnd.kubernetes.protobuf"}
        async with api(tmp_path, **app_options(tmp_path)) as (_, http):
            bob = await http.post(path, content=self.CAN_I, headers=bearer(BOB) | protobuf)
            alice = await http.post(path, content=self.CAN_I, headers=bearer(ALICE) | protobuf)
            truncated = await http.post(path, content=self.CAN_I[:60], headers=bearer(ALICE) | protobuf)
            yaml_body = await http.post(
                path, content=b"kind: x", headers=bearer(ALICE) | {"Content-Type": "application/yaml"}
            )
            not_string = await http.post(
                path,
                json={"spec": {"resourceAttributes": {"verb": "get", "resource": "files", "namespace": 5}}},
                headers=bearer(ALICE),
            )
        assert bob.status_code == 201, bob.text
        assert bob.json()["spec"]["resourceAttributes"] == {
            "namespace": "default",
            "verb": "create",
            "resource": "files",
        }
        assert bob.json()["status"] == {"allowed": False}
        assert alice.json()["status"] == {"allowed": True}
        assert truncated.status_code == 400
        assert yaml_body.status_code == 415
        assert not_string.status_code == 422
        assert not_string.json()["details"]["causes"][0]["field"] == "spec.resourceAttributes.namespace"


class TestRefusalsStoreNothing:
    """A 401 or 403 write leaves the store as it was; an allowed one records its user."""

    async def test_a_token_without_rights_is_403_and_nothing_is_stored(self, tmp_path: Path) -> None:
        """eve (no binding) and bob (create names no object) are refused; alice creates, and
        the history says alice did; bob updates "index" (his resourceNames) but not "about"."""
        async with api(tmp_path, **app_options(tmp_path)) as (client, http):
            eve = await http.post(FILES, json=manifest("evil", tmp_path), headers=bearer(EVE))
            bob = await http.post(FILES, json=manifest("index", tmp_path), headers=bearer(BOB))
            nobody = await http.post(FILES, json=manifest("nobody", tmp_path))
            before = await client.store.revision()
            alice = await http.post(FILES, json=manifest("index", tmp_path), headers=bearer(ALICE))
            await http.post(FILES, json=manifest("about", tmp_path), headers=bearer(ALICE))
            middle = await client.store.revision()
            changed = {"spec": {"content": "bob's\n"}}
            merge = {"Content-Type": "application/merge-patch+json"}
            bob_index = await http.patch(f"{FILES}/index", json=changed, headers=bearer(BOB) | merge)
            bob_about = await http.patch(f"{FILES}/about", json=changed, headers=bearer(BOB) | merge)
            bob_delete = await http.delete(f"{FILES}/index", headers=bearer(BOB))
            history = (await http.get(f"{FILES}/index/history", headers=bearer(ALICE))).json()
            after = await client.store.revision()
        assert alice.status_code == 201, alice.text
        assert (eve.status_code, bob.status_code, nobody.status_code) == (403, 403, 401)
        assert eve.json()["reason"] == "Forbidden"
        assert 'User "eve" cannot create resource "files"' in eve.json()["message"]
        assert before == 0
        assert bob_index.status_code == 200, bob_index.text
        assert (bob_about.status_code, bob_delete.status_code) == (403, 403)
        assert after == middle + 1  # bob's one allowed patch
        assert [e["user"] for e in history["items"]] == ["alice", "bob"]


# -- through a real server -------------------------------------------------------------


def readable_with(cmdline: Path, db: Path) -> bool:
    """Whether the process of /proc/PID/cmdline runs on ``db`` (False once it is gone)."""
    try:
        return str(db).encode() in cmdline.read_bytes()
    except OSError:
        return False


async def seed(db: Path) -> None:
    """A store holding the file "index" in default."""
    async with connect(f"sqlite:///{db}") as client:
        await client.apply(MANIFEST, origin=db.parent / "site.yaml")


class TestServed:
    """``reconcile serve`` with its security options, and real clients. kubectl sends
    a token (or any credential) over HTTPS only, so these serve HTTPS."""

    def test_kubectl_auth_can_i_and_get_with_tokens(self, tmp_path: Path) -> None:
        """can-i answers per user; get lists for bob, is Forbidden for eve, Unauthorized for a wrong token."""
        db = tmp_path / "api.db"
        asyncio.run(seed(db))
        tokens, rules = write_tokens(tmp_path)
        paths = make_certificates(tmp_path)
        ca = {"certificate-authority": f"{paths['ca']}.crt"}
        args = ("--token-file", str(tokens), "--authorization-config", str(rules), *tls_args(paths))
        with served(db, *args) as url:
            as_bob = kubeconfig(tmp_path / "bob.yaml", url, token=BOB, **ca)
            as_eve = kubeconfig(tmp_path / "eve.yaml", url, token=EVE, **ca)
            stranger = kubeconfig(tmp_path / "stranger.yaml", url, token=secrets.token_urlsafe(32), **ca)
            yes = kubectl(as_bob, "auth", "can-i", "list", "files", check=False)
            no = kubectl(as_bob, "auth", "can-i", "create", "files", check=False)
            named = kubectl(as_bob, "auth", "can-i", "update", "files/index", check=False)
            other = kubectl(as_bob, "auth", "can-i", "list", "files", "-n", "prod", check=False)
            eve = kubectl(as_eve, "auth", "can-i", "list", "files", check=False)
            whoami = kubectl(as_bob, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
            listed = kubectl(as_bob, "auth", "can-i", "--list")
            got = kubectl(
                as_bob,
                "get",
                "--raw",
                "/apis/files.reconcile.dev/v1/namespaces/default/files/index",
                check=False,
            )
            forbidden = kubectl(as_eve, "get", "--raw", "/apis/files.reconcile.dev/v1/files", check=False)
            unauthorized = kubectl(
                stranger, "get", "--raw", "/apis/files.reconcile.dev/v1/files", check=False
            )
        assert (yes.returncode, yes.stdout.strip()) == (0, "yes"), yes.stderr
        assert (no.returncode, no.stdout.strip()) == (1, "no")
        assert named.stdout.strip() == "yes"
        assert other.stdout.strip() == "no"
        assert eve.stdout.strip() == "no"
        assert whoami.stdout == "bob"
        rows = [line.split() for line in listed.stdout.splitlines()]
        assert ["files.files.reconcile.dev", "[]", "[]", "[get", "list", "watch]"] in rows
        assert ["files.files.reconcile.dev/status", "[]", "[index]", "[create", "patch", "update]"] in rows
        assert got.returncode == 0, got.stderr
        assert '"name":"index"' in got.stdout
        assert forbidden.returncode != 0
        assert (
            'User \\"eve\\" cannot list' in forbidden.stderr or 'User "eve" cannot list' in forbidden.stderr
        )
        assert unauthorized.returncode != 0
        assert "Unauthorized" in unauthorized.stderr

    def test_the_kubernetes_python_client_with_a_token(self, tmp_path: Path) -> None:
        """The official client's typed access review (JSON bodies), over HTTPS with bob's token."""
        db = tmp_path / "api.db"
        asyncio.run(seed(db))
        tokens, rules = write_tokens(tmp_path)
        paths = make_certificates(tmp_path)
        args = ("--token-file", str(tokens), "--authorization-config", str(rules), *tls_args(paths))
        with served(db, *args) as url:
            configuration = kubernetes.client.Configuration()
            configuration.host = url
            configuration.ssl_ca_cert = f"{paths['ca']}.crt"
            configuration.api_key = {"authorization": f"Bearer {BOB}"}
            with kubernetes.client.ApiClient(configuration) as client:
                reviews = kubernetes.client.AuthorizationV1Api(client)

                def may(verb: str, namespace: str) -> bool:
                    body = kubernetes.client.V1SelfSubjectAccessReview(
                        spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(
                            resource_attributes=kubernetes.client.V1ResourceAttributes(
                                verb=verb, group="files.reconcile.dev", resource="files", namespace=namespace
                            )
                        )
                    )
                    allowed: bool = reviews.create_self_subject_access_review(body).status.allowed
                    return allowed

                answers = (may("list", "default"), may("delete", "default"), may("list", "prod"))
            configuration.api_key = {"authorization": "Bearer wrong"}
            with kubernetes.client.ApiClient(configuration) as client, pytest.raises(ApiException) as refused:
                kubernetes.client.AuthorizationV1Api(client).create_self_subject_access_review(body={})
        assert answers == (True, False, False)
        assert refused.value.status == 401

    def test_anonymous_through_kubectl_only_when_enabled(self, tmp_path: Path) -> None:
        """--anonymous with a binding for system:unauthenticated: kubectl without credentials reads."""
        db = tmp_path / "api.db"
        asyncio.run(seed(db))
        tokens, rules = write_tokens(tmp_path, anonymous_rules=True)
        args = ("--token-file", str(tokens), "--authorization-config", str(rules))
        with served(db, *args, "--anonymous") as url:
            nobody = kubeconfig(tmp_path / "nobody.yaml", url)
            opened = kubectl(nobody, "auth", "can-i", "delete", "files", check=False)
        with served(db, *args) as url:
            nobody = kubeconfig(tmp_path / "nobody.yaml", url)
            closed = kubectl(nobody, "auth", "can-i", "delete", "files", check=False)
        assert opened.stdout.strip() == "yes", opened.stderr
        assert closed.returncode != 0
        assert "Unauthorized" in closed.stderr

    def test_tls_and_client_certificates(self, tmp_path: Path) -> None:
        """HTTPS verified by --certificate-authority; a client certificate is its CN's user; a
        token still works beside it; plain HTTP to the TLS port gets no answer."""
        db = tmp_path / "api.db"
        asyncio.run(seed(db))
        tokens, rules = write_tokens(tmp_path)
        paths = make_certificates(tmp_path)
        args = ("--token-file", str(tokens), "--authorization-config", str(rules), *tls_args(paths))
        with served(db, *args, "--client-ca-file", f"{paths['ca']}.crt") as url:
            assert url.startswith("https://127.0.0.1:")
            ca = {"certificate-authority": f"{paths['ca']}.crt"}
            as_carol = kubeconfig(
                tmp_path / "carol.yaml",
                url,
                credentials={
                    "client-certificate": f"{paths['client']}.crt",
                    "client-key": f"{paths['client']}.key",
                },
                **ca,
            )
            carol = kubectl(as_carol, "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
            can = kubectl(as_carol, "auth", "can-i", "delete", "files", "-n", "prod", check=False)
            as_bob = kubeconfig(tmp_path / "bob.yaml", url, token=BOB, **ca)
            bob = kubectl(as_bob, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
            untrusted = kubeconfig(tmp_path / "untrusted.yaml", url, token=BOB)
            refused = kubectl(untrusted, "auth", "whoami", check=False)
            flagged = kubectl(
                untrusted,
                "--certificate-authority",
                f"{paths['ca']}.crt",
                "auth",
                "whoami",
                "-o",
                "name",
                check=False,
            )
            context = ssl.create_default_context(cafile=f"{paths['ca']}.crt")
            with httpx.Client(verify=context) as http:
                nobody = http.get(f"{url}{FILES}")
            modern = handshake(url, f"{paths['ca']}.crt", None)
            with pytest.raises(ssl.SSLError):
                handshake(url, f"{paths['ca']}.crt", "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA")
        # TLS 1.2 with forward secrecy and an AEAD suite only (uvicorn's default offered CBC).
        assert modern[1] == "TLSv1.2"
        assert modern[0].startswith("ECDHE-"), modern
        assert "GCM" in modern[0] or "CHACHA20" in modern[0], modern
        assert '"username":"carol"' in carol.stdout
        assert '"groups":["ops","system:authenticated"]' in carol.stdout
        assert can.stdout.strip() == "yes"  # carol is in ops, bound to admin everywhere
        assert bob.stdout == "bob"
        assert refused.returncode != 0
        assert "certificate" in refused.stderr
        assert flagged.returncode == 0, flagged.stderr  # the same CA given by kubectl's flag
        assert nobody.status_code == 401

    def test_tokens_never_in_output_or_store(self, tmp_path: Path) -> None:
        """After good and bad tokens, writes and a stop: neither token is in stderr or the store's files."""
        db = tmp_path / "api.db"
        asyncio.run(seed(db))
        tokens, rules = write_tokens(tmp_path)
        paths = make_certificates(tmp_path)
        wrong = secrets.token_urlsafe(32)
        stderr: list[str] = []
        args = ("--token-file", str(tokens), "--authorization-config", str(rules), *tls_args(paths))
        context = ssl.create_default_context(cafile=f"{paths['ca']}.crt")
        answers = []
        with served(db, *args, stderr=stderr) as url, httpx.Client(verify=context) as http:
            for name, token in (("a", ALICE), ("b", BOB), ("c", wrong)):
                config = kubeconfig(
                    tmp_path / "k.yaml", url, token=token, **{"certificate-authority": f"{paths['ca']}.crt"}
                )
                kubectl(config, "auth", "can-i", "get", "files", check=False)
                answers.append(http.get(f"{url}{FILES}/index", headers=bearer(token)).status_code)
                created = http.post(f"{url}{FILES}", json=manifest(name, tmp_path), headers=bearer(token))
                answers.append(created.status_code)
            command_lines = [
                cmdline.read_bytes()
                for cmdline in Path("/proc").glob("[0-9]*/cmdline")
                if readable_with(cmdline, db)
            ]
        assert len(command_lines) == 1  # what ps shows of the server: the tokens file's path only
        assert str(tokens).encode() in command_lines[0]
        assert answers == [200, 201, 200, 403, 401, 401]
        stored = b"".join(p.read_bytes() for p in tmp_path.glob("api.db*"))
        assert stored
        for token in (ALICE, BOB, wrong):
            assert token not in stderr[0]
            assert token.encode() not in stored
            assert token.encode() not in command_lines[0]

    @pytest.mark.parametrize(
        ("option", "text", "expected"),
        [
            ("--token-file", "{token},alice,1\n", "tokens.txt:1: column 1 (hash): must be sha256:"),
            (
                "--authorization-config",
                (
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n"
                    "rules: [{apiGroups: ['*'], resources: ['*'], verbs: '*'}]\n"
                ),
                "document 1: rules[0].verbs: must be a list of strings",
            ),
        ],
    )
    def test_bad_config_files_exit_2_naming_the_field(
        self, tmp_path: Path, option: str, text: str, expected: str
    ) -> None:
        """A bad tokens or RBAC file: exit code 2, the field path on stderr, no traceback, no token."""
        path = tmp_path / "tokens.txt"
        path.write_text(text.replace("{token}", ALICE))
        result = subprocess.run(
            reconcile_command("--db", str(tmp_path / "api.db"), "serve", "--port", "0", option, str(path)),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=CHECKOUT,
            env={"PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr
        assert option in result.stderr
        assert "Traceback" not in result.stderr
        assert ALICE not in result.stderr + result.stdout
        assert not (tmp_path / "api.db").exists()  # refused before the store opened

    @pytest.mark.parametrize(
        ("args", "expected"),
        [
            (("--host", "0.0.0.0"), "is not a loopback address, and no credentials are checked"),  # noqa: S104
            (("--tls-cert-file", "{ca}.crt"), "--tls-cert-file and --tls-private-key-file go together"),
            (("--client-ca-file", "{ca}.crt"), "--client-ca-file needs TLS"),
            (
                ("--tls-cert-file", "{ca}.crt", "--tls-private-key-file", "{server}.key"),
                "are not a certificate and its private key",
            ),
        ],
    )
    def test_unsafe_or_inconsistent_options_exit_2(
        self, tmp_path: Path, args: tuple[str, ...], expected: str
    ) -> None:
        """A network address with nobody authenticated; half a TLS setup; a key not the certificate's."""
        paths = make_certificates(tmp_path)
        shown = [a.format(ca=paths["ca"], server=paths["server"]) for a in args]
        result = subprocess.run(
            reconcile_command("--db", str(tmp_path / "api.db"), "serve", "--port", "0", *shown),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=CHECKOUT,
            env={"PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert expected in " ".join(result.stderr.split())
        assert "Traceback" not in result.stderr

    def test_a_network_address_without_tls_warns_loudly(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Tokens on a non-loopback address without TLS: a warning on stderr; on loopback: none."""
        tokens, _ = write_tokens(tmp_path)
        options: dict[str, Any] = {
            "token_file": str(tokens),
            "client_ca": None,
            "anonymous": False,
            "authorization_config": None,
            "tls": {},
        }
        _security("127.0.0.1", **options)
        assert capsys.readouterr().err == ""
        security = _security("10.1.2.3", **options)
        warning = " ".join(capsys.readouterr().err.split())
        assert (
            "WARNING: serving 10.1.2.3 without TLS: bearer tokens and every document cross the network"
            in warning
        )
        assert security.authenticator.tokens is not None

    def test_hash_token_reads_stdin(self, tmp_path: Path) -> None:
        """--hash-token prints the tokens file's hash of stdin's token; a short token is refused."""
        env = {"PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", "PATH": "/usr/bin:/bin"}
        command = reconcile_command("--db", str(tmp_path / "api.db"), "serve", "--hash-token")
        good = subprocess.run(
            command, input=ALICE + "\n", capture_output=True, text=True, env=env, check=False
        )
        short = subprocess.run(
            command, input="secret\n", capture_output=True, text=True, env=env, check=False
        )
        assert (good.returncode, good.stdout) == (0, hash_token(ALICE) + "\n")
        assert short.returncode == 2
        assert "shorter than 20 characters" in short.stderr
        assert "secret" not in short.stderr.replace("secrets", "")
