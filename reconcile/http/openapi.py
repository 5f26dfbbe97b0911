"""OpenAPI v3: the schema of every kind, as ``kubectl explain`` and kubectl's checks read it.

``/openapi/v3`` is the index: each served group version and the URL of its document,
whose ``hash`` parameter changes when the document does (clients cache by URL).
``/openapi/v3/apis/{group}/{version}`` is one group version's document: a component
schema per kind (``dev.reconcile.files.v1.File``, named as Kubernetes names a CRD's,
with ``x-kubernetes-group-version-kind``), its spec and status generated from the
kind's attrs classes and their field docs (:mod:`reconcile.http.schemas`), its list,
and the paths of its resource with their operations. kubectl reads a PATCH operation's
parameters to learn whether the server validates fields itself (``fieldValidation``).

The documents depend only on the kinds, so they are built once per app, on first use.
``/openapi/v2`` is not served: kubectl 1.32 explains from v3, and a 404 is what
client-go expects of a server without v2.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from reconcile.http.context import authorize_path, state
from reconcile.http.discovery import version_info
from reconcile.http.errors import ApiError
from reconcile.http.mapping import ApiResource, ResourceMap
from reconcile.http.schemas import class_schema, prose
from reconcile.model.fields import class_description

__all__ = ["OpenApiDocuments", "openapi_routes", "schema_name"]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_EXTRAS_KEY = "openapi"
_STRING = {"type": "string"}

_OBJECT_META: dict[str, Any] = {
    "description": "Standard object metadata: what identifies the object, and what the server records of it.",
    "type": "object",
    "properties": {
        "name": {**_STRING, "description": "The object's name, unique in its namespace for its kind."},
        "namespace": {**_STRING, "description": 'The namespace the object is in ("default" when none).'},
        "uid": {**_STRING, "description": "Set by the server: the object's unique id, never reused."},
        "generation": {
            "type": "integer",
            "format": "int64",
            "description": "Set by the server: the version of the spec, raised when the spec changes.",
        },
        "resourceVersion": {
            **_STRING,
            "description": "Set by the server: the revision of the last change (a precondition for writes).",
        },
        "creationTimestamp": {
            **_STRING,
            "format": "date-time",
            "description": "Set by the server: when it was created.",
        },
        "deletionTimestamp": {
            **_STRING,
            "format": "date-time",
            "description": "Set by the server: when its deletion was asked for.",
        },
        "labels": {
            "type": "object",
            "additionalProperties": _STRING,
            "description": "Keys and values to select objects by (labelSelector).",
        },
        "annotations": {
            "type": "object",
            "additionalProperties": _STRING,
            "description": "Keys and values for tools; not selectable.",
        },
        "finalizers": {
            "type": "array",
            "items": _STRING,
            "description": "What must happen before the object is deleted for good.",
        },
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "description": "The objects this one depends on (garbage collection).",
        },
        "managedFields": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "description": "Set by the server: which field manager owns which fields.",
        },
    },
}
_LIST_META: dict[str, Any] = {
    "description": "Standard list metadata.",
    "type": "object",
    "properties": {
        "resourceVersion": {**_STRING, "description": "The revision the list was read at."},
        "continue": {**_STRING, "description": "The token of the next page, if there is one."},
    },
}


def schema_name(group: str, version: str, kind: str) -> str:
    """A kind's component name, as Kubernetes names a CRD's: the group reversed
    (``dev.reconcile.files.v1.File``)."""
    return ".".join([*reversed(group.split(".")), version, kind])


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _gvk(resource: ApiResource, kind: str) -> dict[str, str]:
    return {"group": resource.group, "version": resource.version, "kind": kind}


def _kind_schema(resource: ApiResource) -> dict[str, Any]:
    spec_type = resource.kind.spec_type if resource.spoke is None else resource.spoke.spec_type
    properties: dict[str, Any] = {
        "apiVersion": {**_STRING, "description": f"The version of the schema: {resource.group_version}."},
        "kind": {**_STRING, "description": f"The kind of the object: {resource.kind.kind}."},
        "metadata": {"allOf": [_ref(_META + "ObjectMeta")], "description": "Standard object metadata."},
    }
    for field, cls, what in (
        ("spec", spec_type, f"The desired state of the {resource.kind.kind}, declared by its users."),
        ("status", resource.kind.status_type, "The observed state, reported by the controller."),
    ):
        schema = class_schema(cls) if attrs.has(cls) else {"type": "object"}
        schema["description"] = what
        properties[field] = schema
    return {
        "description": prose(class_description(spec_type)) or f"A {resource.kind.kind}.",
        "type": "object",
        "properties": properties,
        "x-kubernetes-group-version-kind": [_gvk(resource, resource.kind.kind)],
    }


def _list_schema(resource: ApiResource, item: str) -> dict[str, Any]:
    kind = f"{resource.kind.kind}List"
    return {
        "description": f"A list of {resource.plural}.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {**_STRING, "description": f"The version of the schema: {resource.group_version}."},
            "kind": {**_STRING, "description": f"The kind of the list: {kind}."},
            "metadata": {"allOf": [_ref(_META + "ListMeta")], "description": "Standard list metadata."},
            "items": {"type": "array", "items": _ref(item), "description": f"The {resource.plural}."},
        },
        "x-kubernetes-group-version-kind": [_gvk(resource, kind)],
    }


def _parameter(
    name: str, description: str, *, where: str = "query", required: bool = False
) -> dict[str, Any]:
    return {"name": name, "in": where, "description": description, "required": required, "schema": _STRING}


_WRITE_PARAMETERS = [
    _parameter("dryRun", "All: check and answer, store nothing."),
    _parameter("fieldManager", "The name of the actor making the change."),
    _parameter("fieldValidation", "Ignore, Warn or Strict: what to do with unknown or duplicate fields."),
]
_PATCH_PARAMETERS = [*_WRITE_PARAMETERS, _parameter("force", "Server-side apply: take the fields over.")]
_LIST_PARAMETERS = [
    _parameter("labelSelector", "Only objects whose labels match."),
    _parameter("fieldSelector", "Only objects whose metadata.name or metadata.namespace match."),
    _parameter("limit", "At most this many objects; a continue token for the rest."),
    _parameter("continue", "The token of the page to read."),
    _parameter("resourceVersion", "The revision to read at, or watch from."),
    _parameter("watch", "Stream the changes instead of reading once."),
]


#: The bodies each writing action takes. PATCH lists no strategic merge patch: kubectl
#: reads this list, and sends a JSON merge patch to a kind whose PATCH does not take one
#: (as it does for a CRD's).
_BODIES = {
    "post": ("application/json", "application/yaml"),
    "put": ("application/json", "application/yaml"),
    "patch": ("application/merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml"),
}


def _operation(
    resource: ApiResource, action: str, kind: str, parameters: list[dict[str, Any]]
) -> dict[str, Any]:
    item = _ref(schema_name(resource.group, resource.version, kind))
    operation: dict[str, Any] = {
        "operationId": f"{action}{resource.kind.kind}",
        "parameters": parameters,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": item}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(resource, resource.kind.kind),
    }
    if action in _BODIES:
        body_schema = item if action != "patch" else {"type": "object"}
        content = {media: {"schema": body_schema} for media in _BODIES[action]}
        operation["requestBody"] = {"required": True, "content": content}
    return operation


def _paths(resource: ApiResource) -> dict[str, Any]:
    kind, listed = resource.kind.kind, f"{resource.kind.kind}List"
    prefix = f"/apis/{resource.group}/{resource.version}"
    namespaced = f"{prefix}/namespaces/{{namespace}}/{resource.plural}"
    namespace = [_parameter("namespace", "The object's namespace.", where="path", required=True)]
    named = [*namespace, _parameter("name", "The object's name.", where="path", required=True)]
    one = {
        "get": _operation(resource, "get", kind, named),
        "put": _operation(resource, "put", kind, [*named, *_WRITE_PARAMETERS]),
        "patch": _operation(resource, "patch", kind, [*named, *_PATCH_PARAMETERS]),
        "delete": _operation(resource, "delete", kind, [*named, _parameter("dryRun", "All: store nothing.")]),
    }
    return {
        f"{prefix}/{resource.plural}": {"get": _operation(resource, "list", listed, _LIST_PARAMETERS)},
        namespaced: {
            "get": _operation(resource, "list", listed, [*namespace, *_LIST_PARAMETERS]),
            "post": _operation(resource, "post", kind, [*namespace, *_WRITE_PARAMETERS]),
        },
        f"{namespaced}/{{name}}": one,
        f"{namespaced}/{{name}}/status": {verb: one[verb] for verb in ("get", "put", "patch")},
    }


def group_version_document(resources: list[ApiResource]) -> dict[str, Any]:
    """The OpenAPI document of one group version's resources."""
    schemas: dict[str, Any] = {_META + "ObjectMeta": _OBJECT_META, _META + "ListMeta": _LIST_META}
    paths: dict[str, Any] = {}
    for resource in sorted(resources, key=lambda r: r.plural):
        name = schema_name(resource.group, resource.version, resource.kind.kind)
        schemas[name] = _kind_schema(resource)
        schemas[f"{name}List"] = _list_schema(resource, name)
        paths.update(_paths(resource))
    return {
        "openapi": "3.0.0",
        "info": {"title": "reconcile", "version": version_info()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


@attrs.frozen
class OpenApiDocuments:
    """Every group version's document, encoded, and its hash (the index's URLs)."""

    #: ``"apis/{group}/{version}"`` -> the encoded document.
    encoded: dict[str, bytes]

    @classmethod
    def build(cls, resources: ResourceMap) -> OpenApiDocuments:
        """The documents of every served group version."""
        encoded = {}
        for group, versions in resources.groups().items():
            for version in versions:
                document = group_version_document(resources.in_version(group, version))
                encoded[f"apis/{group}/{version}"] = orjson.dumps(document)
        return cls(encoded)

    def index(self) -> dict[str, Any]:
        """``/openapi/v3``: each group version's URL, with its document's hash."""
        return {
            "paths": {
                path: {
                    "serverRelativeURL": f"/openapi/v3/{path}?hash={hashlib.sha512(body).hexdigest().upper()}"
                }
                for path, body in sorted(self.encoded.items())
            }
        }


def _documents(request: Request) -> OpenApiDocuments:
    extras = state(request).extras
    found = extras.get(_EXTRAS_KEY)
    if not isinstance(found, OpenApiDocuments):
        found = extras[_EXTRAS_KEY] = OpenApiDocuments.build(state(request).resources)
    return found


async def get_index(request: Request) -> Response:
    """``GET /openapi/v3``."""
    authorize_path(request)
    return Response(orjson.dumps(_documents(request).index()), media_type="application/json")


async def get_document(request: Request) -> Response:
    """``GET /openapi/v3/apis/{group}/{version}`` (404 for a group version not served)."""
    authorize_path(request)
    group, version = request.path_params["group"], request.path_params["version"]
    body = _documents(request).encoded.get(f"apis/{group}/{version}")
    if body is None:
        state(request).resources.in_version(group, version)  # 404 naming what is unknown
        raise ApiError(404, f"the server could not find the requested resource ({group}/{version})")
    return Response(body, media_type="application/json")


def openapi_routes() -> list[BaseRoute]:
    """The OpenAPI paths."""
    return [
        Route("/openapi/v3", get_index, methods=["GET"]),
        Route("/openapi/v3/apis/{group}/{version}", get_document, methods=["GET"]),
    ]
