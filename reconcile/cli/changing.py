"""Changing one stored object in place: what ``patch``, ``label``, ``annotate`` and
``edit`` share.

Each reads the object as the document ``get -o yaml`` shows (its stored body), changes
that document (a merge patch, a JSON patch, a label, the user's editor), and writes what
changed *on the version it read*: the write carries the ``resource_version`` read, so a
change made meanwhile by anyone else (a runner's status aside, which the version covers
too) is a conflict, never silently overwritten. ``patch``, ``label`` and ``annotate``
then read again and redo their change, as kubectl's server-side patch does; ``edit``
cannot redo a person's edit, so it stops and says so.

What a change may touch is one rule, :func:`changes`, as on a Kubernetes API server:
``spec``, ``metadata.labels`` and ``metadata.annotations`` change; ``status`` is the
controllers' and a change to it is ignored (said on stderr); anything else (the name,
the uid, the finalizers...) is refused with its field path. A field the changed document
leaves out is kept (inside spec, labels and annotations, a key left out is removed). A
``metadata.resource_version`` set in the changed document is a precondition, as in
Kubernetes: the write is refused unless the object is still at that version. The write
goes through :meth:`Client.patch <reconcile.api.Client.patch>`, so admission checks the
result exactly as it checks an ``apply``, and the fields it changes are owned by the
verb's field manager (``reconcile-patch``, ``reconcile-edit``, ``reconcile-label``,
``reconcile-annotate``; ``--field-manager`` changes it), as Kubernetes records an
update: taken from any other manager without conflict.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import click

from reconcile.api import Client
from reconcile.api.merging import json_equal, merge_diff
from reconcile.cli.failing import BadInput
from reconcile.cli.main import checked_name
from reconcile.cli.naming import split_names
from reconcile.cli.reading import list_all
from reconcile.cli.rendering import object_data, qualified
from reconcile.cli.settings import Settings
from reconcile.errors import ConflictError, FieldError, InvalidError
from reconcile.model import Kind
from reconcile.model.printing import printable

__all__ = [
    "ATTEMPTS",
    "Change",
    "Target",
    "change_object",
    "changes",
    "field_manager_option",
    "targets",
    "with_manager",
]

_F = TypeVar("_F", bound=Callable[..., Any])

#: How many times a change is redone after a conflict before giving up.
ATTEMPTS = 16
_EDITABLE = ("labels", "annotations")
_READ_ONLY_HINT = "cannot be changed here (only spec, metadata.labels and metadata.annotations can)"


@attrs.frozen
class Target:
    """One object a command changes."""

    kind: Kind
    name: str
    namespace: str

    @property
    def label(self) -> str:
        """``file.files.reconcile.dev/index``."""
        return qualified(self.kind.kind, self.kind.api_group, self.name)


@attrs.frozen
class Change:
    """What one change of a document writes: a merge patch of spec, labels and
    annotations (empty when nothing changed), the version the change was made on (or
    that the document demanded), and whether it also changed status (ignored)."""

    patch: Mapping[str, Any]
    resource_version: int | None
    status_ignored: bool = False


def _refused(path: str, old: Any, new: Any, errors: list[FieldError]) -> None:
    """A field error for each value under ``path`` that differs (a value the new
    document leaves out is not a change: it is kept)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in new:
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                errors.append(FieldError(where, f"unknown field: {_READ_ONLY_HINT}"))
            else:
                _refused(where, old[key], new[key], errors)
    elif not json_equal(old, new):
        errors.append(FieldError(path, _READ_ONLY_HINT))


def changes(old: Mapping[str, Any], new: object, *, subject: str = "") -> Change:
    """What turning document ``old`` into ``new`` writes; InvalidError listing every
    field that may not change."""
    if not isinstance(new, Mapping):
        raise InvalidError([FieldError("", "expected one object (a mapping)")], subject=subject)
    errors: list[FieldError] = []
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata")
    if not isinstance(new_meta, Mapping):
        errors.append(FieldError("metadata", "expected a mapping"))
        new_meta = old_meta
    version = old_meta.get("resourceVersion")
    if "resourceVersion" in new_meta and not json_equal(new_meta["resourceVersion"], version):
        demanded = new_meta["resourceVersion"]
        if isinstance(demanded, bool) or not isinstance(demanded, int):
            errors.append(FieldError("metadata.resourceVersion", "expected an integer (a precondition)"))
        else:
            version = demanded
    rest_old = {k: v for k, v in old.items() if k not in ("spec", "status", "metadata")}
    rest_new = {k: v for k, v in new.items() if k not in ("spec", "status", "metadata")}
    _refused("", rest_old, rest_new, errors)
    keep = (*_EDITABLE, "resourceVersion")
    _refused(
        "metadata",
        {k: v for k, v in old_meta.items() if k not in keep},
        {k: v for k, v in new_meta.items() if k not in keep},
        errors,
    )
    patch: dict[str, Any] = {}
    if "spec" in new and not json_equal(old.get("spec"), new["spec"]):
        if not isinstance(new["spec"], Mapping):
            errors.append(FieldError("spec", "expected a mapping"))
        else:
            patch["spec"] = merge_diff(old.get("spec") or {}, new["spec"])
    for field in _EDITABLE:
        if field not in new_meta:
            continue
        before, after = old_meta.get(field) or {}, new_meta[field]
        after = {} if after is None else after
        if not isinstance(after, Mapping):
            errors.append(FieldError(f"metadata.{field}", "expected a mapping of strings"))
        elif not json_equal(before, after):
            patch.setdefault("metadata", {})[field] = merge_diff(before, after)
    if errors:
        raise InvalidError(errors, subject=subject)
    status_ignored = "status" in new and not json_equal(old.get("status"), new["status"])
    return Change(patch, version, status_ignored)


def field_manager_option(default: str) -> Callable[[_F], _F]:
    """A verb's ``--field-manager`` (the fields its change sets are owned by, as
    kubectl's ``kubectl-patch``, ``kubectl-edit``...; ``default`` when neither it nor
    the global option is given)."""
    return click.option(
        "--field-manager",
        "verb_manager",
        metavar="NAME",
        help=f"The field manager the changed fields are owned by (default: the global "
        f"--field-manager, else {default}).",
    )


def with_manager(settings: Settings, given: str | None, default: str) -> Settings:
    """``settings`` writing under the verb's field manager: ``--field-manager`` of the
    verb, else the global one, else the verb's ``default``."""
    if given is not None:
        return attrs.evolve(settings, field_manager=checked_name("--field-manager", given))
    return attrs.evolve(settings, field_manager=settings.field_manager or default)


def warn_status_ignored() -> None:
    """Say (on stderr) that a change to status was dropped."""
    click.echo("warning: status is written by the controllers; the change to it was ignored", err=True)


async def change_object(
    client: Client,
    target: Target,
    change: Callable[[dict[str, Any]], object],
    *,
    resource_version: int | None = None,
) -> bool:
    """Apply ``change`` (the current document -> the new one) to the object and write
    it on the version read; after a conflict, read and change again (unless
    ``resource_version`` was given, or the new document demanded a version: then the
    conflict is the answer). Whether anything was written."""
    subject = f"{target.kind.kind} {printable(target.name, quoted=True)}"
    for _ in range(ATTEMPTS):
        obj = await client.get(target.kind, target.name, namespace=target.namespace)
        current = obj.metadata.resource_version
        if resource_version is not None and resource_version != current:
            raise ConflictError(_conflict(target, resource_version, current))
        document = object_data(client, obj)
        found = changes(document, change(copy.deepcopy(document)), subject=subject)
        if found.status_ignored:
            warn_status_ignored()
        if found.resource_version != current:
            raise ConflictError(_conflict(target, found.resource_version, current))
        if not found.patch:
            return False
        try:
            await client.patch(
                target.kind, target.name, found.patch, namespace=target.namespace, resource_version=current
            )
        except ConflictError:
            if resource_version is not None:
                raise
            # Changed meanwhile: read it again and redo the change on what is there now
            # (a document that demanded this version fails the check above next time).
            continue
        return True
    raise ConflictError(
        f"{target.label}: changed by others {ATTEMPTS} times while this change was made; try again"
    )


def _conflict(target: Target, expected: int | None, found: int | None) -> str:
    return (
        f"{target.label} was modified: the change was made on resourceVersion {expected}, "
        f"and it is at {found} now; nothing was written"
    )


async def targets(
    client: Client,
    kind: str,
    names: Sequence[str],
    *,
    namespace: str,
    selector: str | None,
) -> list[Target]:
    """The objects ``KIND NAME...``, ``KIND/NAME...`` or ``KIND -l SELECTOR`` (``--all``
    is the empty selector) name."""
    found_kind, found_names = split_names(kind, names)
    assert found_kind is not None
    resolved = client.kinds.resolve(found_kind)
    if selector is not None:
        if found_names:
            raise BadInput("give NAME... or -l SELECTOR/--all, not both")
        listed = await list_all(client, [resolved], namespace, selector)
        return [Target(resolved, obj.metadata.name, namespace) for obj in listed]
    if not found_names:
        raise BadInput(f"which {printable(found_kind)}? give NAME..., -l SELECTOR or --all")
    return [Target(resolved, name, namespace) for name in found_names]
