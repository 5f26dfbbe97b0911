"""Discovery: what the API serves, in the documents kubectl and the client libraries read
before anything else (``/version``, ``/api``, ``/apis``, ``/apis/{group}``,
``/apis/{group}/{version}``).

Each kind is a resource of its group, in every version it is served in (the storage
version, the group's preferred one, first), with Kubernetes' names: ``files`` (plural),
``file`` (singular), its short names, the categories every kind is in (``all``,
``reconcile``: ``kubectl get reconcile`` lists every kind), namespaced, the verbs, and
its ``status`` subresource.

Two forms answer ``/api`` and ``/apis``, as the apiserver gives them: the legacy one
(``APIVersions``, ``APIGroupList``; a client then asks each group version for its
``APIResourceList``), and the aggregated one (``APIGroupDiscoveryList`` of
``apidiscovery.k8s.io/v2``: every group, version and resource in one document) for a
client whose ``Accept`` asks for it, as kubectl 1.32 does first. The core group (``/api``,
``v1``: pods, services...) is served as Kubernetes' ``v1`` with no resources in it:
clients expect it to be there, and an empty list is what they tolerate best.

Discovery is public to every user who reached the handler (authentication, when the
server has it, runs before): Kubernetes' ``system:discovery`` role, which every
authenticated user holds, says the same.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from reconcile.http.context import state
from reconcile.http.mapping import VERBS, ApiResource, ResourceMap
from reconcile.http.media import accepts_as, media_type
from reconcile.http.responses import json_response

__all__ = [
    "CATEGORIES",
    "KUBERNETES_VERSION",
    "aggregated",
    "discovery_routes",
    "resource_list",
    "version_info",
]

#: The Kubernetes release whose API conventions this API follows (kubectl warns when its
#: own minor version is more than one away from the server's).
KUBERNETES_VERSION = (1, 32)
#: The categories every kind is in: ``kubectl get all`` and ``kubectl get reconcile``.
CATEGORIES = ("all", "reconcile")
#: The verbs of the ``status`` subresource.
STATUS_VERBS = ("get", "patch", "update")
#: Aggregated discovery's media type parameters: group, version, kind.
AGGREGATED = ("apidiscovery.k8s.io", "v2", "APIGroupDiscoveryList")


def _reconcile_version() -> str:
    try:
        return importlib.metadata.version("reconcile-engine")
    except importlib.metadata.PackageNotFoundError:  # a checkout on the path, not installed
        return "0.0.0"


def version_info() -> dict[str, str]:
    """``/version``: Kubernetes' ``version.Info``. ``gitVersion`` is the Kubernetes
    release followed, as a semantic version whose pre-release part names this engine
    (``v1.32.0-reconcile.0.1.0``): clients that compare versions see 1.32."""
    major, minor = KUBERNETES_VERSION
    ours = re.sub(r"[^0-9A-Za-z.]", ".", _reconcile_version())
    ours = ".".join(part.lstrip("0") or "0" if part.isdecimal() else part for part in ours.split(".") if part)
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.0-reconcile.{ours}",
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }


def _group_version(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def _api_group(resources: ResourceMap, group: str, versions: Sequence[str]) -> dict[str, Any]:
    return {
        "name": group,
        "versions": [_group_version(group, v) for v in versions],
        "preferredVersion": _group_version(group, resources.preferred(group)),
    }


def _versions_preferred_first(resources: ResourceMap, group: str, versions: Sequence[str]) -> list[str]:
    preferred = resources.preferred(group)
    return [preferred, *(v for v in versions if v != preferred)]


def resource_list(group_version: str, resources: Sequence[ApiResource]) -> dict[str, Any]:
    """An ``APIResourceList``: each resource and its ``status`` subresource."""
    entries: list[dict[str, Any]] = []
    for resource in sorted(resources, key=lambda r: r.plural):
        kind = resource.kind.kind
        entries.append(
            {
                "name": resource.plural,
                "singularName": resource.singular,
                "namespaced": True,
                "kind": kind,
                "verbs": list(VERBS),
                "shortNames": list(resource.short_names),
                "categories": list(CATEGORIES),
            }
        )
        entries.append(
            {
                "name": f"{resource.plural}/status",
                "singularName": "",
                "namespaced": True,
                "kind": kind,
                "verbs": list(STATUS_VERBS),
            }
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


def _discovered_resource(resource: ApiResource) -> dict[str, Any]:
    response_kind = {"group": resource.group, "version": resource.version, "kind": resource.kind.kind}
    return {
        "resource": resource.plural,
        "responseKind": response_kind,
        "scope": "Namespaced",
        "singularResource": resource.singular,
        "verbs": list(VERBS),
        "shortNames": list(resource.short_names),
        "categories": list(CATEGORIES),
        "subresources": [
            {"subresource": "status", "responseKind": response_kind, "verbs": list(STATUS_VERBS)},
        ],
    }


def aggregated(resources: ResourceMap) -> dict[str, Any]:
    """``/apis`` in the aggregated form: an ``APIGroupDiscoveryList`` of every group,
    its versions (the preferred one first) and their resources."""
    items = []
    for group, versions in resources.groups().items():
        items.append(
            {
                "metadata": {"name": group},
                "versions": [
                    {
                        "version": version,
                        "resources": [
                            _discovered_resource(r)
                            for r in sorted(resources.in_version(group, version), key=lambda r: r.plural)
                        ],
                        "freshness": "Current",
                    }
                    for version in _versions_preferred_first(resources, group, versions)
                ],
            }
        )
    return _aggregated_list(items)


def _aggregated_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    group, version, kind = AGGREGATED
    return {"kind": kind, "apiVersion": f"{group}/{version}", "metadata": {}, "items": items}


#: The core group in the aggregated form: ``v1``, with no resources served in it.
_CORE = {"metadata": {}, "versions": [{"version": "v1", "resources": [], "freshness": "Current"}]}


def _discovery_response(request: Request, legacy: dict[str, Any], aggregate: dict[str, Any]) -> Response:
    """The aggregated form for a client whose ``Accept`` asks for it, else the legacy one
    (``Vary: Accept``: caches keep the two apart)."""
    headers = {"Vary": "Accept"}
    if accepts_as(request, *AGGREGATED):
        response = json_response(aggregate, headers=headers)
        response.headers["content-type"] = media_type(*AGGREGATED)
        return response
    return json_response(legacy, headers=headers)


async def get_version(request: Request) -> Response:  # noqa: ARG001
    """``GET /version``."""
    return json_response(version_info())


async def get_core(request: Request) -> Response:
    """``GET /api``: the core group's versions (``v1``, with nothing in it)."""
    legacy = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    return _discovery_response(request, legacy, _aggregated_list([_CORE]))


async def get_core_v1(request: Request) -> Response:  # noqa: ARG001
    """``GET /api/v1``: the core group's resources (none served here)."""
    return json_response(resource_list("v1", []))


async def get_groups(request: Request) -> Response:
    """``GET /apis``: every group and its versions."""
    resources = state(request).resources
    legacy = {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            _api_group(resources, group, _versions_preferred_first(resources, group, versions))
            for group, versions in resources.groups().items()
        ],
    }
    return _discovery_response(request, legacy, aggregated(resources))


async def get_group(request: Request) -> Response:
    """``GET /apis/{group}``: one group's versions (404 for a group not served)."""
    resources = state(request).resources
    group = request.path_params["group"]
    resources.preferred(group)  # 404 naming the group when it is not served
    versions = _versions_preferred_first(resources, group, resources.groups()[group])
    return json_response({"kind": "APIGroup", "apiVersion": "v1", **_api_group(resources, group, versions)})


async def get_group_version(request: Request) -> Response:
    """``GET /apis/{group}/{version}``: the resources of one group version."""
    group, version = request.path_params["group"], request.path_params["version"]
    found = state(request).resources.in_version(group, version)
    return json_response(resource_list(f"{group}/{version}", found))


def discovery_routes() -> list[BaseRoute]:
    """The discovery paths, served before the resource paths."""
    return [
        Route("/version", get_version, methods=["GET"]),
        Route("/api", get_core, methods=["GET"]),
        Route("/api/v1", get_core_v1, methods=["GET"]),
        Route("/apis", get_groups, methods=["GET"]),
        Route("/apis/{group}", get_group, methods=["GET"]),
        Route("/apis/{group}/{version}", get_group_version, methods=["GET"]),
    ]
