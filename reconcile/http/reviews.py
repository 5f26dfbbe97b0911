"""Asking the server about oneself: ``SelfSubjectAccessReview`` (``kubectl auth can-i
create files``), ``SelfSubjectRulesReview`` (``kubectl auth can-i --list``) and
``SelfSubjectReview`` (``kubectl auth whoami``), listed in discovery beside the kinds
(:func:`serve_reviews`).

A review answers for the request's own user only, so it needs authentication and no
rule: it tells a user nothing about anybody else.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from reconcile.http.context import ApiState, Attributes, Authorizer, User, state, user_of
from reconcile.http.discovery import ServedResource, serve_in_discovery
from reconcile.http.errors import ApiError, Cause
from reconcile.http.protobuf import MAX_REVIEW_BYTES, PROTOBUF, message_fields, unwrap
from reconcile.http.rbac import DISCOVERY_URLS, Rule
from reconcile.http.responses import json_response

__all__ = ["REVIEWS", "auth_routes", "serve_reviews"]

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"

#: The reviews as discovery lists them (:func:`serve_reviews`).
REVIEWS = (
    ServedResource(
        AUTHORIZATION,
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        singular="selfsubjectaccessreview",
    ),
    ServedResource(
        AUTHORIZATION,
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        singular="selfsubjectrulesreview",
    ),
    ServedResource(
        AUTHENTICATION, "v1", "selfsubjectreviews", "SelfSubjectReview", singular="selfsubjectreview"
    ),
)

#: What every authenticated user may read without a rule (Kubernetes' system:discovery).
_DISCOVERY_RULE = {"verbs": ["get"], "nonResourceURLs": sorted(DISCOVERY_URLS)}


#: Field numbers of Kubernetes' generated.proto: the spec's messages and their strings.
_RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}
_ACCESS_SPEC = {
    1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
    2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
}
_RULES_SPEC = {1: "namespace"}
_SPEC_FIELD = 2  # of every review object (1 is its metadata)


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    fields = message_fields(data)
    return {name: fields[number].decode() for number, name in names.items() if fields.get(number)}


def _spec_from_protobuf(body: bytes, kind: str) -> dict[str, Any]:
    """A review's spec from kubectl's protobuf."""
    spec = message_fields(unwrap(body)).get(_SPEC_FIELD, b"")
    if kind == "SelfSubjectRulesReview":
        return _strings(spec, _RULES_SPEC)
    if kind == "SelfSubjectAccessReview":
        fields = message_fields(spec)
        return {
            name: _strings(fields[number], names)
            for number, (name, names) in _ACCESS_SPEC.items()
            if number in fields
        }
    return {}  # SelfSubjectReview has no spec


async def _review(request: Request, kind: str) -> dict[str, Any]:
    media_type = request.headers.get("content-type", "application/json").partition(";")[0].strip()
    body = await request.body()
    if len(body) > MAX_REVIEW_BYTES:
        raise ApiError(413, f"Request entity too large: a {kind} is at most {MAX_REVIEW_BYTES} bytes")
    if media_type == PROTOBUF:
        try:
            return _spec_from_protobuf(body, kind)
        except UnicodeDecodeError:
            raise ApiError(400, f"the protobuf body of a {kind} holds a string that is not UTF-8") from None
    if media_type not in {"application/json", ""}:
        raise ApiError(415, f'the body of a {kind} must be JSON or protobuf, not "{media_type}"')
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ApiError(400, f"the request body must be a {kind} object")
    if document.get("kind", kind) != kind:
        raise ApiError(400, f"the request body is a {document.get('kind')!r}, not a {kind}")
    spec = document.get("spec", {})
    if not isinstance(spec, dict):
        raise ApiError(422, f"{kind}.spec must be an object", causes=[Cause("spec", "must be an object")])
    return spec


def _answer(group: str, kind: str, spec: dict[str, Any], status: dict[str, Any]) -> Response:
    document = {
        "kind": kind,
        "apiVersion": f"{group}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }
    return json_response(document, status=201)


def _resolved_group(request: Request, group: str, resource: str) -> tuple[str, str]:
    """The group of a resource kubectl sent without one (it found no discovery for it):
    ``files.files.reconcile.dev`` names its group; a plural that one group serves is its."""
    if group:
        return group, resource
    served = {(r.group, r.plural) for r in state(request).resources}
    for known_group, plural in served:
        if resource == f"{plural}.{known_group}":
            return known_group, plural
    groups = {g for g, plural in served if plural == resource}
    return (groups.pop(), resource) if len(groups) == 1 else (group, resource)


async def access_review(request: Request) -> Response:
    """``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``."""
    spec = await _review(request, "SelfSubjectAccessReview")
    user = user_of(request)
    other = spec.get("nonResourceAttributes")
    if other is not None:
        path, verb = (other.get(k) if isinstance(other, dict) else None for k in ("path", "verb"))
        if not isinstance(path, str) or not isinstance(verb, str) or not path or not verb:
            raise ApiError(
                422,
                "SelfSubjectAccessReview.spec.nonResourceAttributes: path and verb are required strings",
                causes=[Cause("spec.nonResourceAttributes", "Required value", "FieldValueRequired")],
            )
        allowed = state(request).authorizer.allowed(user, Attributes(verb, "", "", path=path))
        return _answer(AUTHORIZATION, "SelfSubjectAccessReview", spec, {"allowed": allowed})
    attributes = spec.get("resourceAttributes")
    if not isinstance(attributes, dict):
        raise ApiError(
            422,
            "SelfSubjectAccessReview.spec: resourceAttributes or nonResourceAttributes is required",
            causes=[Cause("spec.resourceAttributes", "Required value", "FieldValueRequired")],
        )
    fields = {
        k: attributes.get(k) or None
        for k in ("verb", "group", "resource", "namespace", "name", "subresource")
    }
    for name, value in fields.items():
        if value is not None and not isinstance(value, str):
            raise ApiError(
                422,
                f"SelfSubjectAccessReview.spec.resourceAttributes.{name}: must be a string",
                causes=[Cause(f"spec.resourceAttributes.{name}", "must be a string")],
            )
    for required in ("verb", "resource"):
        if not isinstance(fields[required], str):
            raise ApiError(
                422,
                f"SelfSubjectAccessReview.spec.resourceAttributes.{required}: Required value",
                causes=[Cause(f"spec.resourceAttributes.{required}", "Required value", "FieldValueRequired")],
            )
    group, resource = _resolved_group(request, str(fields["group"] or ""), str(fields["resource"]))
    asked = Attributes(
        str(fields["verb"]), group, resource, fields["namespace"], fields["name"], fields["subresource"]
    )
    allowed = state(request).authorizer.allowed(user, asked)
    return _answer(AUTHORIZATION, "SelfSubjectAccessReview", spec, {"allowed": allowed})


def _rules(authorizer: Authorizer, user: User, namespace: str | None) -> tuple[list[Rule], bool]:
    rules_for = getattr(authorizer, "rules_for", None)
    if rules_for is not None:
        found: list[Rule] = rules_for(user, namespace)
        return found, False
    everything = Rule(frozenset({"*"}), frozenset({"*"}), frozenset({"*"}))
    if authorizer.allowed(user, Attributes("*", "*", "*", namespace)):
        return [everything], False
    return [], True


async def rules_review(request: Request) -> Response:
    """``POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews``."""
    spec = await _review(request, "SelfSubjectRulesReview")
    namespace = spec.get("namespace") or None
    authorizer, user = state(request).authorizer, user_of(request)
    rules, incomplete = _rules(authorizer, user, namespace)
    discovers = authorizer.allowed(user, Attributes("get", "", "", path="/apis"))
    status = {
        "resourceRules": [
            {
                "verbs": sorted(rule.verbs),
                "apiGroups": sorted(rule.api_groups),
                "resources": sorted(rule.resources),
                **({"resourceNames": sorted(rule.resource_names)} if rule.resource_names else {}),
            }
            for rule in rules
            if not rule.non_resource_urls
        ],
        "nonResourceRules": [_DISCOVERY_RULE] * discovers
        + [
            {"verbs": sorted(rule.verbs), "nonResourceURLs": sorted(rule.non_resource_urls)}
            for rule in rules
            if rule.non_resource_urls
        ],
        "incomplete": incomplete,
    }
    return _answer(AUTHORIZATION, "SelfSubjectRulesReview", spec, status)


async def self_review(request: Request) -> Response:
    """``POST /apis/authentication.k8s.io/v1/selfsubjectreviews`` (``kubectl auth whoami``)."""
    spec = await _review(request, "SelfSubjectReview")
    user = user_of(request)
    return _answer(
        AUTHENTICATION,
        "SelfSubjectReview",
        spec,
        {"userInfo": {"username": user.name, "groups": list(user.groups)}},
    )


def auth_routes() -> list[BaseRoute]:
    """The review paths, served before the generic resource paths."""
    return [
        Route(f"/apis/{AUTHORIZATION}/v1/selfsubjectaccessreviews", access_review, methods=["POST"]),
        Route(f"/apis/{AUTHORIZATION}/v1/selfsubjectrulesreviews", rules_review, methods=["POST"]),
        Route(f"/apis/{AUTHENTICATION}/v1/selfsubjectreviews", self_review, methods=["POST"]),
    ]


def serve_reviews(app_state: ApiState) -> None:
    """List the reviews in the app's discovery (``/apis/authorization.k8s.io/v1`` and
    ``authentication.k8s.io``, in both of discovery's forms)."""
    for resource in REVIEWS:
        serve_in_discovery(app_state, resource)
