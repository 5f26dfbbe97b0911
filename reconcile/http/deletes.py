"""Deletes: ``DELETE .../namespaces/{namespace}/{plural}/{name}``, with Kubernetes'
``DeleteOptions`` from the query or the body (the body wins, as it does in Kubernetes):
``propagationPolicy`` (``Background``, the default; ``Foreground``; ``Orphan``), the
older ``orphanDependents``, ``preconditions`` (``uid``, ``resourceVersion``: ``409
Conflict`` when the object is not that one any more) and ``dryRun``.

The answer is Kubernetes': ``200`` with the object while finalizers hold it (marked with
its ``deletionTimestamp``), or a ``Status`` of ``Success`` naming it once it is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import Response

from reconcile.api.owning import propagation_policy
from reconcile.errors import InvalidError
from reconcile.http.bodies import OBJECT_TYPES, media_type, parse, unsupported
from reconcile.http.context import Target, namespace_or_default, target
from reconcile.http.documents import parse_resource_version
from reconcile.http.errors import ApiError, Cause
from reconcile.http.options import WriteOptions, boolean, write_options
from reconcile.http.reads import object_key
from reconcile.http.responses import json_response
from reconcile.http.writes import acting_client, check_uid, missing, precondition_failed, refusals, respond

__all__ = ["DeleteOptions", "delete_object", "delete_options"]

_OPTIONS_KINDS = ("DeleteOptions",)
_OPTIONS_VERSIONS = ("v1", "meta.k8s.io/v1")


@attrs.frozen
class DeleteOptions:
    """What a delete asks for."""

    write: WriteOptions
    policy: str = "Background"
    uid: str | None = None
    resource_version: int | None = None
    #: ``orphanDependents: false``: Kubernetes answers a held object with 202.
    cascading: bool = False


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(
        422,
        f'DeleteOptions.meta.k8s.io "" is invalid: {field}: {message}',
        causes=[Cause(field=field, message=message)],
        details={"group": "meta.k8s.io", "kind": "DeleteOptions"},
    )


async def _body(request: Request) -> Mapping[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    media = media_type(request)
    assert media is not None
    if media not in OBJECT_TYPES:
        raise unsupported(OBJECT_TYPES)
    data = parse(raw, media)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body is not DeleteOptions (expected an object)")
    if data.get("kind", "DeleteOptions") not in _OPTIONS_KINDS:
        raise ApiError(400, f"the request body is a {data.get('kind')}, not DeleteOptions")
    if data.get("apiVersion", "v1") not in _OPTIONS_VERSIONS:
        raise ApiError(400, f"DeleteOptions in version {data.get('apiVersion')} is not known")
    return data


def _orphan_dependents(value: object, field: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    found = boolean(value) if isinstance(value, str) else None
    if found is not None:
        return found
    raise _invalid(field, f'Invalid value: "{value}": expected true or false')


async def delete_options(request: Request) -> DeleteOptions:
    """The delete's options: the query's, then the body's ``DeleteOptions``."""
    write = write_options(request, "DeleteOptions")
    body = await _body(request)
    query = request.query_params
    dry_run = body.get("dryRun")
    if dry_run is not None:
        if not isinstance(dry_run, list) or any(value != "All" for value in dry_run):
            raise _invalid("dryRun", f'Unsupported value: {dry_run!r}: supported values: "All"')
        write = attrs.evolve(write, dry_run=write.dry_run or bool(dry_run))
    policy = body.get("propagationPolicy", query.get("propagationPolicy"))
    orphan = _orphan_dependents(
        body.get("orphanDependents", query.get("orphanDependents")), "orphanDependents"
    )
    if policy is not None and orphan is not None:
        raise _invalid(
            "orphanDependents", "Invalid value: Cannot both set OrphanDependents and PropagationPolicy"
        )
    if policy is not None:
        try:
            policy = propagation_policy(str(policy))
        except InvalidError:
            raise _invalid(
                "propagationPolicy",
                f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"',
            ) from None
    else:
        policy = "Orphan" if orphan else "Background"
    preconditions = body.get("preconditions") or {}
    if not isinstance(preconditions, Mapping):
        raise ApiError(400, "preconditions: expected an object")
    uid = preconditions.get("uid")
    revision = parse_resource_version(preconditions.get("resourceVersion"), "preconditions.resourceVersion")
    return DeleteOptions(
        write, policy, None if uid in (None, "") else str(uid), revision, cascading=orphan is False
    )


def _success(found: Target, name: str, uid: str) -> Response:
    return json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": found.resource.group,
                "kind": found.resource.plural,
                "uid": uid,
            },
        }
    )


async def delete_object(request: Request) -> Response:
    """``DELETE .../namespaces/{namespace}/{plural}/{name}``."""
    found = target(request, "delete")
    options = await delete_options(request)
    client = acting_client(request, found, options.write)
    assert found.name is not None
    stored = await client.store.read(object_key(found))
    if stored is None:
        raise missing(found)
    check_uid(found, {"metadata": {"uid": options.uid}}, stored.uid)
    wanted = options.resource_version
    if wanted is not None and wanted != stored.resource_version:
        current = stored.resource_version
        raise precondition_failed(
            found, f"ResourceVersion in precondition: {wanted}, ResourceVersion in object meta: {current}"
        )
    with refusals(found, found.name):
        held = await client.delete(
            found.resource.kind,
            found.name,
            namespace=namespace_or_default(found),
            resource_version=options.resource_version,
            manager=options.write.manager,
            propagation_policy=options.policy,
        )
    if held is None:
        return _success(found, found.name, stored.uid)
    return respond(request, found, client, held, status=202 if options.cascading else 200, warnings=[])
