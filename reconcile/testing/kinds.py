"""Small example kinds for tests, examples and benchmarks (group example.reconcile.dev).

``Gizmo`` is served in two versions: ``v1`` (its storage version: ``colors``, a list,
and a ``note``) and ``v1alpha1`` (one ``color``), converted hub and spoke
(:mod:`reconcile.model.versions`)."""

from __future__ import annotations

import attrs

from reconcile.errors import FieldError
from reconcile.model.kinds import Behaviour, Kind
from reconcile.model.registry import KindRegistry
from reconcile.model.versions import KindVersion

__all__ = [
    "GIZMO",
    "GIZMO_V1ALPHA1",
    "RECORD_SET",
    "WIDGET",
    "GizmoSpec",
    "GizmoV1Alpha1Spec",
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


@attrs.frozen
class GizmoSpec:
    """A gizmo in its storage version (v1): a size, its colours, a note."""

    size: int = attrs.field(validator=attrs.validators.ge(0))
    colors: tuple[str, ...] = ("blue",)
    note: str = ""


@attrs.frozen
class GizmoV1Alpha1Spec:
    """A gizmo as v1alpha1 spelled it: a size and one colour (no note)."""

    size: int = attrs.field(validator=attrs.validators.ge(0))
    color: str = "blue"


def _gizmo_to_v1(spec: GizmoV1Alpha1Spec) -> GizmoSpec:
    return GizmoSpec(size=spec.size, colors=(spec.color,))


def _gizmo_from_v1(spec: GizmoSpec) -> GizmoV1Alpha1Spec:
    # v1alpha1 holds one colour: the first (v1's others and its note have no place in it).
    return GizmoV1Alpha1Spec(size=spec.size, color=spec.colors[0] if spec.colors else "blue")


#: v1alpha1 of Gizmo, served: ``attrs.evolve`` it for a deprecated or unserved one.
GIZMO_V1ALPHA1 = KindVersion(
    "v1alpha1",
    GizmoV1Alpha1Spec,
    to_storage=_gizmo_to_v1,
    from_storage=_gizmo_from_v1,
    renamed={"color": "colors"},
)
GIZMO = Kind("example.reconcile.dev/v1", "Gizmo", GizmoSpec, short_names=("gz",), versions=(GIZMO_V1ALPHA1,))
