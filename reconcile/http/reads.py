"""Reads: one object (``GET .../{plural}/{name}``) and lists of a kind, in a namespace or
across all (``GET .../{plural}``), with ``labelSelector``, ``limit`` and ``continue``.

Bodies come from the store as stored, brought to the current spelling and storage version
by the client's decoder (nothing structured into attrs classes on the way), then to the
wire form (:mod:`reconcile.http.documents`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from reconcile.api.paging import decode_continue, encode_continue
from reconcile.errors import FieldError, InvalidError
from reconcile.http.context import Target, namespace_or_default, state, target
from reconcile.http.documents import to_wire, wire_version
from reconcile.http.errors import ApiError
from reconcile.http.presenting import present_list, present_object
from reconcile.model import LabelSelector, ObjectKey
from reconcile.store import StoredObject

__all__ = ["get_object", "list_objects", "object_key"]


def object_key(found: Target) -> ObjectKey:
    """The key of the object a request names."""
    assert found.name is not None
    kind = found.resource.kind
    return ObjectKey(kind.api_group, kind.kind, namespace_or_default(found), found.name)


async def get_object(request: Request) -> Response:
    """``GET .../namespaces/{namespace}/{plural}/{name}``."""
    found = target(request, "get")
    client = state(request).client
    stored = client.decoder.current(await client.store.read(object_key(found)))
    if stored is None:
        raise ApiError(
            404,
            f'{found.resource.plural}.{found.resource.group} "{found.name}" not found',
            details={"name": found.name, "group": found.resource.group, "kind": found.resource.plural},
        )
    return present_object(request, found, to_wire(client, found.resource, stored.body))


def _limit(request: Request) -> int | None:
    raw = request.query_params.get("limit")
    if raw in (None, "", "0"):
        return None
    if not raw.isdecimal():
        raise InvalidError([FieldError("limit", f"{raw!r} is not a positive whole number")])
    return int(raw)


async def list_objects(request: Request) -> Response:
    """``GET .../{plural}``: a page of a kind's objects."""
    found = target(request, "list")
    client = state(request).client
    query = request.query_params
    selector = LabelSelector.parse(query.get("labelSelector") or None)
    token = query.get("continue") or None

    def matches(item: StoredObject) -> bool:
        return selector.matches(item.body["metadata"].get("labels") or {})

    kind = found.resource.kind
    page = await client.store.list(
        kind.api_group,
        kind.kind,
        namespace=found.namespace,
        after=None if token is None else decode_continue(token),
        limit=_limit(request),
        predicate=matches if selector.requirements else None,
    )
    documents = []
    for item in page.items:
        current = client.decoder.current(item)
        assert current is not None
        documents.append(to_wire(client, found.resource, current.body))
    return present_list(
        request,
        found,
        documents,
        resource_version=wire_version(page.revision),
        continue_token=None if page.next_after is None else encode_continue(page.next_after),
    )
