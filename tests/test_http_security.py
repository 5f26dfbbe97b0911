"""A security review of the HTTP API, from an attacker's side: each test is a way in that
was open (or a limit that could be slipped past), shut."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import random
import secrets
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import click
import httpx
import orjson
import pytest
import uvicorn
from http_helpers import api, served
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from watch_helpers import Stream, app_over

from reconcile.api import connect
from reconcile.errors import StoreError, StoreUnavailableError
from reconcile.http import create_app
from reconcile.http.authn import Authenticating, Authenticator
from reconcile.http.configfiles import ConfigError
from reconcile.http.connections import protocol_class
from reconcile.http.context import USER_SCOPE_KEY, Attributes, User
from reconcile.http.errors import ApiError
from reconcile.http.limits import Limits, LimitSettings, long_running
from reconcile.http.protobuf import message_fields, unwrap
from reconcile.http.rbac import load_rbac
from reconcile.http.serving import _security
from reconcile.http.tokens import hash_token, load_tokens
from reconcile.http.watchers import WatchLimits
from reconcile.model import manifests

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


@contextlib.contextmanager
def caplog_of(name: str) -> Iterator[io.StringIO]:
    """What the logger ``name`` writes meanwhile (every level)."""
    logger = logging.getLogger(name)
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield text
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


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
            same = await http.post(  # (a page of the origin's own says so: the web view's guard)
                FILES,
                content=body,
                headers=loopback | {"Origin": "http://127.0.0.1:6443", "X-Requested-With": "XMLHttpRequest"},
            )
        assert (forged.status_code, null.status_code) == (403, 403)
        assert "another origin" in forged.json()["message"]
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


class TestErrorsNameNoInternals:
    """What the store says when it fails (its address, user, file, SQL) stays in the log."""

    @pytest.mark.parametrize(
        ("error", "code"),
        [
            (StoreError("/srv/secret/api.db: disk I/O error"), 500),
            (StoreError("postgresql://app@db.internal:5432/prod: relation reconcile_events ..."), 500),
            (StoreUnavailableError("postgresql://app@db.internal:5432/prod: cannot reach the server"), 503),
        ],
    )
    async def test_a_failing_store_is_not_quoted(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, code: int
    ) -> None:
        """A list over a store raising ``error``: a Status of ``code`` naming none of it."""
        async with api(tmp_path) as (client, http):

            async def failing(*args: object, **kwargs: object) -> None:
                raise error

            monkeypatch.setattr(client.store, "list", failing)
            with caplog_of("reconcile.http") as logged:
                answer = await http.get(FILES)
        assert answer.status_code == code
        message = answer.json()["message"]
        for internal in ("secret", "db.internal", "app@", "relation"):
            assert internal not in message
        assert str(error) in logged.getvalue()


class TestNonResourcePaths:
    """Discovery, OpenAPI and /health: any authenticated user (Kubernetes' system:discovery),
    the anonymous user only through a nonResourceURLs rule; /version and the probes: anybody."""

    PATHS = ("/api", "/apis", "/apis/files.reconcile.dev/v1", "/openapi/v3", "/health")

    async def test_the_anonymous_user_discovers_nothing_without_a_rule(self, tmp_path: Path) -> None:
        """With --anonymous: 403 for the anonymous user, 200 for patcher (no rule names
        these paths); /version and /livez for both."""
        async with api(tmp_path, **secured(tmp_path, anonymous=True)) as (_, http):
            anonymous = [(await http.get(path)).status_code for path in self.PATHS]
            patcher = [(await http.get(path, headers=bearer(PATCHER))).status_code for path in self.PATHS]
            refusal = (await http.get("/apis")).json()
            public = [(await http.get(path)).status_code for path in ("/version", "/livez")]
        assert anonymous == [403] * len(self.PATHS)
        assert refusal["message"] == 'forbidden: User "system:anonymous" cannot get path "/apis"'
        assert patcher == [200] * len(self.PATHS)
        assert public == [200, 200]

    async def test_access_reviews_of_paths_ask_the_rules(self, tmp_path: Path) -> None:
        """`kubectl auth can-i get /apis` is yes for an authenticated user, no for the
        anonymous one; a path outside discovery is no without a rule (resources: ["*"]
        grants no path, as in Kubernetes)."""

        async def can(path: str, verb: str = "get", headers: dict[str, str] | None = None) -> bool:
            answer = await http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                json={"spec": {"nonResourceAttributes": {"path": path, "verb": verb}}},
                headers=headers or {},
            )
            assert answer.status_code == 201, answer.text
            allowed: bool = answer.json()["status"]["allowed"]
            return allowed

        async with api(tmp_path, **secured(tmp_path, anonymous=True)) as (_, http):
            answers = [
                await can("/apis", headers=bearer(PATCHER)),
                await can("/apis"),
                await can("/metrics", headers=bearer(PATCHER)),
                await can("/apis", verb="delete", headers=bearer(PATCHER)),
                await can("/metrics", verb="delete", headers=bearer(ADMIN)),
            ]
            rules = await http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                json={"spec": {"namespace": "default"}},
            )
        assert answers == [True, False, False, False, False]
        assert rules.json()["status"]["nonResourceRules"] == []

    async def test_a_rule_may_grant_paths_to_the_anonymous_user(self, tmp_path: Path) -> None:
        """A ClusterRole's nonResourceURLs rule bound to system:unauthenticated opens
        discovery to it, and nothing more."""
        options = secured(tmp_path, anonymous=True)
        rules = tmp_path / "rbac.yaml"
        rules.write_text(
            RBAC
            + """\
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: discoverer}
rules: [{nonResourceURLs: ["/apis", "/apis/*"], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: strangers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: discoverer}
subjects: [{kind: Group, name: system:unauthenticated}]
"""
        )
        options["authorizer"] = load_rbac(rules)
        async with api(tmp_path, **options) as (_, http):
            groups = await http.get("/apis")
            health = await http.get("/health")
            files = await http.get(FILES)
        assert (groups.status_code, health.status_code, files.status_code) == (200, 403, 403)

    @pytest.mark.parametrize(
        ("rule", "expected"),
        [
            (
                (
                    "kind: Role\nmetadata: {name: r, namespace: default}\n"
                    "rules: [{nonResourceURLs: ['*'], verbs: [get]}]"
                ),
                "only a ClusterRole may name nonResourceURLs",
            ),
            (
                (
                    "kind: ClusterRole\nmetadata: {name: r}\nrules: [{nonResourceURLs: ['*'], "
                    "resources: ['*'], apiGroups: ['*'], verbs: [get]}]"
                ),
                "either nonResourceURLs or resources",
            ),
        ],
    )
    def test_a_non_resource_rule_is_checked(self, tmp_path: Path, rule: str, expected: str) -> None:
        """Kubernetes' own refusals of a nonResourceURLs rule, naming the field."""
        path = tmp_path / "rbac.yaml"
        path.write_text("apiVersion: rbac.authorization.k8s.io/v1\n" + rule + "\n")
        with pytest.raises(ConfigError, match=expected):
            load_rbac(path)

    async def test_the_probes_withhold_the_stores_words_from_strangers(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failing store: a probe without credentials says "reason withheld" (the reason
        goes to the log); with a token that may read /health, the reason."""
        async with api(tmp_path, **secured(tmp_path)) as (client, http):

            async def down() -> int:
                raise StoreUnavailableError("postgresql://app@db.internal:5432/prod: cannot reach the server")

            monkeypatch.setattr(client.store, "revision", down)
            with caplog_of("reconcile.http") as logged:
                stranger = await http.get("/livez", params={"verbose": ""})
            known = await http.get("/livez", params={"verbose": ""}, headers=bearer(PATCHER))
        assert stranger.status_code == 500
        assert "[-]store failed: reason withheld" in stranger.text
        assert "db.internal" not in stranger.text
        assert "db.internal" in logged.getvalue()
        assert "db.internal" in known.text


class TestLimitsCannotBeSlippedPast:
    """The caps on requests in flight count every request that is not a watch."""

    @pytest.mark.parametrize(
        "path",
        [
            f"{FILES}/index?watch=true",  # a GET of an object: no watch, yet not counted
            "/apis/files.reconcile.dev/v1/namespaces/watch/files/index",  # "/watch/" in the path
            "/health?watch=1",
        ],
    )
    def test_only_a_collection_watch_is_long_running(self, path: str) -> None:
        """What is not a watch is counted, whatever its query or path holds."""
        raw, _, query = path.partition("?")
        assert not long_running({"method": "GET", "path": raw, "query_string": query.encode()})

    async def test_a_get_with_watch_true_takes_a_slot(self, tmp_path: Path) -> None:
        """One request in flight per client: a second GET of an object, with watch=true,
        is 429 while the first waits."""
        gate = asyncio.Event()
        entered = asyncio.Event()

        async def slow(request: Request) -> Response:
            entered.set()
            await gate.wait()
            return Response("slow")

        settings = LimitSettings(max_inflight_per_client=1)
        options = {
            "routes": [Route("/slow", slow)],
            "middleware": [Middleware(Limits, settings=settings)],
        }
        async with api(tmp_path, **options) as (_, http):
            first = asyncio.ensure_future(http.get("/slow"))
            async with asyncio.timeout(10):
                await entered.wait()
            second = await http.get(f"{FILES}/index", params={"watch": "true"})
            gate.set()
            await first
        assert second.status_code == 429


class TestWarnings:
    """The Warning headers quote the client's field names: never a header's end, never without bound."""

    async def test_a_field_name_cannot_inject_a_header(self, tmp_path: Path) -> None:
        """A field named with CR LF and a non-Latin-1 character: escaped in the warning."""
        document = manifest("crlf", tmp_path)
        document["spec"]["a\r\nSet-Cookie: x=1"] = 1
        document["spec"]["caf\u20ac"] = 1
        async with api(tmp_path) as (_, http):
            answer = await http.post(FILES, json=document)
        assert answer.status_code == 201, answer.text
        warnings = answer.headers.get_list("warning")
        assert len(warnings) == 2
        for warning in warnings:
            assert all(" " <= c <= "~" for c in warning), warning
        assert "set-cookie" not in answer.headers
        assert any("\\\\r\\\\nSet-Cookie" in w for w in warnings)
        assert any("\\\\u20ac" in w for w in warnings)

    async def test_warnings_are_bounded(self, tmp_path: Path) -> None:
        """20,000 unknown fields, one of 10,000 characters: 4 KiB of warnings at most, each
        cut at 256 characters, the last saying how many were left out."""
        document = manifest("many", tmp_path)
        document["spec"] |= {f"k{i}": 1 for i in range(20_000)} | {"x" * 10_000: 1}
        async with api(tmp_path) as (_, http):
            answer = await http.post(FILES, json=document)
        assert answer.status_code == 201, answer.text
        warnings = answer.headers.get_list("warning")
        assert sum(len(w) for w in warnings) < 6000
        assert all(len(w) < 300 for w in warnings)
        assert warnings[-1].endswith('more warnings not shown"')


class TestProtobufReader:
    """The hand-written reader of kubectl's review bodies, fuzzed: a 400 for what is not a
    message, never a 500, never a hang, never a body read for seconds."""

    CAN_I = bytes.fromhex(
        "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374"
        "41636365737352657669657712400a100a0012001a0022002a0032003800420012220a200a0764656661756c"
        "7412066372656174651a0022002a0566696c657332003a001a08080012001a0020001a002200"
    )

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (b"\x09\x01", "truncated"),  # a fixed64 with one of its 8 bytes
            (b"\x0d\x01\x02", "truncated"),  # a fixed32 with two of its 4 bytes
            (b"\x12" + b"\xff" * 11 + b"\x01", "longer than 10 bytes"),  # a huge length
            (b"\x12\xff\xff\xff\xff\x0f", "truncated"),  # a length past the end
            (b"\x0b", "wire type 3"),  # a group
            (b"\x08", "truncated"),  # a varint field without its value
        ],
    )
    def test_malformed_messages_are_400(self, body: bytes, expected: str) -> None:
        """Each malformed envelope: an ApiError 400 naming what is wrong."""
        with pytest.raises(ApiError) as refused:
            message_fields(unwrap(b"k8s\x00" + body))
        assert refused.value.code == 400
        assert expected in refused.value.message

    async def test_fuzzed_bodies_are_answered_201_or_400(self, tmp_path: Path) -> None:
        """2,000 mutations of kubectl's own body (bytes changed, cut, inserted): each a
        201, a 400 or (a spec without attributes) a 422 Status, within seconds; a 1 MiB
        body of tiny fields is 413 unread."""
        rnd = random.Random(30)
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        headers = bearer(PATCHER) | {"Content-Type": "application/vnd.kubernetes.protobuf"}
        codes: set[int] = set()
        async with api(tmp_path, **secured(tmp_path)) as (_, http):
            async with asyncio.timeout(120):
                for _ in range(2000):
                    body = bytearray(self.CAN_I)
                    for _ in range(rnd.randint(1, 4)):
                        at = rnd.randrange(len(body) + 1)
                        choice = rnd.random()
                        if choice < 0.4 and at < len(body):
                            body[at] = rnd.randrange(256)
                        elif choice < 0.6:
                            del body[at:]
                        else:
                            body[at:at] = rnd.randbytes(rnd.randint(1, 12))
                    answer = await http.post(path, content=bytes(body), headers=headers)
                    codes.add(answer.status_code)
                    assert answer.status_code in {201, 400, 422}, (bytes(body).hex(), answer.text)
                huge = await http.post(path, content=b"k8s\x00" + b"\x08\x01" * 500_000, headers=headers)
        assert {201, 400} <= codes
        assert huge.status_code == 413


class TestServedLimits:
    """What ``reconcile serve`` itself trusts."""

    def test_a_forwarded_for_header_does_not_make_another_client(self, tmp_path: Path) -> None:
        """Anonymous requests are limited per address: an X-Forwarded-For naming a new one
        each time is still the same client (uvicorn trusts it from 127.0.0.1 by default)."""
        db = tmp_path / "api.db"
        args = ("--anonymous", "--requests-per-second", "0.1", "--burst", "1")
        with served(db, *args) as url, httpx.Client(base_url=url) as http:
            codes = [
                http.get("/version", headers={"X-Forwarded-For": f"10.0.0.{n}"}).status_code for n in range(3)
            ]
        assert codes == [200, 429, 429]


class TestYamlBombs:
    """YAML bodies: aliases cannot make a small body a huge object."""

    async def test_an_alias_of_a_long_string_is_counted_by_its_length(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A 10 KB string and 1,000 aliases of it (an 18 KB body, 10 MB written out)
        against an expansion budget of 1 MiB: 400 naming the bomb, nothing stored."""
        monkeypatch.setattr(manifests, "MAX_EXPANDED_BYTES", 1024 * 1024)
        aliases = ", ".join(f"k{i}: *s" for i in range(1000))
        body = (
            "apiVersion: files.reconcile.dev/v1\nkind: File\n"
            f"metadata: {{name: bomb, annotations: {{s: &s {'x' * 10_000}, {aliases}}}}}\n"
            f"spec: {{path: bomb.html, root: {tmp_path}, content: hi}}\n"
        )
        async with api(tmp_path) as (client, http):
            answer = await http.post(FILES, content=body, headers={"Content-Type": "application/yaml"})
            stored = await client.store.revision()
        assert answer.status_code == 400, answer.text[:300]
        assert "alias bomb" in answer.json()["message"]
        assert stored == 0


class Recording:
    """An authorizer that refuses everything, keeping what it was asked."""

    def __init__(self) -> None:
        self.asked: list[Attributes] = []

    def allowed(self, user: User, attributes: Attributes) -> bool:  # noqa: ARG002
        """Never; ``attributes`` kept."""
        self.asked.append(attributes)
        return False


G = "files.reconcile.dev"
NAMED = f"{FILES}/index"

#: A review: answered for the user about itself (what it asks the authorizer is about
#: that user), never refused.
SELF = "self"
#: Every route of the app: a request to it, and what it must ask the authorizer (None:
#: nothing, it is public; SELF: a review).
ROUTES: dict[tuple[str, str], tuple[str, str, Attributes | str | None]] = {
    ("GET", "/livez"): ("GET", "/livez", None),
    ("GET", "/readyz"): ("GET", "/readyz", None),
    ("GET", "/healthz"): ("GET", "/healthz", None),
    ("GET", "/version"): ("GET", "/version", None),
    ("GET", "/health"): ("GET", "/health", Attributes("get", "", "", path="/health")),
    ("GET", "/api"): ("GET", "/api", Attributes("get", "", "", path="/api")),
    ("GET", "/api/v1"): ("GET", "/api/v1", Attributes("get", "", "", path="/api/v1")),
    ("GET", "/apis"): ("GET", "/apis", Attributes("get", "", "", path="/apis")),
    ("GET", "/apis/{group}"): ("GET", f"/apis/{G}", Attributes("get", "", "", path=f"/apis/{G}")),
    ("GET", "/apis/{group}/{version}"): (
        "GET",
        f"/apis/{G}/v1",
        Attributes("get", "", "", path=f"/apis/{G}/v1"),
    ),
    ("GET", "/openapi/v3"): ("GET", "/openapi/v3", Attributes("get", "", "", path="/openapi/v3")),
    ("GET", "/openapi/v3/apis/{group}/{version}"): (
        "GET",
        f"/openapi/v3/apis/{G}/v1",
        Attributes("get", "", "", path=f"/openapi/v3/apis/{G}/v1"),
    ),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"): (
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        SELF,
    ),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"): (
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        SELF,
    ),
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews"): (
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        SELF,
    ),
    ("GET", "/apis/{group}/{version}/{plural}"): (
        "GET",
        f"/apis/{G}/v1/files?watch=true",
        Attributes("watch", G, "files"),
    ),
    ("GET", "/apis/{group}/{version}/namespaces/{namespace}/{plural}"): (
        "GET",
        FILES,
        Attributes("list", G, "files", "default"),
    ),
    ("POST", "/apis/{group}/{version}/namespaces/{namespace}/{plural}"): (
        "POST",
        FILES,
        Attributes("create", G, "files", "default"),
    ),
    ("GET", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"): (
        "GET",
        NAMED,
        Attributes("get", G, "files", "default", "index"),
    ),
    ("PUT", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"): (
        "PUT",
        NAMED,
        Attributes("update", G, "files", "default", "index"),
    ),
    ("PATCH", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"): (
        "PATCH",
        NAMED,
        Attributes("patch", G, "files", "default", "index"),
    ),
    ("DELETE", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"): (
        "DELETE",
        f"{NAMED}?dryRun=All",
        Attributes("delete", G, "files", "default", "index"),
    ),
    ("GET", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status"): (
        "GET",
        f"{NAMED}/status",
        Attributes("get", G, "files", "default", "index", "status"),
    ),
    ("PUT", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status"): (
        "PUT",
        f"{NAMED}/status",
        Attributes("update", G, "files", "default", "index", "status"),
    ),
    ("PATCH", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status"): (
        "PATCH",
        f"{NAMED}/status",
        Attributes("patch", G, "files", "default", "index", "status"),
    ),
    ("GET", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/history"): (
        "GET",
        f"{NAMED}/history",
        Attributes("get", G, "files", "default", "index", "history"),
    ),
    # The web view: its page and assets are public (they hold no data); what it reads
    # goes through the API, and its two helpers are non-resource paths.
    ("GET", "/ui"): ("GET", "/ui", None),
    ("GET", "/ui/"): ("GET", "/ui/", None),
    ("GET", "/ui/static"): ("GET", "/ui/static/app.css", None),
    ("GET", "/ui/api/kinds"): ("GET", "/ui/api/kinds", Attributes("get", "", "", path="/ui/api/kinds")),
    ("GET", "/ui/api/access"): ("GET", "/ui/api/access", Attributes("get", "", "", path="/ui/api/access")),
}


class TestEveryRouteIsAuthorized:
    """Each route the app serves asks the authorizer the right question, before anything else."""

    async def test_the_routes_ask_what_kubernetes_asks(self, tmp_path: Path) -> None:
        """Every route of create_app is in the table (a new one must be added), and each
        request asks exactly its attributes, or nothing for the public and self paths."""
        recording = Recording()
        async with api(tmp_path, authorizer=recording) as (_, http):
            app = http._transport.app  # type: ignore[attr-defined]
            served = {
                (method, route.path)
                for route in app.routes
                for method in getattr(route, "methods", None) or {"GET"}  # a Mount: its files
                if method != "HEAD"
            }
            assert served == set(ROUTES)
            for (method, template), (verb, url, expected) in ROUTES.items():
                recording.asked.clear()
                answer = await http.request(verb, url, json={} if verb in {"POST", "PUT", "PATCH"} else None)
                if expected is SELF:
                    assert answer.status_code != 403, (method, template)
                elif expected is None:
                    assert recording.asked == [], (method, template)
                    assert answer.status_code in {200, 308}, (method, template)  # (/ui: to /ui/)
                else:
                    assert recording.asked == [expected], (method, template)
                    assert answer.status_code == 403, (method, template, answer.text)


class TestRbacScoping:
    """Kubernetes' RBAC semantics, checked where a mistake would widen a grant."""

    def test_namespaces_and_resource_names(self, tmp_path: Path) -> None:
        """A RoleBinding in a grants in a only (not b, not across namespaces); resourceNames
        never grant list, watch or a create (which names no object)."""
        path = tmp_path / "rbac.yaml"
        path.write_text(
            """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: edit}
rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"], resourceNames: [only]}
  - {apiGroups: [files.reconcile.dev], resources: [files], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: User, name: carol}]
"""
        )
        rbac = load_rbac(path)
        carol = User("carol", ("system:authenticated",))

        def may(verb: str, namespace: str | None, name: str | None = None) -> bool:
            return rbac.allowed(carol, Attributes(verb, G, "files", namespace, name))

        assert may("list", "a")
        assert may("delete", "a", "only")
        assert not may("delete", "a", "other")
        assert not may("list", "b")
        assert not may("get", "b", "only")
        assert not may("list", None)  # across namespaces needs a ClusterRoleBinding
        assert not rbac.allowed(carol, Attributes("create", "", "secrets", "a"))  # resourceNames: no create
        assert not rbac.allowed(carol, Attributes("list", "", "secrets", "a"))  # nor list
        assert not rbac.allowed(carol, Attributes("watch", "", "secrets", "a"))  # nor watch
        assert rbac.allowed(carol, Attributes("get", "", "secrets", "a", "only"))


class TestWatchesPerClient:
    """One client cannot take every place for a watch."""

    async def test_a_client_holds_at_most_its_share_of_watches(self, tmp_path: Path) -> None:
        """Two watches per client of ten: alice's third is 429 naming the per-client cap;
        bob still gets one; alice's freed place is hers again."""
        limits = WatchLimits(max_watchers=10, max_watchers_per_client=2)

        async def watch_as(app: Any, name: str) -> Stream:
            stream = Stream(app, FILES, {"watch": "true"})
            stream._scope[USER_SCOPE_KEY] = User(name, ("system:authenticated",))
            return await stream.start()

        async with app_over(tmp_path, watch_limits=limits) as (_, app):
            alice = [await watch_as(app, "alice") for _ in range(2)]
            refused = await watch_as(app, "alice")
            await refused.wait_ended()
            bob = await watch_as(app, "bob")
            alice[0].disconnect()
            await alice[0].wait_ended()
            again = await watch_as(app, "alice")
            for stream in (alice[1], bob, again):
                stream.disconnect()
                await stream.wait_ended()
        assert [s.status for s in alice] == [200, 200]
        assert refused.status == 429
        assert "for one client (2)" in refused.json()["message"]
        assert (bob.status, again.status) == (200, 200)


class TestClientsThatTakeNothing:
    """A response nobody reads holds nothing for ever."""

    async def test_a_client_that_never_reads_is_dropped(self, tmp_path: Path) -> None:
        """A 200 MiB response to a socket that reads nothing: the connection is dropped
        after write_timeout (1 s here), so the handler ends (and frees its place)."""
        ended = asyncio.Event()

        async def chunks() -> AsyncIterator[bytes]:
            try:
                for _ in range(200):
                    yield b"x" * 1024 * 1024
            finally:
                ended.set()

        async def big(request: Request) -> Response:
            return StreamingResponse(chunks())

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        async with connect(f"sqlite:///{tmp_path / 'api.db'}") as client:
            app = create_app(client, routes=[Route("/big", big)])
            config = uvicorn.Config(
                app, lifespan="off", log_level="warning", http=protocol_class(10, write_timeout=1)
            )
            server = uvicorn.Server(config)
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            reader = socket.socket()
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                async with asyncio.timeout(30):
                    while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag
                        await asyncio.sleep(0.01)
                    reader.connect(("127.0.0.1", port))
                    reader.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    started = time.monotonic()
                async with asyncio.timeout(15):
                    await ended.wait()
                took = time.monotonic() - started
            finally:
                reader.close()
                server.should_exit = True
                await asyncio.wait_for(serving, 20)
        assert 0.9 < took < 10


class TestUnsecuredAddresses:
    """The unsecured mode (system:masters for every request) on loopback addresses only."""

    @pytest.mark.parametrize("host", ["0.0.0.0", "::", "example.com", "10.0.0.1", "::ffff:10.0.0.1"])  # noqa: S104
    def test_refused_off_loopback(self, host: str) -> None:
        """Every address, IPv6's wildcard and a host name included: a usage error."""
        with pytest.raises(click.UsageError, match="not a loopback address"):
            _security(
                host, token_file=None, client_ca=None, anonymous=False, authorization_config=None, tls={}
            )

    @pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
    def test_served_on_loopback(self, host: str) -> None:
        """Loopback addresses and localhost: the unsecured mode."""
        security = _security(
            host, token_file=None, client_ca=None, anonymous=False, authorization_config=None, tls={}
        )
        assert not security.authenticator.secured
