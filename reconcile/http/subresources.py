"""Subresources: ``.../{name}/status`` (Kubernetes') and ``.../{name}/history`` (ours).

``status`` reads the whole object, as Kubernetes does; a ``PUT`` or a merge or JSON
``PATCH`` of it changes the status alone (whatever else the body holds is ignored, as
for a custom resource with a status subresource), with the resourceVersion as a
precondition when the body gives one. Users own spec, controllers own status: this is
how a controller written against client-go reports what it observed.

``history`` is what Kubernetes cannot answer: every retained event of the object, oldest
first, each with who asked (``user``, the authenticated user of the request that wrote
it), which field manager wrote it (``actor``), and what it changed -- the form of
``reconcile history -o json`` (:func:`reconcile.model.events.event_data`), in a
``History`` object; with ``?includeObject=Object``, each change's item also holds the
document as it stood after it (``object``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import Response

from reconcile.api import Client
from reconcile.errors import NotFoundError
from reconcile.http.context import Target, namespace_or_default, state, target
from reconcile.http.documents import from_wire, to_wire, wire_version
from reconcile.http.options import WriteOptions, write_options
from reconcile.http.patches import read_patch, unsupported_apply
from reconcile.http.presenting import present_object
from reconcile.http.reads import object_key
from reconcile.http.responses import json_response
from reconcile.http.validation import validated
from reconcile.http.writes import acting_client, check_uid, missing, patched, refusals, replacing, respond
from reconcile.model.events import OBJECT_CHANGES, event_data
from reconcile.model.resource import AnyResource

__all__ = ["get_history", "get_status", "patch_status", "replace_status"]

#: The apiVersion of our own extras' documents (``History``).
EXTRAS_VERSION = "reconcile.dev/v1"


async def get_status(request: Request) -> Response:
    """``GET .../{name}/status``: the object."""
    found = target(request, "get", subresource="status")
    client = state(request).client
    stored = client.decoder.current(await client.store.read(object_key(found)))
    if stored is None:
        raise missing(found)
    return present_object(request, found, to_wire(client, found.resource, stored.body))


async def _current(client: Client, found: Target) -> AnyResource:
    assert found.name is not None
    try:
        return await client.get(found.resource.kind, found.name, namespace=namespace_or_default(found))
    except NotFoundError:
        raise missing(found) from None


def _status_writer(client: Client, base: AnyResource, options: WriteOptions) -> Any:
    """What writes a document's status (guarded by its resourceVersion, if any)."""

    async def write(sent: Mapping[str, Any]) -> AnyResource:
        revision = sent["metadata"].get("resourceVersion")
        meta = attrs.evolve(base.metadata, resource_version=revision)
        obj = attrs.evolve(base, metadata=meta, status=sent.get("status") or {})
        return await client.update_status(obj, manager=options.manager, force=revision is None)

    return write


async def replace_status(request: Request) -> Response:
    """``PUT .../{name}/status``: the status alone becomes the body's."""
    put = await replacing(request, subresource="status")
    found, options, document, client = put.found, put.options, put.document, put.client
    assert found.name is not None
    with refusals(found, found.name):
        base = await _current(client, found)
        check_uid(found, document, base.metadata.uid or "")
        write = _status_writer(client, base, options)
        updated, dropped = await validated(
            write, from_wire(document), options.field_validation, found.resource
        )
    return respond(request, found, client, updated, status=200, warnings=dropped)


async def patch_status(request: Request) -> Response:
    """``PATCH .../{name}/status``: a merge or JSON patch of which only the status is
    kept."""
    found = target(request, "patch", subresource="status")
    patch = await read_patch(request)
    if patch.is_apply:
        raise unsupported_apply()
    options = write_options(request, "PatchOptions")
    client = acting_client(request, found, options)
    assert found.name is not None
    with refusals(found, found.name):
        write = _status_writer(client, await _current(client, found), options)
        updated, dropped, _ = await patched(client, found, patch, options, write)
    return respond(request, found, client, updated, status=200, warnings=dropped)


async def get_history(request: Request) -> Response:
    """``GET .../{name}/history``: the object's events, oldest first."""
    found = target(request, "get", subresource="history")
    client = state(request).client
    assert found.name is not None
    try:
        events = await client.history(found.resource.kind, found.name, namespace=namespace_or_default(found))
    except NotFoundError:
        raise missing(found) from None
    items = [event_data(event) for event in events]
    if request.query_params.get("includeObject") == "Object":
        # Each change's document as it stood after it (the web view's revisions and diffs).
        bodies = {
            raw.revision: to_wire(client, found.resource, client.decoder.comparable(raw.body))
            for raw in await client.store.events(object_key(found))
            if raw.body is not None
        }
        for item in items:
            if item["type"] in OBJECT_CHANGES and item["revision"] in bodies:
                item["object"] = bodies[item["revision"]]
    return json_response(
        {
            "apiVersion": EXTRAS_VERSION,
            "kind": "History",
            "metadata": {
                "name": found.name,
                "namespace": namespace_or_default(found),
                "resourceVersion": wire_version(events[-1].revision if events else None),
            },
            "items": items,
        }
    )
