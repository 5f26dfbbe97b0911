"""Request bodies: their media type, their parsing, and the check that the object a body
holds is the one the URL names.

Kubernetes reads a body by its ``Content-Type``: ``application/json`` (the default when
none is given) or ``application/yaml`` for a create or a replace; one of the patch types
for a PATCH (:mod:`reconcile.http.patches`). Anything else is ``415
UnsupportedMediaType`` listing the types it takes. A body that does not parse is ``400
BadRequest`` with the parser's complaint; so is a document whose ``apiVersion``,
``kind``, name or namespace differs from the URL's, with Kubernetes' own messages
(client libraries and people search for them). YAML is read with the same safe loader
as manifest files (no Python tags, aliases counted, duplicate keys refused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from starlette.requests import Request

from reconcile.errors import InvalidError
from reconcile.http.errors import ApiError
from reconcile.http.mapping import ApiResource
from reconcile.model.manifests import check_depth, load_manifests

__all__ = [
    "JSON",
    "OBJECT_TYPES",
    "YAML",
    "check_object",
    "media_type",
    "parse",
    "read_object",
    "unsupported",
]

JSON = "application/json"
YAML = "application/yaml"
#: What a create or a replace takes, in the order a 415 names them.
OBJECT_TYPES = (JSON, YAML)


def media_type(request: Request, default: str | None = JSON) -> str | None:
    """The request's media type, parameters (``; charset=utf-8``) left out, in lower
    case; ``default`` when it names none."""
    raw = request.headers.get("content-type", "")
    found = raw.partition(";")[0].strip().lower()
    return found or default


def unsupported(accepted: Sequence[str]) -> ApiError:
    """Kubernetes' 415 for a body in a media type it does not take."""
    return ApiError(
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def _first_reason(exc: InvalidError) -> str:
    return "; ".join(error.message for error in exc.errors) or str(exc)


def parse(raw: bytes, media: str) -> Any:
    """The body's data, read as JSON or YAML (``media`` ends in ``json`` or ``yaml``);
    400 with the parser's complaint when it does not parse, or is empty."""
    if not raw.strip():
        raise ApiError(400, "the request body is empty: expected an object")
    if media.endswith("yaml"):
        try:
            documents = load_manifests(raw, source="request.yaml")
        except InvalidError as exc:
            raise ApiError(400, f"the request body is not valid YAML: {_first_reason(exc)}") from None
        if len(documents) != 1:
            raise ApiError(400, f"the request body holds {len(documents)} objects: expected one")
        return documents[0].data
    try:
        data = orjson.loads(raw)
        check_depth(data)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    return data


async def read_object(request: Request) -> dict[str, Any]:
    """The object a create or a replace sends (JSON or YAML): a mapping, or a refusal
    (415 for another media type, 400 for a body that is not an object)."""
    media = media_type(request)
    assert media is not None
    if media not in OBJECT_TYPES:
        raise unsupported(OBJECT_TYPES)
    data = parse(await request.body(), media)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body is not an object (expected apiVersion, kind, metadata, spec)")
    return data


def check_object(
    document: Mapping[str, Any],
    resource: ApiResource,
    namespace: str,
    name: str | None,
) -> dict[str, Any]:
    """``document`` checked against the URL (400 with Kubernetes' message when its
    ``apiVersion``, ``kind``, ``metadata.namespace`` or, when the URL names one,
    ``metadata.name`` differ), its namespace filled in from the URL when absent."""
    api_version = document.get("apiVersion")
    kind = document.get("kind")
    if not api_version:
        raise ApiError(400, "Object 'apiVersion' is missing in the request body")
    if not kind:
        raise ApiError(400, "Object 'Kind' is missing in the request body")
    if api_version != resource.group_version:
        raise ApiError(
            400,
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({resource.group_version})",
        )
    if kind != resource.kind.kind:
        raise ApiError(
            400, f"the kind in the data ({kind}) does not match the expected kind ({resource.kind.kind})"
        )
    meta = document.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise ApiError(400, "metadata: expected an object")
    found_namespace = meta.get("namespace")
    if found_namespace not in (None, "") and found_namespace != namespace:
        raise ApiError(
            400, "the namespace of the provided object does not match the namespace sent on the request"
        )
    if name is not None and meta.get("name") != name:
        raise ApiError(
            400,
            f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL ({name})",
        )
    return {**document, "metadata": {**meta, "namespace": namespace}}
