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

A part of the app that serves a resource of its own beside the kinds' (the
``selfsubjectaccessreviews`` of ``authorization.k8s.io``) lists it with
:func:`serve_in_discovery`; discovery's documents are built once from the kinds and
those (:class:`Catalogue`).

Discovery is public to every user who reached the handler (authentication, when the
server has it, runs before): Kubernetes' ``system:discovery`` role, which every
authenticated user holds, says the same.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from reconcile.http.context import ApiState, authorize_path, state
from reconcile.http.errors import ApiError
from reconcile.http.mapping import VERBS, ApiResource, ResourceMap
from reconcile.http.media import accepts_as, media_type
from reconcile.http.responses import json_response

__all__ = [
    "CATEGORIES",
    "KUBERNETES_VERSION",
    "Catalogue",
    "ServedResource",
    "aggregated",
    "catalogue",
    "discovery_routes",
    "resource_list",
    "serve_in_discovery",
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
#: Where the app's state keeps the resources served beside the kinds, and the catalogue.
SERVED_KEY = "discovery.served"
CATALOGUE_KEY = "discovery.catalogue"


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


@attrs.frozen
class ServedResource:
    """A resource the app serves beside the kinds' (``selfsubjectaccessreviews`` of
    ``authorization.k8s.io/v1``), as discovery lists it; added with
    :func:`serve_in_discovery`. A kind's own resources are listed from the kinds."""

    group: str
    version: str
    #: The URL's name (``selfsubjectaccessreviews``).
    plural: str
    kind: str
    verbs: tuple[str, ...] = ("create",)
    namespaced: bool = False
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: Its subresources, each with its verbs (``{"status": ("get", "patch", "update")}``).
    subresources: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, hash=False)


def serve_in_discovery(app_state: ApiState, resource: ServedResource) -> None:
    """List ``resource`` in the app's discovery documents (its routes are the caller's)."""
    app_state.extras.setdefault(SERVED_KEY, []).append(resource)
    app_state.extras.pop(CATALOGUE_KEY, None)


def _of_kind(resource: ApiResource) -> ServedResource:
    return ServedResource(
        resource.group,
        resource.version,
        resource.plural,
        resource.kind.kind,
        VERBS,
        namespaced=True,
        singular=resource.singular,
        short_names=resource.short_names,
        categories=CATEGORIES,
        subresources={"status": STATUS_VERBS},
    )


@attrs.frozen
class Catalogue:
    """Everything discovery lists: each group's versions (the preferred one first) and
    each group version's resources (sorted by plural)."""

    versions: dict[str, list[str]]
    resources: dict[tuple[str, str], list[ServedResource]]

    @classmethod
    def build(cls, kinds: ResourceMap, served: Sequence[ServedResource] = ()) -> Catalogue:
        """The kinds' resources (the storage version preferred) and those ``served`` beside."""
        versions: dict[str, list[str]] = {}
        resources: dict[tuple[str, str], list[ServedResource]] = {}
        for group, found in kinds.groups().items():
            preferred = kinds.preferred(group)
            versions[group] = [preferred, *(v for v in found if v != preferred)]
        for entry in [*(_of_kind(r) for r in kinds), *served]:
            group_versions = versions.setdefault(entry.group, [])
            if entry.version not in group_versions:
                group_versions.append(entry.version)
            resources.setdefault((entry.group, entry.version), []).append(entry)
        for listed in resources.values():
            listed.sort(key=lambda r: r.plural)
        return cls(dict(sorted(versions.items())), resources)

    def group_versions(self, group: str) -> list[str]:
        """A group's versions, the preferred one first (404 for a group not served)."""
        found = self.versions.get(group)
        if not found:
            raise ApiError(404, f"the server could not find the requested resource (group {group!r})")
        return found

    def in_version(self, group: str, version: str) -> list[ServedResource]:
        """A group version's resources (404 naming what is not served)."""
        if version not in self.group_versions(group):
            raise ApiError(404, f"the server could not find the requested resource ({group}/{version})")
        return self.resources.get((group, version), [])


def catalogue(request: Request) -> Catalogue:
    """The app's catalogue, built once (again after :func:`serve_in_discovery`)."""
    app_state = state(request)
    found = app_state.extras.get(CATALOGUE_KEY)
    if not isinstance(found, Catalogue):
        found = Catalogue.build(app_state.resources, app_state.extras.get(SERVED_KEY, ()))
        app_state.extras[CATALOGUE_KEY] = found
    return found


def _group_version(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def _api_group(group: str, versions: Sequence[str]) -> dict[str, Any]:
    return {
        "name": group,
        "versions": [_group_version(group, v) for v in versions],
        "preferredVersion": _group_version(group, versions[0]),
    }


def resource_list(group_version: str, resources: Sequence[ServedResource]) -> dict[str, Any]:
    """An ``APIResourceList``: each resource, then each of its subresources."""
    entries: list[dict[str, Any]] = []
    for resource in resources:
        entries.append(
            {
                "name": resource.plural,
                "singularName": resource.singular,
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": list(resource.verbs),
                "shortNames": list(resource.short_names),
                "categories": list(resource.categories),
            }
        )
        entries += [
            {
                "name": f"{resource.plural}/{name}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": list(verbs),
            }
            for name, verbs in resource.subresources.items()
        ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


def _discovered_resource(resource: ServedResource) -> dict[str, Any]:
    response_kind = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    return {
        "resource": resource.plural,
        "responseKind": response_kind,
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(resource.verbs),
        "shortNames": list(resource.short_names),
        "categories": list(resource.categories),
        "subresources": [
            {"subresource": name, "responseKind": response_kind, "verbs": list(verbs)}
            for name, verbs in resource.subresources.items()
        ],
    }


def aggregated(found: Catalogue) -> dict[str, Any]:
    """``/apis`` in the aggregated form: an ``APIGroupDiscoveryList`` of every group,
    its versions (the preferred one first) and their resources."""
    items = [
        {
            "metadata": {"name": group},
            "versions": [
                {
                    "version": version,
                    "resources": [_discovered_resource(r) for r in found.in_version(group, version)],
                    "freshness": "Current",
                }
                for version in versions
            ],
        }
        for group, versions in found.versions.items()
    ]
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
    authorize_path(request)
    legacy = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    return _discovery_response(request, legacy, _aggregated_list([_CORE]))


async def get_core_v1(request: Request) -> Response:
    """``GET /api/v1``: the core group's resources (none served here)."""
    authorize_path(request)
    return json_response(resource_list("v1", []))


async def get_groups(request: Request) -> Response:
    """``GET /apis``: every group and its versions."""
    authorize_path(request)
    found = catalogue(request)
    legacy = {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_api_group(group, versions) for group, versions in found.versions.items()],
    }
    return _discovery_response(request, legacy, aggregated(found))


async def get_group(request: Request) -> Response:
    """``GET /apis/{group}``: one group's versions (404 for a group not served)."""
    authorize_path(request)
    group = request.path_params["group"]
    versions = catalogue(request).group_versions(group)
    return json_response({"kind": "APIGroup", "apiVersion": "v1", **_api_group(group, versions)})


async def get_group_version(request: Request) -> Response:
    """``GET /apis/{group}/{version}``: the resources of one group version."""
    authorize_path(request)
    group, version = request.path_params["group"], request.path_params["version"]
    found = catalogue(request).in_version(group, version)
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
