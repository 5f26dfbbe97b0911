"""Writes: create (``POST .../{plural}``), replace (``PUT .../{name}``) and patch
(``PATCH .../{name}``: merge, JSON and apply patches), as Kubernetes answers them.

Every write goes through a client acting for the request's user
(:meth:`reconcile.api.Client.acting_as`): the events it appends record that user and
the request's field manager (:mod:`reconcile.http.options`); with ``dryRun=All``, a
client whose writes are rehearsed, so a dry run runs every check a write does and stores
nothing. Unknown fields are handled by ``fieldValidation`` (:mod:`.validation`).

* A create answers ``201`` with the object; an existing one is ``409 AlreadyExists``.
* A replace is an update: spec, labels, annotations, finalizers and owner references
  become the body's; status is ignored. With ``metadata.resourceVersion`` it is
  conditional (``409 Conflict`` when stale); without, unconditional (retried on a
  concurrent change).
* A merge or JSON patch is applied to the object as the URL's version shows it, and
  stored as a replace on the condition that nothing changed meanwhile (retried when
  something did, unless the patch itself names a resourceVersion: then it is a
  precondition). A patch of an immutable field is ``422`` naming it.
* An apply patch is a server-side apply (:meth:`reconcile.api.Client.apply`) under
  ``fieldManager`` (required), ``force=true`` taking over fields others own; ``201``
  when it created the object. One that creates its object needs the ``create`` verb
  besides ``patch``, as in Kubernetes (``patch`` alone only changes what exists).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import attrs
from starlette.requests import Request
from starlette.responses import Response

from reconcile.api import Client
from reconcile.errors import (
    AlreadyExistsError,
    ConflictError,
    FieldConflictError,
    InvalidError,
    NotFoundError,
)
from reconcile.http.bodies import check_object, read_object
from reconcile.http.context import Attributes, Target, authorize, namespace_or_default, state, target
from reconcile.http.documents import from_wire, to_wire
from reconcile.http.errors import ApiError, Cause
from reconcile.http.options import WriteOptions, write_options
from reconcile.http.patches import Patch, read_patch
from reconcile.http.presenting import present_object
from reconcile.http.reads import object_key
from reconcile.http.validation import add_warnings, validated
from reconcile.model.resource import AnyResource

__all__ = [
    "Replacing",
    "acting_client",
    "apply_conflict",
    "check_uid",
    "create_object",
    "missing",
    "patch_object",
    "patched",
    "precondition_failed",
    "refusals",
    "replace_object",
    "replacing",
    "respond",
]

T = TypeVar("T")

#: Tries of an unconditional update or a patch against concurrent changes.
ATTEMPTS = 16
#: What Kubernetes says of an object changed since the resourceVersion a write named
#: (``OptimisticLockErrorMsg``; client-go's ``retry.RetryOnConflict`` users grep for it).
MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"
#: Kubernetes' alphabet of generated name suffixes (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LENGTH = 5
#: The longest prefix a generated name keeps (Kubernetes': 63 less the suffix).
_MAX_PREFIX = 63 - _SUFFIX_LENGTH
#: The suffix our map of managed fields gives a manager's non-apply entry.
_UPDATE = " (Update)"


def acting_client(request: Request, found: Target, options: WriteOptions) -> Client:
    """The app's client acting for the request's user (rehearsing under ``dryRun``)."""
    return state(request).client.acting_as(found.user.name, dry_run=options.dry_run)


def _resource_name(found: Target) -> str:
    return f"{found.resource.plural}.{found.resource.group}"


def missing(found: Target, name: str | None = None) -> ApiError:
    """Kubernetes' 404 for the object the request names."""
    name = name or found.name or ""
    return ApiError(
        404,
        f'{_resource_name(found)} "{name}" not found',
        details={"name": name, "group": found.resource.group, "kind": found.resource.plural},
    )


@contextlib.contextmanager
def refusals(found: Target, name: str) -> Iterator[None]:
    """The client's refusals said as Kubernetes says them about the object ``name``."""
    resource = found.resource
    try:
        yield
    except InvalidError as exc:
        reasons = "; ".join(str(error) for error in exc.errors) or str(exc)
        raise ApiError(
            422,
            f'{resource.kind.kind}.{resource.group} "{name}" is invalid: {reasons}',
            causes=[Cause(field=e.path, message=e.message) for e in exc.errors],
            details={"name": name, "group": resource.group, "kind": resource.kind.kind},
        ) from None
    except AlreadyExistsError:
        raise ApiError(
            409,
            f'{_resource_name(found)} "{name}" already exists',
            reason="AlreadyExists",
            details={"name": name, "group": resource.group, "kind": resource.plural},
        ) from None
    except NotFoundError:
        raise missing(found, name) from None
    except FieldConflictError as exc:
        raise apply_conflict(found, exc) from None
    except ConflictError as exc:
        said = MODIFIED if _changed_meanwhile(exc) else str(exc)
        raise ApiError(
            409,
            f'Operation cannot be fulfilled on {_resource_name(found)} "{name}": {said}',
            details={"name": name, "group": resource.group, "kind": resource.plural},
        ) from None


def _manager_said(manager: str, version: str) -> str:
    """A manager as the apiserver's conflicts name it: ``"M"`` for an applier, ``"M"
    using GV`` for an updater (ours carry the ``(Update)`` suffix)."""
    if manager.endswith(_UPDATE):
        return f'"{manager.removesuffix(_UPDATE)}" using {version}'
    return f'"{manager}"'


def apply_conflict(found: Target, exc: FieldConflictError) -> ApiError:
    """Kubernetes' 409 of an apply that meets other managers' fields (its
    ``NewConflictError``): ``Apply failed with 1 conflict: conflict with "M": .spec.f``,
    a ``FieldManagerConflict`` cause per field, its path with the leading dot."""
    version = found.resource.group_version
    conflicts = [("." + field, _manager_said(manager, version)) for field, manager in exc.conflicts]
    causes = [
        Cause(field=path, message=f"conflict with {said}", reason="FieldManagerConflict")
        for path, said in conflicts
    ]
    if len(conflicts) == 1:
        path, said = conflicts[0]
        return ApiError(409, f"Apply failed with 1 conflict: conflict with {said}: {path}", causes=causes)
    lines = []
    for said in sorted({said for _, said in conflicts}):
        lines.append(f"conflicts with {said}:")
        lines.extend(f"- {path}" for path, other in conflicts if other == said)
    message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, message, causes=causes)


def respond(
    request: Request,
    found: Target,
    client: Client,
    obj: AnyResource | Mapping[str, Any],
    *,
    status: int,
    warnings: list[str],
) -> Response:
    """The written object in the URL's version (``obj`` a resource, or a body)."""
    body = obj if isinstance(obj, Mapping) else client.converter.unstructure(obj)
    response = present_object(request, found, to_wire(client, found.resource, body), status)
    return add_warnings(response, warnings, found.resource)


def check_uid(found: Target, document: Mapping[str, Any], uid: str) -> None:
    """409 when ``document`` names another object of the name (``metadata.uid``, as
    ``get`` gave it: one deleted and created again since), as Kubernetes' precondition."""
    meta = document.get("metadata")
    named = meta.get("uid") if isinstance(meta, Mapping) else None
    if named not in (None, "") and named != uid:
        raise precondition_failed(found, f"UID in precondition: {named}, UID in object meta: {uid}")


def precondition_failed(found: Target, what: str) -> ApiError:
    """Kubernetes' 409 of a precondition not met (its ``Preconditions.Check``, said
    through ``NewConflict``): ``Operation cannot be fulfilled on R "N": Precondition
    failed: WHAT``."""
    name = found.name or ""
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_resource_name(found)} "{name}": Precondition failed: {what}',
        details={"name": name, "group": found.resource.group, "kind": found.resource.plural},
    )


def _with_name(document: dict[str, Any]) -> dict[str, Any]:
    """A create's document with a name: its own, or one made from ``generateName`` (cut
    to 58 characters, as Kubernetes' ``SimpleNameGenerator``, then five random ones)."""
    meta = dict(document["metadata"])
    prefix = meta.pop("generateName", None)
    if not meta.get("name") and isinstance(prefix, str) and prefix:
        suffix = "".join(random.choices(_SUFFIX_ALPHABET, k=_SUFFIX_LENGTH))  # noqa: S311 - not a secret
        meta["name"] = prefix[:_MAX_PREFIX] + suffix
    return {**document, "metadata": meta}


async def create_object(request: Request) -> Response:
    """``POST .../namespaces/{namespace}/{plural}``."""
    found = target(request, "create")
    options = write_options(request, "CreateOptions")
    document = await read_object(request)
    document = _with_name(check_object(document, found.resource, namespace_or_default(found), None))
    meta = document["metadata"]
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        message = "metadata.name: Required value: name or generateName is required"
        raise ApiError(
            422,
            f'{found.resource.kind.kind}.{found.resource.group} "" is invalid: {message}',
            causes=[
                Cause(
                    "metadata.name", "Required value: name or generateName is required", "FieldValueRequired"
                )
            ],
            details={"name": "", "group": found.resource.group, "kind": found.resource.kind.kind},
        )
    if meta.get("resourceVersion") not in (None, ""):
        raise ApiError(400, "resourceVersion should not be set on objects to be created")
    client = acting_client(request, found, options)

    async def create(sent: Mapping[str, Any]) -> AnyResource:
        return await client.create(from_wire(sent), manager=options.manager)

    with refusals(found, name):
        created, dropped = await validated(create, document, options.field_validation, found.resource)
    return respond(request, found, client, created, status=201, warnings=dropped)


def _changed_meanwhile(exc: ConflictError) -> bool:
    """Whether the conflict is the object's change since it was read (worth another try),
    not a refusal that would stand (another field manager's fields, another owner)."""
    return type(exc) is ConflictError


async def _update(
    client: Client, found: Target, document: Mapping[str, Any], options: WriteOptions
) -> tuple[AnyResource | Mapping[str, Any], list[str]]:
    """Replace the object by ``document`` (conditional on its resourceVersion when it has
    one); what was stored (the document itself when the update removed the object) and
    the unknown fields dropped."""
    manifest = from_wire(document)

    async def update(sent: Mapping[str, Any]) -> AnyResource | None:
        return await client.update(sent, manager=options.manager)

    key = object_key(found)
    if manifest["metadata"].get("resourceVersion") is not None:
        stored = await client.store.read(key)
        if stored is None:
            raise missing(found)
        check_uid(found, document, stored.uid)
        updated, dropped = await validated(update, manifest, options.field_validation, found.resource)
        return (document if updated is None else updated), dropped
    for _ in range(ATTEMPTS):
        stored = await client.store.read(key)
        if stored is None:
            raise missing(found)
        check_uid(found, document, stored.uid)
        pinned = {
            **manifest,
            "metadata": {**manifest["metadata"], "resourceVersion": stored.resource_version},
        }
        try:
            updated, dropped = await validated(update, pinned, options.field_validation, found.resource)
        except ConflictError as exc:
            if not _changed_meanwhile(exc):
                raise
            continue
        return (document if updated is None else updated), dropped
    raise ConflictError(f"gave up after {ATTEMPTS} attempts that met concurrent changes")


@attrs.frozen
class Replacing:
    """What a ``PUT`` works with: its target, options, checked body and client."""

    found: Target
    options: WriteOptions
    document: dict[str, Any]
    client: Client


async def replacing(request: Request, *, subresource: str | None = None) -> Replacing:
    """A ``PUT``'s target (allowed to ``update``), options and body, checked against
    the URL (kind, name, namespace), and the client acting for its user."""
    found = target(request, "update", subresource=subresource)
    options = write_options(request, "UpdateOptions")
    document = await read_object(request)
    assert found.name is not None
    document = check_object(document, found.resource, namespace_or_default(found), found.name)
    return Replacing(found, options, document, acting_client(request, found, options))


async def replace_object(request: Request) -> Response:
    """``PUT .../namespaces/{namespace}/{plural}/{name}``."""
    put = await replacing(request)
    found, options, document, client = put.found, put.options, put.document, put.client
    assert found.name is not None
    with refusals(found, found.name):
        updated, dropped = await _update(client, found, document, options)
    return respond(request, found, client, updated, status=200, warnings=dropped)


async def patched(
    client: Client,
    found: Target,
    patch: Patch,
    options: WriteOptions,
    write: Callable[[Mapping[str, Any]], Awaitable[T]],
) -> tuple[T, list[str], dict[str, Any]]:
    """``patch`` applied to the stored object (in the URL's version) and written by
    ``write`` (given the patched document, its resourceVersion the one patched): the
    write's result, the unknown fields dropped and the patched document. Retried on a
    concurrent change unless the patch set the resourceVersion itself."""
    key = object_key(found)
    assert found.name is not None
    for _ in range(ATTEMPTS):
        stored = client.decoder.current(await client.store.read(key))
        if stored is None:
            raise missing(found)
        current = to_wire(client, found.resource, stored.body)
        document = patch.apply_to(current)
        check_uid(found, document, stored.uid)
        meta = document.get("metadata")
        if isinstance(meta, dict) and meta.get("resourceVersion") in (None, ""):
            document["metadata"] = {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}
        document = check_object(document, found.resource, namespace_or_default(found), found.name)
        pinned = document["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]
        try:
            result, dropped = await validated(
                write, from_wire(document), options.field_validation, found.resource
            )
        except ConflictError as exc:
            if pinned or not _changed_meanwhile(exc):
                raise
            continue
        return result, dropped, document
    raise ConflictError(f"gave up after {ATTEMPTS} attempts that met concurrent changes")


async def _apply(request: Request, found: Target, patch: Patch, options: WriteOptions) -> Response:
    assert found.name is not None
    document = check_object(patch.data, found.resource, namespace_or_default(found), found.name)
    client = acting_client(request, found, options)
    stored = await client.store.read(object_key(found))
    existed = stored is not None
    if stored is not None:
        check_uid(found, document, stored.uid)
    else:  # an apply that creates is a create, as Kubernetes authorizes it
        resource = found.resource
        authorize(
            request,
            Attributes("create", resource.group, resource.plural, found.namespace, found.name),
        )

    async def apply(sent: Mapping[str, Any]) -> AnyResource:
        return await client.apply(from_wire(sent), manager=options.manager, force=options.force)

    with refusals(found, found.name):
        applied, dropped = await validated(apply, document, options.field_validation, found.resource)
    return respond(request, found, client, applied, status=200 if existed else 201, warnings=dropped)


async def patch_object(request: Request) -> Response:
    """``PATCH .../namespaces/{namespace}/{plural}/{name}``."""
    found = target(request, "patch")
    patch = await read_patch(request)
    options = write_options(request, "PatchOptions", apply=patch.is_apply)
    if patch.is_apply:
        return await _apply(request, found, patch, options)
    client = acting_client(request, found, options)
    assert found.name is not None

    async def update(sent: Mapping[str, Any]) -> AnyResource | None:
        return await client.update(sent, manager=options.manager)

    with refusals(found, found.name):
        updated, dropped, document = await patched(client, found, patch, options, update)
    return respond(
        request, found, client, document if updated is None else updated, status=200, warnings=dropped
    )
