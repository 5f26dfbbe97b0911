"""Kinds: which ``api_version`` and ``kind`` mean which spec and status classes.

Providers declare their kinds; :mod:`reconcile.model.registry` collects them, per
client (no global state), by hand or from the ``reconcile.providers`` entry-point group
that built-in and third-party providers share. A kind may add a ``validate`` hook for
checks that span fields; it returns field errors with paths relative to ``spec``. A kind
may also add an ``admit`` hook, the equivalent of a Kubernetes mutating admission
webhook: it sees the provider's configuration and the manifest's origin (the file it was
read from), may default and normalise the spec (resolve a relative path against a
configured root), and rejects what the configuration forbids. It runs at admission, so a
rejected manifest stores nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reconcile.errors import FieldError
from reconcile.model.conditions import Status
from reconcile.model.resource import api_group_of
from reconcile.model.spelling import camel

__all__ = ["ENTRY_POINT_GROUP", "AdmissionContext", "Kind", "doc_field"]

ENTRY_POINT_GROUP = "reconcile.providers"


def doc_field(
    doc: str,
    *,
    default: Any = attrs.NOTHING,
    values: Sequence[str] = (),
    validator: Callable[[Any, Any, Any], Any] | Sequence[Callable[[Any, Any, Any], Any]] | None = None,
) -> Any:
    """A spec class's attrs field with its description (and its allowed values), which
    ``reconcile explain KIND`` prints; ``validator`` is attrs' (one or a list), so that
    it replaces ``attrs.field`` everywhere (admission reports its refusal with the path)."""
    metadata: dict[str, Any] = {"doc": doc}
    if values:
        metadata["values"] = tuple(values)
    checks = list(validator) if isinstance(validator, Sequence) else validator
    return attrs.field(default=default, metadata=metadata, validator=checks)


@attrs.frozen
class AdmissionContext:
    """What a kind's ``admit`` hook knows beyond the spec."""

    #: The configuration of the provider that declares the kind (``{}`` when none).
    config: Mapping[str, Any] = attrs.Factory(dict)
    #: The manifest file the object was read from; None when it did not come from a file.
    origin: Path | None = None
    #: The object's ``metadata.name`` (a spec field may default to it: a bucket's name).
    name: str | None = None


@attrs.frozen
class Kind:
    """A kind of resource: its names, its spec and status classes, its extra validation."""

    api_version: str
    kind: str
    spec_type: type[Any]
    status_type: type[Any] = Status
    validate: Callable[[Any], Iterable[FieldError]] | None = None
    #: Defaulting and checks that need the provider's configuration or the outside world:
    #: returns the spec to store, or raises :class:`InvalidError` (paths relative to spec).
    admit: Callable[[Any, AdmissionContext], Any] | None = None
    #: True when the external name follows from the spec alone (a path, a DNS name), so a
    #: create interrupted by a crash can be retried without risk of a duplicate.
    deterministic_identity: bool = False
    #: True when the provider's create is itself the check that the resource is not
    #: somebody else's (an atomic create-if-absent, or a look at the owner mark first):
    #: it raises NotOwnedError, changing nothing, for one that exists and is not this
    #: object's. The engine then creates a resource it has no record of without observing
    #: first (one call instead of two), and ownership is the provider's to report: an
    #: unmarked resource is not counted as an interrupted create of ours (observe reports
    #: one of those with our owner). Needs ``deterministic_identity``.
    exclusive_create: bool = False
    #: True when the provider's delete is itself the check that the resource is this
    #: object's (a conditional delete, or a look at the owner mark first): it raises
    #: NotOwnedError, changing nothing, for one that is not, and succeeds for one that is
    #: gone. The engine then deletes a resource whose create it recorded without
    #: observing first (one call instead of two). Needs ``deterministic_identity``.
    exclusive_delete: bool = False
    #: True when the provider's create makes the resource and its owner mark in one step
    #: (a file linked into place already marked, an object put with its metadata, a DNS
    #: UPDATE carrying the records and the ownership TXT), or makes nothing: after a crash
    #: between the create and its record, observing finds the resource marked as this
    #: object's. The engine then writes no marker before the create: CreateRequested,
    #: CreateSucceeded and the status go in one write after it (two durable writes per
    #: created resource with the apply, not three). A create that marks in a second step
    #: (a bucket tagged after it is made) must leave this False: the pending marker is how
    #: an unmarked resource left by a crash is known as ours. Needs
    #: ``deterministic_identity``.
    atomic_create: bool = False
    short_names: tuple[str, ...] = ()
    #: Spec fields fixed once the object exists (its identity: a path, a bucket name).
    #: Changing one is refused at apply, with the field path; delete and apply again.
    immutable: tuple[str, ...] = ()
    #: Spec fields whose values together name the external resource (a path; a bucket
    #: name; a zone, name and type). Two objects of the kind may not declare the same
    #: one: the second is refused at apply, naming the first.
    identity: tuple[str, ...] = ()
    #: Declarations of this kind an object's cannot coexist with, though they name other
    #: external resources (a DNS CNAME and any other data at one name): given the
    #: unstructured spec, ``(field, other_spec, reason)`` for each identity another live
    #: object must not declare. Apply refuses a conflict with the field path, naming the
    #: other object. Checked against what is stored (and the rest of a bulk apply) before
    #: the write, not in its transaction: two racing applies can both pass, so the
    #: provider still enforces the rule itself. Needs ``identity``.
    conflicts: Callable[[Mapping[str, Any]], Iterable[tuple[str, Mapping[str, Any], str]]] | None = None
    #: How often a Ready resource of this kind is observed again for drift; None: the
    #: Runtime's default. (A Runtime's ``poll_intervals`` overrides both.)
    poll_interval: float | None = None
    #: Reconciles of this kind in flight at once; None: the Runtime's ``workers``. For a
    #: provider that coalesces concurrent changes (the dns provider's UPDATE messages):
    #: a reconcile waiting on a shared message holds no connection, and more in flight
    #: make fuller messages.
    workers: int | None = None

    def __attrs_post_init__(self) -> None:
        for flag in ("exclusive_create", "exclusive_delete", "atomic_create"):
            if getattr(self, flag) and not self.deterministic_identity:
                msg = f"kind {self.kind}: {flag} needs deterministic_identity"
                raise ValueError(msg)
        if self.conflicts is not None and not self.identity:
            msg = f"kind {self.kind}: conflicts needs identity"
            raise ValueError(msg)

    def identity_of(self, spec: Mapping[str, Any]) -> str | None:
        """The identity an unstructured spec declares (``spec.path=/srv/site/a``), or
        None when the kind declares no identity fields."""
        if not self.identity:
            return None
        # Named by the attribute, not the document key: the store keeps these strings
        # (``objects.identity``) and compares them, across releases too.
        return ", ".join(f"spec.{field}={spec.get(camel(field))}" for field in self.identity)

    @functools.cached_property
    def api_group(self) -> str:
        """The API group, the part of ``api_version`` before the slash (computed once:
        every write and every key of the kind asks)."""
        return api_group_of(self.api_version)

    @property
    def plural(self) -> str:
        """The lower-case plural name (``File`` -> ``files``, ``Directory`` -> ``directories``)."""
        lower = self.kind.lower()
        if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u", ""):
            return lower[:-1] + "ies"  # Directory -> directories, Policy -> policies
        return lower + ("es" if lower.endswith(("s", "x", "ch", "sh")) else "s")

    def names(self) -> set[str]:
        """Every name the kind answers to on the command line, lower case."""
        lower = self.kind.lower()
        names = {lower, self.plural, *(s.lower() for s in self.short_names)}
        names |= {f"{n}.{self.api_group}" for n in (lower, self.plural)}
        return names
