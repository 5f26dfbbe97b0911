"""Admission: a manifest becomes a canonical, defaulted, validated body, or is rejected.

Everything is checked before anything is stored, and every problem is reported at once
with its field path: every value first (no string without a UTF-8 encoding, no integer
past 64 bits: the one walk of the whole document that every kind gets), the envelope
(``api_version``, ``kind``, unknown top-level fields), the metadata (DNS-1123 names,
qualified label keys, label values), the spec (strict types
and unknown fields through the one converter, the kind's attrs validators and its
``validate`` hook, then its ``admit`` hook with the provider's configuration and the
manifest's origin). Defaults come from the spec class, so the stored object always has its
canonical form and controllers never check for missing fields. ``status`` in a manifest
is ignored: users own spec, controllers own status.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import cattrs

from reconcile.api.fields import converted_paths, declared_paths
from reconcile.errors import (
    AdmissionWarning,
    ConversionError,
    FieldError,
    InvalidError,
    SpellingWarning,
    VersionWarning,
)
from reconcile.model.external import (
    ANNOTATION_ADOPT,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_MANAGEMENT_POLICY,
    ANNOTATION_PAUSED,
    DELETION_POLICIES,
    MANAGEMENT_POLICIES,
)
from reconcile.model.kinds import AdmissionContext, Kind
from reconcile.model.meta import ObjectMeta
from reconcile.model.printing import printable
from reconcile.model.registry import KindRegistry
from reconcile.model.resource import Resource
from reconcile.model.serde import structure_errors
from reconcile.model.spelling import ENVELOPE, Respelled, camel_path, respell_document
from reconcile.model.validation import (
    MAX_DEPTH,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    plain_and_storable,
    qualified_name,
    unstorable,
)
from reconcile.model.versions import KindVersion
from reconcile.store import ADMISSION_HEADROOM, MAX_OBJECT_BYTES
from reconcile.store.encoding import dumps, loads

__all__ = ["MAX_ANNOTATIONS_BYTES", "Admission", "Admitted", "warned"]

_TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status", *ENVELOPE)
MAX_ANNOTATIONS_BYTES = 256 * 1024


@attrs.frozen
class Admitted:
    """A manifest that passed admission: its kind and canonical body (no status)."""

    kind: Kind
    body: dict[str, Any]
    #: The structured spec (an instance of the kind's spec class).
    spec: Any = None
    #: What the caller should hear about, accepted as it was (the old spelling).
    warnings: tuple[str, ...] = ()
    #: The manifest file it was read from, if any (what the kind's hooks are told).
    origin: Path | None = None
    #: Whether the kind's admission hooks ran (:func:`reconcile.api.reviewing.review`).
    reviewed: bool = False
    #: The hooks under ``Ignore`` that broke: each the data of the
    #: ``AdmissionHookIgnored`` event the write records.
    ignored: tuple[Mapping[str, str], ...] = ()
    #: The spec paths the manifest declares, for server-side apply
    #: (:func:`reconcile.api.fields.declared_paths`); None: every field (a typed
    #: Resource declares all of its spec).
    declared: tuple[str, ...] | None = None
    #: The deprecation warning of the version the manifest was written in (also in
    #: ``warnings``), when that version is deprecated.
    deprecation: str | None = None

    @property
    def needs_review(self) -> bool:
        """Whether its kind has admission hooks that have not run on it yet."""
        return bool(self.kind.hooks) and not self.reviewed

    @property
    def hook_warnings(self) -> tuple[str, ...]:
        """What the caller should hear about each hook that broke and was ignored."""
        return tuple(
            f"admission hook {i['hook']} ({i['phase']}) failed and was ignored "
            f"(failurePolicy Ignore): {i['message']}"
            for i in self.ignored
        )

    @property
    def metadata(self) -> dict[str, Any]:
        """The body's metadata mapping."""
        result: dict[str, Any] = self.body["metadata"]
        return result


def warned(admitted: Admitted, *, spelling: bool = True) -> Admitted:
    """``admitted``, its warnings given to Python's :mod:`warnings` (the old spelling as
    :class:`~reconcile.errors.SpellingWarning`, a hook that broke and was ignored as
    :class:`~reconcile.errors.AdmissionWarning`, a deprecated version as
    :class:`~reconcile.errors.VersionWarning`): what the Python API does with them.
    ``spelling=False`` leaves out the spelling's, already given at admission."""
    if spelling and admitted.warnings:
        for message in admitted.warnings:
            category = VersionWarning if message == admitted.deprecation else SpellingWarning
            warnings.warn(message, category, stacklevel=4)
    if admitted.ignored:  # (tested first: the bulk apply calls this per document)
        for message in admitted.hook_warnings:
            warnings.warn(message, AdmissionWarning, stacklevel=4)
    return admitted


#: The engine's annotations whose values it acts on, and the values it understands.
_POLICY_VALUES = {
    ANNOTATION_DELETION_POLICY: DELETION_POLICIES,
    ANNOTATION_MANAGEMENT_POLICY: MANAGEMENT_POLICIES,
    ANNOTATION_PAUSED: ("true", "false"),
    ANNOTATION_ADOPT: ("true", "false"),
}


def policy_value(key: str, value: str) -> list[str]:
    """Why ``value`` is not one the engine understands for its annotation ``key`` (a
    policy the runner would refuse is refused at apply instead: ``orphan`` for
    ``Orphan``)."""
    allowed = _POLICY_VALUES.get(key)
    if allowed is None or value in allowed:
        return []
    hint = next((a for a in allowed if a.lower() == value.lower()), None)
    suffix = f' (did you mean "{hint}"?)' if hint else ""
    return [f"must be one of {', '.join(allowed)}, not {value!r}{suffix}"]


def _meta_errors(meta: ObjectMeta) -> list[FieldError]:
    errors = [FieldError("metadata.name", r) for r in dns1123_subdomain(meta.name)]
    errors += [FieldError("metadata.namespace", r) for r in dns1123_label(meta.namespace)]
    for key, value in meta.labels.items():
        errors += [FieldError(f"metadata.labels[{key!r}]", f"key {r}") for r in qualified_name(key)]
        errors += [FieldError(f"metadata.labels[{key!r}]", r) for r in label_value(value)]
    for key, value in meta.annotations.items():
        errors += [FieldError(f"metadata.annotations[{key!r}]", f"key {r}") for r in qualified_name(key)]
        errors += [FieldError(f"metadata.annotations[{key!r}]", r) for r in policy_value(key, value)]
    size = sum(len(k) + len(v) for k, v in meta.annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        errors.append(FieldError("metadata.annotations", f"must have at most {MAX_ANNOTATIONS_BYTES} bytes"))
    for index, finalizer in enumerate(meta.finalizers):
        errors += [FieldError(f"metadata.finalizers[{index}]", r) for r in qualified_name(finalizer)]
    return errors


def _check_size(body: Mapping[str, Any], subject: Callable[[], str]) -> None:
    """Refuse an object that would leave less than ADMISSION_HEADROOM of the store's
    object size limit for its status: it could be stored, then neither converge nor be
    deleted. Checked here, before anything of a batch is written."""
    text = dumps(body)
    limit = MAX_OBJECT_BYTES - ADMISSION_HEADROOM
    if len(text) > limit // 4 and (size := len(text.encode("utf-8"))) > limit:
        reason = (
            f"object is {size} bytes serialized; at most {limit} may be applied "
            f"(the {MAX_OBJECT_BYTES}-byte object limit less {ADMISSION_HEADROOM} kept for its status)"
        )
        raise InvalidError([FieldError("", reason)], subject=subject())


def _spelling(respelled: Respelled, subject_of: Callable[[], str]) -> tuple[str, ...]:
    """The warning for a document with keys in the old snake_case spelling; InvalidError
    when it mixes both (which spelling was meant is the user's call, not ours)."""
    subject = subject_of()
    if respelled.new:
        beside = respelled.new[0]
        errors = [
            FieldError(old, f'the old spelling, in a document that also has "{beside}": write "{new}"')
            for old, new in respelled.old
        ]
        raise InvalidError(errors, subject=subject)
    message = (
        f"{subject}: written in the old snake_case spelling ({respelled.summary()}); it is read "
        "for this release only: write Kubernetes' camelCase"
    )
    return (message.lstrip(": "),)


#: Label and annotation keys found well formed (a bounded set).
_GOOD_KEYS: set[str] = set()
_MAX_REMEMBERED = 4096


class _Hooks:
    """A converter's structure and unstructure functions by type, each looked up once
    (``converter.get_structure_hook``): what one batch of admissions calls."""

    __slots__ = ("_converter", "_structure", "_unstructure")

    def __init__(self, converter: cattrs.Converter) -> None:
        self._converter = converter
        self._structure: dict[Any, Callable[[Any, Any], Any]] = {}
        self._unstructure: dict[Any, Callable[[Any], Any]] = {}

    def structure(self, type_: Any) -> Callable[[Any, Any], Any]:
        """The function that structures ``type_``."""
        hook = self._structure.get(type_)
        if hook is None:
            hook = self._structure[type_] = self._converter.get_structure_hook(type_)
        return hook

    def unstructure(self, type_: Any) -> Callable[[Any], Any]:
        """The function that unstructures ``type_``."""
        hook = self._unstructure.get(type_)
        if hook is None:
            hook = self._unstructure[type_] = self._converter.get_unstructure_hook(type_)
        return hook


class Admission:
    """Turns manifests (mappings or resources) into admitted bodies."""

    def __init__(
        self,
        kinds: KindRegistry,
        converter: cattrs.Converter,
        provider_config: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.kinds = kinds
        self.converter = converter
        #: Each provider's configuration, by provider name, for the kinds' ``admit`` hooks.
        self.provider_config = dict(provider_config or {})
        self._status_makers: dict[type[Any], Callable[[], dict[str, Any]]] = {}
        self._lenient: cattrs.Converter | None = None
        #: While :meth:`admit_many` runs: the converter's hooks by type, each looked up
        #: once for the batch (None otherwise: every call asks the converter).
        self._hooks: _Hooks | None = None

    def admit_many(
        self,
        manifests: Sequence[Mapping[str, Any] | Resource[Any, Any]],
        origins: Sequence[Path | None] | None = None,
    ) -> list[Admitted | InvalidError]:
        """Admit every manifest in one pass: for each, what :meth:`admit` returns, or the
        InvalidError it raises (its field paths, its subject). The converter's structure
        and unstructure functions are looked up once per type for the whole batch, not
        once per document (a hook registered on the converter meanwhile is seen by the
        next batch)."""
        outer, self._hooks = self._hooks, _Hooks(self.converter)
        results: list[Admitted | InvalidError] = []
        try:
            for index, manifest in enumerate(manifests):
                try:
                    results.append(self.admit(manifest, origin=None if origins is None else origins[index]))
                except InvalidError as exc:
                    results.append(exc)
        finally:
            self._hooks = outer
        return results

    def _structure(self, raw: Mapping[str, Any], type_: type[Any], path: str) -> tuple[Any, list[FieldError]]:
        """``raw`` as ``type_``, or every problem with it. cattrs builds the object only
        when every field structured, and an unknown field is one of its structuring
        errors: the attrs validators (which run in ``__init__``) would never run beside
        it, and ``size: -1`` with a misspelt ``colour`` would report only the misspelling.
        So a failure is structured again ignoring unknown fields, and what that finds
        (the validators' complaints) is reported with it: one InvalidError, every problem.
        The value returned beside errors is that second pass's, when it succeeded, for
        the checks that need a whole object (names, a kind's ``validate``); never stored."""
        try:
            if self._hooks is None:
                return self.converter.structure(raw, type_), []
            return self._hooks.structure(type_)(raw, type_), []
        except Exception as exc:  # noqa: BLE001 - cattrs raises groups of anything
            strict = structure_errors(exc, path)
        if self._lenient is None:
            self._lenient = self.converter.copy(forbid_extra_keys=False)
        value, lenient = None, []
        try:
            value = self._lenient.structure(raw, type_)
        except Exception as exc:  # noqa: BLE001 - cattrs raises groups of anything
            lenient = structure_errors(exc, path)
        return value, [*lenient, *(error for error in strict if error not in lenient)]

    def admit(
        self, manifest: Mapping[str, Any] | Resource[Any, Any], *, origin: Path | None = None
    ) -> Admitted:
        """Validate and default ``manifest``; raise :class:`InvalidError` with every problem.
        ``origin`` is the manifest file it was read from, if any."""
        typed = isinstance(manifest, Resource)
        if typed:
            manifest = self.converter.unstructure(manifest)
        if not isinstance(manifest, Mapping):
            reason = "expected a mapping with apiVersion, kind, metadata and spec"
            raise InvalidError([FieldError("", reason)])
        # Before anything else reads a value: no later check, message or encoder has to
        # cope with a string that cannot be encoded, an integer that cannot be stored or
        # a document nested too deep. One walk answers for nearly every document; the
        # exact checks (with paths) run only when it cannot.
        if not plain_and_storable(manifest, MAX_DEPTH):
            self._check_values(manifest)
        errors = self._envelope_errors(manifest)
        api_version = manifest.get("apiVersion", manifest.get("api_version"))
        kind_name = manifest.get("kind")
        if not isinstance(api_version, str) or not api_version:
            errors.append(FieldError("apiVersion", "required string field missing"))
        if not isinstance(kind_name, str) or not kind_name:
            errors.append(FieldError("kind", "required string field missing"))
        if errors:
            raise InvalidError(errors, subject=self._subject(manifest))
        assert isinstance(api_version, str)
        assert isinstance(kind_name, str)
        kind, version = self._kind(manifest, api_version, kind_name)
        document: Mapping[str, Any] = manifest
        said: tuple[str, ...] = ()
        if "api_version" in manifest:
            # The old spelling's envelope: the document is read in the new spelling (with
            # a warning), or refused when it mixes both. A document with the new envelope
            # is not walked (a few microseconds each): an old key in it is an unknown
            # field to the converter, refused with its new name as the hint.
            spec_type = kind.spec_type if version is None else version.spec_type
            respelled = respell_document(manifest, spec_type, kind.status_type)
            said = _spelling(respelled, lambda: self._subject(manifest)) if respelled.old else ()
            document = respelled.data
        deprecation = None if version is None else version.warning(api_version, kind_name, kind.api_version)
        if deprecation is not None:
            said = (*said, deprecation)
        meta, meta_errors = self._metadata(document.get("metadata"))
        errors.extend(meta_errors)
        name = None if meta is None else meta.name
        spec, spec_errors = self._spec(kind, document.get("spec", {}), origin, name, version)
        errors.extend(spec_errors)
        if errors:
            raise InvalidError(errors, subject=self._subject(document))
        assert meta is not None
        body = {
            "apiVersion": kind.api_version,  # the storage version, whichever was written
            "kind": kind_name,
            "metadata": self._unstructure(meta, ObjectMeta),
            "spec": self._unstructure(spec, kind.spec_type),
        }
        _check_size(body, lambda: self._subject(document))
        declared = None if typed else self._declared(document.get("spec") or {}, body["spec"], version)
        return Admitted(kind, body, spec, said, origin, declared=declared, deprecation=deprecation)

    def _unstructure(self, value: Any, type_: type[Any]) -> Any:
        """``value`` unstructured as ``type_`` (with the batch's hook, in one)."""
        if self._hooks is None:
            return self.converter.unstructure(value, type_)
        return self._hooks.unstructure(type_)(value)

    def _check_values(self, manifest: Mapping[str, Any]) -> None:
        """InvalidError for a document nested too deep, or holding a string without a
        UTF-8 encoding or an integer past 64 bits (every one, with its path)."""
        # Here, not at the top: the manifest reader imports yaml, which the commands that
        # only read (``reconcile get``) should not pay for.
        from reconcile.model.manifests import check_depth  # noqa: PLC0415

        try:
            check_depth(manifest)
        except ValueError as exc:
            raise InvalidError([FieldError("", str(exc))], subject=self._subject(manifest)) from None
        hostile = unstorable(manifest)
        if hostile:
            errors = [FieldError(path, reason) for path, reason in hostile]
            raise InvalidError(errors, subject=self._subject(manifest))

    def _declared(
        self, raw: Mapping[str, Any], spec: Mapping[str, Any], version: KindVersion | None
    ) -> tuple[str, ...]:
        """The spec paths a manifest declares: what it wrote, and for a spoke's manifest
        that mapped to the storage version's paths (:func:`converted_paths`)."""
        if version is None:
            return tuple(declared_paths(raw, spec))

        def old_fields() -> Mapping[str, Any]:
            structured = self.converter.structure(raw, version.spec_type)
            unstructured: Mapping[str, Any] = self.converter.unstructure(structured, version.spec_type)
            return unstructured

        return tuple(converted_paths(raw, spec, version.renamed, old_fields))

    @staticmethod
    def metadata_patch_errors(patches: Mapping[str, Mapping[str, Any]]) -> list[FieldError]:
        """Field errors of a labels/annotations merge patch (None removes a key)."""
        errors = []
        for field, patch in patches.items():
            if not isinstance(patch, Mapping):
                errors.append(FieldError(f"metadata.{field}", "expected a mapping"))
                continue
            hostile = unstorable(patch, f"metadata.{field}")
            if hostile:
                errors += [FieldError(path, reason) for path, reason in hostile]
                continue
            for key, value in patch.items():
                path = f"metadata.{field}[{key!r}]"
                if not isinstance(key, str):
                    errors.append(FieldError(path, "key must be a string"))
                    continue
                if key not in _GOOD_KEYS:
                    reasons = qualified_name(key)
                    errors += [FieldError(path, f"key {r}") for r in reasons]
                    if not reasons and len(_GOOD_KEYS) < _MAX_REMEMBERED:
                        _GOOD_KEYS.add(key)  # the engine's few annotations, checked once
                if value is None:
                    continue
                if not isinstance(value, str):
                    errors.append(FieldError(path, f"expected string, got {type(value).__name__}"))
                elif field == "labels":
                    errors += [FieldError(path, r) for r in label_value(value)]
                else:
                    errors += [FieldError(path, r) for r in policy_value(key, value)]
        return errors

    def default_status(self, kind: Kind) -> dict[str, Any]:
        """The unstructured default status of a kind (a fresh copy each call)."""
        result: dict[str, Any] = self.status_maker(kind)()
        return result

    def status_maker(self, kind: Kind) -> Callable[[], dict[str, Any]]:
        """What makes :meth:`default_status` of a kind: one per status class, kept (each
        of a bulk apply's creates calls it)."""
        status_type = kind.status_type
        maker = self._status_makers.get(status_type)
        if maker is None:
            text = dumps(self.converter.unstructure(status_type()))
            maker = self._status_makers[status_type] = functools.partial(loads, text)
        return maker

    def _kind(
        self, manifest: Mapping[str, Any], api_version: str, kind_name: str
    ) -> tuple[Kind, KindVersion | None]:
        """The manifest's kind, and its version when not the storage version."""
        kind = self.kinds.get(api_version, kind_name)
        if kind is not None:  # (a one-version kind's every manifest: one dict lookup)
            return kind, None
        try:  # another version of a kind (converted), or refused by name
            return self.kinds.lookup_version(api_version, kind_name)
        except InvalidError as exc:
            raise InvalidError(exc.errors, subject=self._subject(manifest)) from None

    @staticmethod
    def _to_storage(kind: Kind, version: KindVersion, spec: Any, name: str | None) -> Any:
        """A spoke's structured spec as the storage version's (ConversionError when the
        kind's function raises or returns something else)."""
        try:
            converted = version.to_storage(spec)
            if not isinstance(converted, kind.spec_type):
                msg = f"the conversion returned {type(converted).__name__}, not {kind.spec_type.__name__}"
                raise TypeError(msg)  # noqa: TRY301 - reported as the others are
        except Exception as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            source = kind.api_version_of(version)
            raise ConversionError(kind.kind, f'"{name}"', source, kind.api_version, reason) from exc
        return converted

    @staticmethod
    def _subject(manifest: Mapping[str, Any]) -> str:
        meta = manifest.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        kind = manifest.get("kind")
        parts = [
            printable(kind) if isinstance(kind, str) else "",
            printable(name, quoted=True) if isinstance(name, str) else "",
        ]
        return " ".join(p for p in parts if p)

    @staticmethod
    def _envelope_errors(manifest: Mapping[str, Any]) -> list[FieldError]:
        errors = []
        for key in manifest:
            if key in _TOP_LEVEL:
                continue
            hint = next(iter(difflib.get_close_matches(str(key), _TOP_LEVEL[:5], n=1)), None)
            reason = f'unknown field (did you mean "{hint}"?)' if hint else "unknown field"
            errors.append(FieldError(str(key), reason))
        return errors

    def _metadata(self, raw: object) -> tuple[ObjectMeta | None, list[FieldError]]:
        if not isinstance(raw, Mapping):
            return None, [FieldError("metadata", "required mapping with at least a name")]
        # Fields the store owns are accepted (they round-trip from get) but not taken,
        # except resource_version, which apply uses as a precondition.
        settable = {
            k: v
            for k, v in raw.items()
            if k not in ("uid", "generation", "creationTimestamp", "deletionTimestamp", "managedFields")
        }
        meta, errors = self._structure(settable, ObjectMeta, "metadata")
        if meta is not None:
            errors.extend(_meta_errors(meta))
        return meta, errors

    def _spec(
        self,
        kind: Kind,
        raw: object,
        origin: Path | None,
        name: str | None = None,
        version: KindVersion | None = None,
    ) -> tuple[Any, list[FieldError]]:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            return None, [FieldError("spec", "expected a mapping")]
        if version is not None:
            spec, refused = self._structure(raw, version.spec_type, "spec")
            if refused or spec is None:
                return spec, refused
            try:  # checked as the storage version's spec from here on
                spec = self._to_storage(kind, version, spec, name)
            except ConversionError as exc:
                return None, [FieldError("spec", str(exc).partition(": ")[2])]
        else:
            spec, refused = self._structure(raw, kind.spec_type, "spec")
        errors = [] if kind.validate is None or spec is None else list(kind.validate(spec))
        if not refused and not errors and kind.admit is not None:
            provider = self.kinds.provider_of(kind)
            config = self.provider_config.get(provider, {}) if provider is not None else {}
            try:
                spec = kind.admit(spec, AdmissionContext(config, origin, name))
            except InvalidError as exc:
                errors = list(exc.errors)
        return spec, [
            *refused,
            *(FieldError(f"spec.{camel_path(e.path)}" if e.path else "spec", e.message) for e in errors),
        ]
