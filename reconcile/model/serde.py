"""The one cattrs Converter, and the translation of its errors into field paths.

Structuring is strict, as an API server's decoding is: a string is not an integer, an
integer is not a string, ``true`` is not ``1``, and an unknown field is an error that
names the field. cattrs reports every failure at once as an exception group; we walk it
and turn each leaf into a :class:`~reconcile.errors.FieldError` with its path
(``spec.records[2].ttl: must be >= 0``).
"""

from __future__ import annotations

import collections.abc
import datetime
import difflib
import enum
import functools
import math
import re
import time
import typing
from typing import Any

import attrs
import cattrs
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from reconcile.errors import FieldError
from reconcile.model.conditions import Condition, ConditionStatus
from reconcile.model.meta import ObjectMeta, OwnerReference
from reconcile.model.spelling import camel

__all__ = [
    "format_epoch",
    "format_timestamp",
    "make_converter",
    "make_stored_converter",
    "parse_timestamp",
    "structure_errors",
    "structure_stored_meta",
]

_JSON_TYPE_NAMES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "mapping",
    list: "list",
    tuple: "list",
    type(None): "null",
}


def _type_name(value: object) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


class StrictTypeError(TypeError):
    """A value of the wrong JSON type for its field."""


def _strict(expected: type, name: str) -> Any:
    def structure(value: object, type_: Any) -> object:
        if type_ is not expected and isinstance(type_, type) and issubclass(type_, enum.Enum):
            # A hook registered for str also catches StrEnum fields: give them their enum.
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise StrictTypeError(f"expected {name}, got {_type_name(value)}")
            try:
                return type_(value)
            except ValueError:
                allowed = ", ".join(repr(member.value) for member in type_)
                raise StrictTypeError(f"must be one of {allowed}") from None
        if isinstance(value, bool) and expected is not bool:
            raise StrictTypeError(f"expected {name}, got boolean")
        if expected is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, expected):
            raise StrictTypeError(f"expected {name}, got {_type_name(value)}")
        return value

    return structure


#: The datetime formatted last and its text, one tuple replaced whole: a status's
#: conditions that changed together share one stamp (the same object).
_last_formatted: list[tuple[datetime.datetime | None, str]] = [(None, "")]


def format_timestamp(value: datetime.datetime) -> str:
    """RFC 3339 in UTC with microseconds, the form every stored timestamp takes."""
    last, text = _last_formatted[0]
    if value is last:
        return text
    if value.tzinfo is datetime.UTC:  # the common case: "...+00:00" becomes "...Z"
        text = value.isoformat(timespec="microseconds")[:-6] + "Z"
    else:
        utc = value.astimezone(datetime.UTC).replace(tzinfo=None)
        text = utc.isoformat(timespec="microseconds") + "Z"
    _last_formatted[0] = (value, text)
    return text


_MICROS = 1_000_000
#: The last whole second formatted and its text, one tuple replaced whole (so a thread
#: never reads one second's number with another's text).
_second: list[tuple[int, str]] = [(-1, "")]


def format_epoch(seconds: float) -> str:
    """:func:`format_timestamp` of a POSIX time (a clock's reading), without building a
    datetime: the engine stamps every write it makes, and the text of the whole second
    is kept from one call to the next."""
    whole = math.floor(seconds)
    micros = round((seconds - whole) * _MICROS)  # the fraction is exact; half to even, as datetime
    if micros == _MICROS:
        whole, micros = whole + 1, 0
    cached, text = _second[0]
    if whole != cached:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second[0] = (whole, text)
    return f"{text}.{micros:06d}Z"


def structure_stored_meta(meta: dict[str, Any]) -> ObjectMeta:
    """Build ObjectMeta from metadata the store wrote (already validated at admission).

    The API reads every object it returns through here, so it skips the converter's
    per-field checks: about four times faster than ``converter.structure``.
    """
    created, deleted = meta.get("creationTimestamp"), meta.get("deletionTimestamp")
    return ObjectMeta(
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta.get("uid"),
        generation=meta.get("generation", 0),
        resource_version=meta.get("resourceVersion"),
        creation_timestamp=None if created is None else parse_timestamp(created),
        deletion_timestamp=None if deleted is None else parse_timestamp(deleted),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        finalizers=tuple(meta.get("finalizers") or ()),
        owner_references=tuple(_owner_reference(ref) for ref in meta.get("ownerReferences") or ()),
        managed_fields={k: tuple(v) for k, v in (meta.get("managedFields") or {}).items()},
    )


def _owner_reference(ref: dict[str, Any]) -> OwnerReference:
    return OwnerReference(
        ref["apiVersion"],
        ref["kind"],
        ref["name"],
        ref["uid"],
        ref.get("controller", False),
        ref.get("blockOwnerDeletion", False),
    )


def parse_timestamp(value: object, _: object = None) -> datetime.datetime:
    """Parse an RFC 3339 timestamp; a naive one is taken as UTC."""
    if isinstance(value, datetime.datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise StrictTypeError("expected an RFC 3339 timestamp") from None
    else:
        raise StrictTypeError(f"expected an RFC 3339 timestamp, got {_type_name(value)}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed


def make_converter() -> cattrs.Converter:
    """Build the converter every layer shares (one per client: no global state)."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    # Every attrs class, in Kubernetes' spelling: the field ``force_destroy`` is the key
    # ``forceDestroy`` (see reconcile.model.spelling). Made per class when first used,
    # with the settings of the converter that asks (a copy's own, not this one's).
    converter.register_structure_hook_factory(attrs.has, _structure_camel)
    converter.register_unstructure_hook_factory(attrs.has, _unstructure_camel)
    for expected, name in ((str, "string"), (int, "integer"), (float, "number"), (bool, "boolean")):
        converter.register_structure_hook(expected, _strict(expected, name))
    converter.register_structure_hook(datetime.datetime, parse_timestamp)
    converter.register_unstructure_hook(datetime.datetime, format_timestamp)
    # Sequences of plain values unstructure to lists directly; cattrs' generic path calls
    # a handler per element, which was the largest cost of unstructuring a spec.
    converter.register_unstructure_hook_func(_is_plain_sequence, list)
    # Every status the engine records goes through these two: a condition written out
    # field by field (what cattrs makes, without its dispatch per field), and a
    # ``dict[str, Any]`` (a managed status's ``at_provider``) copied as the JSON it is,
    # anything else in it through the converter.
    converter.register_unstructure_hook(Condition, _unstructure_condition)
    converter.register_unstructure_hook_func(_is_conditions, _unstructure_conditions)
    converter.register_unstructure_hook_func(_is_plain_mapping, functools.partial(_plain_copy, converter))
    return converter


def _renames(cls: Any) -> dict[str, Any]:
    fields = attrs.fields(typing.get_origin(cls) or cls)
    return {f.name: override(rename=camel(f.name)) for f in fields if camel(f.name) != f.name}


def _structure_camel(cls: Any, converter: cattrs.Converter) -> Any:
    return make_dict_structure_fn(cls, converter, **_renames(cls))


def _unstructure_camel(cls: Any, converter: cattrs.Converter) -> Any:
    return make_dict_unstructure_fn(cls, converter, **_renames(cls))


def _unstructure_condition(condition: Condition) -> dict[str, Any]:
    at = condition.last_transition_time
    return {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": None if at is None else format_timestamp(at),
        "observedGeneration": condition.observed_generation,
    }


def _unstructure_conditions(conditions: tuple[Condition, ...]) -> list[dict[str, Any]]:
    return [_unstructure_condition(condition) for condition in conditions]


def _is_plain_mapping(type_: Any) -> bool:
    return bool(type_ == dict[str, Any])


_ATOMS = (str, int, float, bool, type(None))


def _plain_copy(converter: cattrs.Converter, value: Any) -> Any:
    """A copy of a JSON-shaped ``value``, new containers all the way down (what
    unstructuring makes); a value of another type through the converter."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _plain_copy(converter, item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_plain_copy(converter, item) for item in value]
    return converter.unstructure(value)


def make_stored_converter() -> cattrs.Converter:
    """The converter for bodies the store wrote: admitted (strictly, with every field's
    path) before they were written, so reading them back skips collecting per-field
    detail, and conditions, in every status, are built directly. Unknown fields and wrong
    types still fail; they just fail without a list of field paths."""
    converter = make_converter().copy(detailed_validation=False)
    converter.register_structure_hook(Condition, _stored_condition)
    converter.register_structure_hook_func(_is_conditions, _stored_conditions)
    return converter


_CONDITION_FIELDS = frozenset(camel(a.name) for a in attrs.fields(Condition))


def _stored_condition(value: dict[str, Any], _: object = None) -> Condition:
    if not value.keys() <= _CONDITION_FIELDS:
        extra = ", ".join(sorted(value.keys() - _CONDITION_FIELDS))
        raise ValueError(f"a stored condition has unknown fields: {extra}")
    at = value.get("lastTransitionTime")
    return Condition(
        value["type"],
        ConditionStatus(value["status"]),
        value.get("reason", ""),
        value.get("message", ""),
        None if at is None else parse_timestamp(at),
        value.get("observedGeneration", 0),
    )


def _stored_conditions(value: list[dict[str, Any]], _: object = None) -> tuple[Condition, ...]:
    return tuple([_stored_condition(item) for item in value])


def _is_conditions(type_: Any) -> bool:
    return typing.get_origin(type_) is tuple and typing.get_args(type_) == (Condition, Ellipsis)


def _is_plain_sequence(type_: Any) -> bool:
    origin = typing.get_origin(type_)
    if origin not in (tuple, list, collections.abc.Sequence):
        return False
    args = typing.get_args(type_)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004
        return False
    return bool(args) and args[0] in (str, int, float, bool)


# attrs' own validators start their message with the quoted attribute name:
# "'ttl' must be >= 0: -1". We lift the name into the path and drop the echoed value.
_ATTRS_MESSAGE = re.compile(r"^'(?P<field>[A-Za-z_][A-Za-z0-9_]*)' (?P<reason>.*?)(?:: .*)?$", re.DOTALL)


def _leaf(exc: BaseException, path: str, fields: tuple[str, ...]) -> list[FieldError]:
    if isinstance(exc, ForbiddenExtraKeysError):
        errors = []
        for extra in sorted(exc.extra_fields):
            hint = [camel(extra)] if camel(extra) in fields else difflib.get_close_matches(extra, fields, n=1)
            reason = f'unknown field (did you mean "{hint[0]}"?)' if hint else "unknown field"
            errors.append(FieldError(_join(path, extra), reason))
        return errors
    if isinstance(exc, KeyError):
        return [FieldError(path, "required field missing")]
    if isinstance(exc, StrictTypeError):
        return [FieldError(path, str(exc))]
    if isinstance(exc, AttributeError) and ("items" in str(exc) or "keys" in str(exc)):
        return [FieldError(path, "expected a mapping")]
    if isinstance(exc, TypeError) and "not iterable" in str(exc):
        return [FieldError(path, "expected a list")]
    # attrs validators raise ValueError(message, attribute, ...): the message comes first.
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    match = _ATTRS_MESSAGE.match(message)
    if match and camel(match["field"]) in fields:
        return [FieldError(_join(path, camel(match["field"])), match["reason"])]
    return [FieldError(path, message or type(exc).__name__)]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def structure_errors(exc: BaseException, path: str = "") -> list[FieldError]:
    """Flatten a cattrs structuring failure into field errors, each with its path."""
    if isinstance(exc, IterableValidationError):
        with_notes, without = exc.group_exceptions()
        errors: list[FieldError] = []
        for inner, note in with_notes:
            errors.extend(structure_errors(inner, f"{path}[{note.index!r}]"))
        for inner in without:
            errors.extend(_leaf(inner, path, ()))
        return errors
    if isinstance(exc, ClassValidationError):
        fields = tuple(camel(a.name) for a in getattr(exc.cl, "__attrs_attrs__", ()))
        with_notes_c, without_c = exc.group_exceptions()
        errors = []
        for inner, class_note in with_notes_c:
            errors.extend(structure_errors(inner, _join(path, camel(class_note.name))))
        for inner in without_c:
            errors.extend(_leaf(inner, path, fields))
        return errors
    return _leaf(exc, path, ())
