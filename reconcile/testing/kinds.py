"""Small example kinds for tests, examples and benchmarks (group example.reconcile.dev)."""

from __future__ import annotations

import attrs

from reconcile.errors import FieldError
from reconcile.model.kinds import Behaviour, Kind
from reconcile.model.registry import KindRegistry

__all__ = [
    "RECORD_SET",
    "WIDGET",
    "Record",
    "RecordSetSpec",
    "WidgetSpec",
    "example_kinds",
]


@attrs.frozen
class WidgetSpec:
    """A widget: a size, a colour and tags."""

    size: int = attrs.field(validator=attrs.validators.ge(0))
    color: str = "blue"
    tags: tuple[str, ...] = ()


@attrs.frozen
class Record:
    """One record of a record set."""

    name: str
    type: str = attrs.field(validator=attrs.validators.in_(("A", "AAAA", "CNAME", "TXT")))
    ttl: int = attrs.field(default=300, validator=attrs.validators.ge(0))
    value: str = ""


@attrs.frozen
class RecordSetSpec:
    """A list of records, for nested field paths (``spec.records[2].ttl``)."""

    zone: str
    records: tuple[Record, ...] = ()


def _validate_record_set(spec: RecordSetSpec) -> list[FieldError]:
    seen: set[tuple[str, str]] = set()
    errors = []
    for index, record in enumerate(spec.records):
        if (record.name, record.type) in seen:
            errors.append(FieldError(f"records[{index}]", f"duplicate {record.type} record {record.name!r}"))
        seen.add((record.name, record.type))
    return errors


WIDGET = Kind("example.reconcile.dev/v1", "Widget", WidgetSpec, short_names=("wd",))
RECORD_SET = Kind(
    "example.reconcile.dev/v1",
    "RecordSet",
    RecordSetSpec,
    validate=_validate_record_set,
    behaviour=Behaviour.IDEMPOTENT_BY_NAME,
)


def example_kinds() -> KindRegistry:
    """A registry holding the example kinds."""
    return KindRegistry([WIDGET, RECORD_SET])
