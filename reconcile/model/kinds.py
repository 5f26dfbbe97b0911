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

Beyond these, which a provider's kinds use, a kind declared by an application (a custom
kind, reconciled by its own controller and no provider) has what a CRD has: its
``printer_columns`` for ``reconcile get`` (:mod:`reconcile.model.columns`) and an
admission chain of mutating and validating hooks with a failure policy each
(:mod:`reconcile.model.hooks`), given as ``hooks=[...]`` or added with the
:meth:`Kind.mutating` and :meth:`Kind.validating` decorators. A kind is served in one
version, its ``api_version``, unless it declares more: ``versions``, each a
:class:`~reconcile.model.versions.KindVersion` converted to and from the kind's own
version, its storage version (the hub; :mod:`reconcile.model.versions`). A kind with no
``versions`` is as it was.
"""

from __future__ import annotations

import enum
import functools
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs

from reconcile.errors import FieldError
from reconcile.model.columns import PrinterColumn
from reconcile.model.conditions import Status
from reconcile.model.hooks import DEFAULT_HOOK_TIMEOUT, AdmissionHook, FailurePolicy, HookFunction
from reconcile.model.resource import api_group_of
from reconcile.model.spelling import camel
from reconcile.model.versions import KindVersion, version_name

__all__ = ["ENTRY_POINT_GROUP", "AdmissionContext", "Behaviour", "Kind", "doc_field"]

ENTRY_POINT_GROUP = "reconcile.providers"

F = TypeVar("F", bound=HookFunction)


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


def _versions(versions: Iterable[KindVersion]) -> tuple[KindVersion, ...]:
    return tuple(versions)


@attrs.frozen
class AdmissionContext:
    """What a kind's ``admit`` hook knows beyond the spec."""

    #: The configuration of the provider that declares the kind (``{}`` when none).
    config: Mapping[str, Any] = attrs.Factory(dict)
    #: The manifest file the object was read from; None when it did not come from a file.
    origin: Path | None = None
    #: The object's ``metadata.name`` (a spec field may default to it: a bucket's name).
    name: str | None = None


class Behaviour(enum.Enum):
    """What the external system (with the provider's calls) guarantees about creating and
    deleting a resource of a kind: one choice, which tells the engine how much it must do
    itself to stop a crash from leaking or duplicating a resource, and to never touch one
    that is somebody else's. From the weakest promise to the strongest; a stronger one
    spares durable writes and provider calls, and a promise the provider does not keep
    costs leaks or foreign resources taken. The conformance kit
    (:mod:`reconcile.testing.conformance`) checks each one's promise.

    Whatever the choice, ``create`` is idempotent for a resource of ours and raises
    ``NotOwnedError`` for one that is not (where names can meet), and ``delete`` of a
    missing one succeeds.
    """

    #: The external system names what it creates (an id it returns): a create interrupted
    #: by a crash cannot be retried safely (it may have made one under a name nobody
    #: recorded), so the engine stops and says so (``CreatePendingUnknown``).
    ASSIGNED_NAME = "AssignedName"
    #: Creating is idempotent by name: the name follows from the spec alone (a path, a DNS
    #: name), so a create interrupted by a crash is retried without risk of a duplicate.
    #: The engine writes a create-pending marker first, and observes before it creates.
    IDEMPOTENT_BY_NAME = "IdempotentByName"
    #: Creating is idempotent by name and marks ownership in the same step, or makes
    #: nothing (a file linked into place already marked): after a crash between the create
    #: and its record, observing finds the resource marked as the object's. The engine
    #: writes no marker before the create (two durable writes per created resource with
    #: the apply, not three). Not for a create that marks in a second step.
    MARKED_ON_CREATE = "MarkedOnCreate"
    #: Create-if-absent and delete-if-ours: the provider's create and delete are
    #: themselves the ownership check (a conditional request, or a look at the owner mark
    #: first); each raises ``NotOwnedError``, changing nothing, for a resource that is not
    #: the object's, and observe reports an interrupted create of its own as marked. The
    #: mark may follow in a second step (a bucket tagged after it is made). The engine
    #: creates a resource it has no record of, and deletes one whose create it recorded,
    #: without observing first (one call instead of two).
    EXCLUSIVE = "Exclusive"
    #: Create-if-absent is atomic and marks ownership (an object put with ``If-None-Match:
    #: *`` and its metadata, a DNS UPDATE carrying the records and the ownership TXT), and
    #: delete-if-ours: both promises above, EXCLUSIVE and MARKED_ON_CREATE.
    EXCLUSIVE_MARKED_ON_CREATE = "ExclusiveMarkedOnCreate"

    @property
    def deterministic_identity(self) -> bool:
        """The name follows from the spec: an interrupted create may be retried."""
        return self is not Behaviour.ASSIGNED_NAME

    @property
    def exclusive_create(self) -> bool:
        """The provider's create refuses a resource that is not ours: no look first."""
        return self in (Behaviour.EXCLUSIVE, Behaviour.EXCLUSIVE_MARKED_ON_CREATE)

    @property
    def exclusive_delete(self) -> bool:
        """The provider's delete refuses a resource that is not ours: no look first."""
        return self.exclusive_create

    @property
    def atomic_create(self) -> bool:
        """The provider's create marks ownership in the same step: no marker before it."""
        return self in (Behaviour.MARKED_ON_CREATE, Behaviour.EXCLUSIVE_MARKED_ON_CREATE)

    @property
    def promise(self) -> str:
        """What the external system guarantees, in a few words."""
        return _PROMISES[self]

    @classmethod
    def from_flags(
        cls,
        kind: str,
        base: Behaviour | None = None,
        *,
        deterministic_identity: bool | None = None,
        exclusive_create: bool | None = None,
        exclusive_delete: bool | None = None,
        atomic_create: bool | None = None,
    ) -> Behaviour:
        """The behaviour the four flags of earlier releases declare (a flag not given keeps
        ``base``'s value, ASSIGNED_NAME's when None); ValueError for a combination no
        behaviour is, saying why."""
        base = base or Behaviour.ASSIGNED_NAME
        flags = {
            "deterministic_identity": base.deterministic_identity,
            "exclusive_create": base.exclusive_create,
            "exclusive_delete": base.exclusive_delete,
            "atomic_create": base.atomic_create,
        }
        given = {
            "deterministic_identity": deterministic_identity,
            "exclusive_create": exclusive_create,
            "exclusive_delete": exclusive_delete,
            "atomic_create": atomic_create,
        }
        flags.update({flag: value for flag, value in given.items() if value is not None})
        for flag in ("exclusive_create", "exclusive_delete", "atomic_create"):
            if flags[flag] and not flags["deterministic_identity"]:
                msg = f"kind {kind}: {flag} needs deterministic_identity"
                raise ValueError(msg)
        wanted = tuple(flags.values())
        for behaviour in cls:
            if wanted == tuple(getattr(behaviour, flag) for flag in flags):
                return behaviour
        one = "exclusive_create" if flags["exclusive_create"] else "exclusive_delete"
        other = "exclusive_delete" if one == "exclusive_create" else "exclusive_create"
        msg = (
            f"kind {kind}: {one} without {other} is no behaviour a kind can declare (a create "
            "and a delete that check ownership themselves go together): declare "
            "behaviour=Behaviour.EXCLUSIVE or EXCLUSIVE_MARKED_ON_CREATE if both check, else "
            "IDEMPOTENT_BY_NAME or MARKED_ON_CREATE (the engine then looks first)"
        )
        raise ValueError(msg)


_PROMISES = {
    Behaviour.ASSIGNED_NAME: "the external system names what it creates",
    Behaviour.IDEMPOTENT_BY_NAME: "creating is idempotent by name",
    Behaviour.MARKED_ON_CREATE: "creating is idempotent by name and marks ownership in the same step",
    Behaviour.EXCLUSIVE: "create-if-absent and delete-if-ours check ownership",
    Behaviour.EXCLUSIVE_MARKED_ON_CREATE: (
        "create-if-absent is atomic and marks ownership; delete-if-ours checks it"
    ),
}
_FLAGS = ("deterministic_identity", "exclusive_create", "exclusive_delete", "atomic_create")


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
    #: What the external system guarantees about creating and deleting one of these (see
    #: :class:`Behaviour`): whether its name follows from the spec, whether a create marks
    #: ownership in the same step, whether create and delete check ownership themselves.
    behaviour: Behaviour = Behaviour.ASSIGNED_NAME
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
    #: The columns ``reconcile get`` shows for the kind after NAME (``-o wide`` adds those
    #: of a priority above 0), as a CRD's additionalPrinterColumns.
    printer_columns: tuple[PrinterColumn, ...] = attrs.field(default=(), converter=tuple)
    #: The admission chain (see :mod:`reconcile.model.hooks`): mutating hooks run in
    #: this order, then validating ones. :meth:`mutating` and :meth:`validating` add to
    #: it after the kind is made (the chain is not part of the kind's equality).
    hooks: list[AdmissionHook] = attrs.field(factory=list, converter=list, eq=False, repr=False)
    #: The other versions it is served in (spokes), each converted to and from
    #: ``api_version``, the storage version (see :mod:`reconcile.model.versions`).
    versions: tuple[KindVersion, ...] = attrs.field(default=(), converter=_versions)
    # The four flags ``behaviour`` replaced, still accepted as keywords for one release
    # (mapped onto the preset, with a DeprecationWarning); read them as the properties below.
    _legacy_deterministic_identity: bool | None = attrs.field(
        default=None, kw_only=True, alias="deterministic_identity", eq=False, repr=False
    )
    _legacy_exclusive_create: bool | None = attrs.field(
        default=None, kw_only=True, alias="exclusive_create", eq=False, repr=False
    )
    _legacy_exclusive_delete: bool | None = attrs.field(
        default=None, kw_only=True, alias="exclusive_delete", eq=False, repr=False
    )
    _legacy_atomic_create: bool | None = attrs.field(
        default=None, kw_only=True, alias="atomic_create", eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        legacy = {flag: value for flag in _FLAGS if (value := getattr(self, f"_legacy_{flag}")) is not None}
        if legacy:
            behaviour = Behaviour.from_flags(self.kind, self.behaviour, **legacy)
            object.__setattr__(self, "behaviour", behaviour)
            for flag in _FLAGS:  # (so that attrs.evolve does not pass them on again)
                object.__setattr__(self, f"_legacy_{flag}", None)
            given = ", ".join(f"{flag}={value}" for flag, value in legacy.items())
            message = (
                f"kind {self.kind}: Kind({given}) is deprecated and will be removed; "
                f"declare behaviour=Behaviour.{behaviour.name} ({behaviour.promise})"
            )
            warnings.warn(message, DeprecationWarning, stacklevel=3)
        if self.conflicts is not None and not self.identity:
            msg = f"kind {self.kind}: conflicts needs identity"
            raise ValueError(msg)
        names = [version_name(self.api_version), *(v.name for v in self.versions)]
        if len(set(names)) != len(names):
            msg = f"kind {self.kind}: a version is declared twice ({', '.join(names)})"
            raise ValueError(msg)

    # -- versions -----------------------------------------------------------------------

    def version(self, api_version: str) -> KindVersion | None:
        """The spoke version of this ``api_version`` (of the kind's group), or None (the
        storage version, or not one of the kind's)."""
        group, _, name = api_version.rpartition("/")
        if group != self.api_group:
            return None
        return next((v for v in self.versions if v.name == name), None)

    def api_version_of(self, version: KindVersion) -> str:
        """The ``api_version`` of one of the kind's versions (``group/name``)."""
        return f"{self.api_group}/{version.name}"

    @property
    def served_versions(self) -> tuple[str, ...]:
        """Every ``api_version`` the kind is served in, the storage version first."""
        return (self.api_version, *(self.api_version_of(v) for v in self.versions if v.served))

    # -- the admission chain ----------------------------------------------------------

    @overload
    def mutating(self, function: F) -> F: ...

    @overload
    def mutating(
        self,
        *,
        failure_policy: FailurePolicy | str = ...,
        timeout: float = ...,
        name: str = ...,
    ) -> Callable[[F], F]: ...

    def mutating(
        self,
        function: Any = None,
        *,
        failure_policy: FailurePolicy | str = FailurePolicy.FAIL,
        timeout: float = DEFAULT_HOOK_TIMEOUT,
        name: str = "",
    ) -> Any:
        """Add a mutating (defaulting) hook to the kind's chain, as a decorator
        (``@SITE.mutating`` or ``@SITE.mutating(failure_policy="Ignore", timeout=2)``):
        it returns the new spec, the new object, or None for no change."""
        return self._hook("mutating", function, failure_policy, timeout, name)

    @overload
    def validating(self, function: F) -> F: ...

    @overload
    def validating(
        self,
        *,
        failure_policy: FailurePolicy | str = ...,
        timeout: float = ...,
        name: str = ...,
    ) -> Callable[[F], F]: ...

    def validating(
        self,
        function: Any = None,
        *,
        failure_policy: FailurePolicy | str = FailurePolicy.FAIL,
        timeout: float = DEFAULT_HOOK_TIMEOUT,
        name: str = "",
    ) -> Any:
        """Add a validating hook to the kind's chain, as a decorator: it returns the
        :class:`~reconcile.errors.FieldError` values it finds (or raises InvalidError)."""
        return self._hook("validating", function, failure_policy, timeout, name)

    def _hook(
        self,
        phase: Any,
        function: HookFunction | None,
        failure_policy: FailurePolicy | str,
        timeout: float,
        name: str,
    ) -> Any:
        def register(hooked: HookFunction) -> HookFunction:
            hook = AdmissionHook(hooked, phase, failure_policy, timeout, name)  # type: ignore[arg-type]
            self.hooks.append(hook)
            return hooked

        return register if function is None else register(function)

    @property
    def mutating_hooks(self) -> tuple[AdmissionHook, ...]:
        """The mutating hooks, in the order they run."""
        return tuple(h for h in self.hooks if h.phase == "mutating")

    @property
    def validating_hooks(self) -> tuple[AdmissionHook, ...]:
        """The validating hooks, in the order they run."""
        return tuple(h for h in self.hooks if h.phase == "validating")

    @property
    def deterministic_identity(self) -> bool:
        """The external name follows from the spec (``behaviour`` is not ASSIGNED_NAME)."""
        return self.behaviour.deterministic_identity

    @property
    def exclusive_create(self) -> bool:
        """The provider's create is the ownership check (an EXCLUSIVE behaviour)."""
        return self.behaviour.exclusive_create

    @property
    def exclusive_delete(self) -> bool:
        """The provider's delete is the ownership check (an EXCLUSIVE behaviour)."""
        return self.behaviour.exclusive_delete

    @property
    def atomic_create(self) -> bool:
        """The provider's create marks ownership in the same step (MARKED_ON_CREATE)."""
        return self.behaviour.atomic_create

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
