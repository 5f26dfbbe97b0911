"""Documents on the wire: a stored body as kubectl and the client libraries expect it,
and a request's body as the client below expects it.

The store keeps Kubernetes' spelling already (``apiVersion``, ``metadata.resourceVersion``,
camelCase spec fields). What differs on the wire:

* ``metadata.resourceVersion`` is a string (``"42"``): client-go reads it with
  ``NestedString`` and would see an empty version in a number, and so send no
  precondition; a request's string is read back as the number the store counts in;
* ``metadata.managedFields`` is Kubernetes' list of entries (``manager``, ``operation``
  ``Apply`` or ``Update``, ``apiVersion``, ``fieldsType: FieldsV1``, ``fieldsV1``), made
  from our map of a manager to its field paths (:mod:`reconcile.api.fields`); a
  request's ``managedFields`` is ignored, as a server ignores what only it may set;
* null fields of metadata (``deletionTimestamp`` of an object not being deleted), empty
  labels, annotations, finalizers and owner references, and the null optional fields of
  spec and status are left out, as Kubernetes' ``omitempty`` (:mod:`.omitting`: only
  where leaving a field out reads back as the same value);
* a kind's spoke version (``v1alpha1``) is converted from and to its storage version.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import orjson

from reconcile.api import Client
from reconcile.http.errors import ApiError, Cause
from reconcile.http.mapping import ApiResource
from reconcile.model.omitting import omit_empty_metadata, omit_null_fields
from reconcile.model.versions import convert_body

__all__ = ["from_wire", "managed_fields", "parse_resource_version", "to_wire", "wire_version"]

#: The suffix our map gives a manager's non-apply entry (``reconcile-patch (Update)``).
_UPDATE = " (Update)"
#: Our path's first segment -> where it lives in the document.
_METADATA_PATHS = ("labels", "annotations", "finalizers", "ownerReferences")


#: Metadata only the server sets: a request's values are ignored (resourceVersion is read
#: as a precondition).
_SERVER_SET = frozenset(
    {
        "managedFields",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "generation",
        "uid",
        "selfLink",
    }
)


def _unescape(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


def _fields_v1(paths: list[str]) -> dict[str, Any]:
    """Our field paths (``spec/a/b``, ``labels/app``) as a FieldsV1 set
    (``{"f:spec": {"f:a": {"f:b": {}}}}``)."""
    tree: dict[str, Any] = {}
    for path in paths:
        segments = [_unescape(s) for s in path.split("/")]
        if segments[0] in _METADATA_PATHS:
            if segments[0] == "finalizers" and len(segments) > 1:
                segments = ["metadata", "finalizers", f'v:"{segments[1]}"']
            else:
                segments = ["metadata", *segments]
        node = tree
        for segment in segments:
            key = segment if segment.startswith("v:") else f"f:{segment}"
            node = node.setdefault(key, {})
    return tree


def managed_fields(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The object's field managers as Kubernetes' ``managedFields`` entries."""
    meta = body.get("metadata") or {}
    managed = meta.get("managedFields") or {}
    if isinstance(managed, list):  # already in Kubernetes' form
        return managed
    # Built once for each set of managers and fields (a kind's objects mostly share one:
    # building them was most of a list's cost), then decoded afresh for each document,
    # as callers may change theirs.
    key = (body.get("apiVersion"), tuple((name, tuple(paths)) for name, paths in managed.items()))
    entries: list[dict[str, Any]] = orjson.loads(_managed_fields_json(key))
    return entries


@functools.lru_cache(maxsize=1024)
def _managed_fields_json(key: tuple[Any, tuple[tuple[str, tuple[str, ...]], ...]]) -> bytes:
    """:func:`managed_fields`' entries for ``(apiVersion, ((manager, paths), ...))``, as JSON."""
    api_version, managed = key
    entries = []
    for name, paths in sorted(managed):
        update = name.endswith(_UPDATE)
        entries.append(
            {
                "manager": name.removesuffix(_UPDATE),
                "operation": "Update" if update else "Apply",
                "apiVersion": api_version,
                "fieldsType": "FieldsV1",
                "fieldsV1": _fields_v1(list(paths)),
            }
        )
    return orjson.dumps(entries)


def wire_version(revision: int | str | None) -> str:
    """A resource version as the wire spells it (``""`` for none)."""
    return "" if revision is None else str(revision)


def to_wire(client: Client, resource: ApiResource, body: Mapping[str, Any]) -> dict[str, Any]:
    """A stored body as the API returns it in ``resource``'s version."""
    document = dict(body)
    if resource.spoke is not None and document.get("apiVersion") != resource.group_version:
        spoke = resource.spoke
        document = convert_body(
            document,
            to_api_version=resource.group_version,
            from_type=resource.kind.spec_type,
            to_type=spoke.spec_type,
            function=spoke.from_storage,
            structure=client.converter,
            unstructure=client.converter,
        )
    meta = omit_empty_metadata(document.get("metadata") or {})
    meta["resourceVersion"] = wire_version(meta.get("resourceVersion"))
    if meta.get("managedFields"):
        meta["managedFields"] = managed_fields(document)
    else:
        meta.pop("managedFields", None)
    document["metadata"] = meta
    spec_type = resource.spoke.spec_type if resource.spoke is not None else resource.kind.spec_type
    if "spec" in document:
        document["spec"] = omit_null_fields(document["spec"], spec_type)
    if document.get("status") is not None:
        document["status"] = omit_null_fields(document["status"], resource.kind.status_type)
    return document


def parse_resource_version(value: object, field: str = "metadata.resourceVersion") -> int | None:
    """A resource version a request names (a string of digits, or a number) as the
    store's number; None for none (``""``). Anything else is a 400 naming the field."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        value = None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdecimal():
        return int(value)
    raise ApiError(
        400,
        f"{field}: {value!r} is not a resource version this server gave out",
        causes=[Cause(field=field, message="not a resource version")],
    )


def from_wire(document: Mapping[str, Any]) -> dict[str, Any]:
    """A request's document as the client below takes it: ``resourceVersion`` a number
    (or absent), ``managedFields`` and other server-set metadata dropped."""
    result = dict(document)
    meta = document.get("metadata")
    if isinstance(meta, Mapping):
        kept = {k: v for k, v in meta.items() if k not in _SERVER_SET}
        revision = parse_resource_version(meta.get("resourceVersion"))
        if revision is not None:
            kept["resourceVersion"] = revision
        result["metadata"] = kept
    return result
