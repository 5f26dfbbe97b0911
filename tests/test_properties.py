"""Invariants under random sequences of operations (Hypothesis).

Whatever clients do, the projection equals the replay of the log, revisions strictly
increase without gaps, a watch from 0 yields exactly the log, and the current objects are
the last snapshots the watch delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import tempfile
from pathlib import Path
from typing import Any

import attrs
import cattrs
import pytest
from cattrs.gen import make_dict_unstructure_fn, override
from helpers import widget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_server import Database

from reconcile import Bookmark, Client, ExpiredError, InvalidError, ReconcileError, Status, connect
from reconcile.api import Admission
from reconcile.model import make_converter
from reconcile.model.conditions import Condition, ConditionStatus
from reconcile.model.external import ManagedStatus
from reconcile.model.serde import format_epoch, format_timestamp
from reconcile.model.spelling import camel
from reconcile.testing import example_kinds

NAMES = st.sampled_from(["a", "b", "c"])
LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y"]), max_size=2)
FINALIZERS = st.sampled_from(["example.dev/one", "example.dev/two"])

OPERATIONS = st.one_of(
    st.tuples(st.just("apply"), NAMES, st.integers(0, 3), LABELS),
    st.tuples(st.just("patch"), NAMES, st.sampled_from(["red", "blue"]), LABELS),
    st.tuples(st.just("status"), NAMES, st.integers(0, 3)),
    st.tuples(st.just("add_finalizer"), NAMES, FINALIZERS),
    st.tuples(st.just("remove_finalizer"), NAMES, FINALIZERS),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("compact"), NAMES, st.integers(0, 40)),
)


async def run(client: Client, operation: tuple[Any, ...]) -> None:
    """Carry out one operation; expected refusals (absent object, ...) are fine."""
    verb, name, *args = operation
    with contextlib.suppress(ReconcileError):
        if verb == "apply":
            await client.apply(widget(name, args[0], labels=args[1]))
        elif verb == "patch":
            await client.patch("widget", name, {"spec": {"color": args[0]}, "metadata": {"labels": args[1]}})
        elif verb == "status":
            obj = await client.get("widget", name)
            await client.update_status(attrs.evolve(obj, status=Status(observed_generation=args[0])))
        elif verb == "add_finalizer":
            await client.add_finalizer("widget", name, args[0])
        elif verb == "remove_finalizer":
            await client.remove_finalizer("widget", name, args[0])
        elif verb == "compact":
            await client.compact(args[0])
        else:
            await client.delete("widget", name)


async def check(path: Path | str, operations: list[tuple[Any, ...]], concurrent: bool) -> None:
    """Run the operations, then check every invariant."""
    async with connect(path, kinds=example_kinds()) as client:
        if concurrent:
            await asyncio.gather(*(run(client, op) for op in operations))
        else:
            for op in operations:
                await run(client, op)
        report = await client.verify()
        assert report.ok, report.differences
        head = await client.revision()
        horizon = await client.store.horizon()
        since = max(horizon - 1, 0)
        if since > 0:
            with pytest.raises(ExpiredError):
                async for _ in client.store.watch(since=since - 1):
                    pass
        revisions = []
        async for item in client.store.watch(since=since):
            if isinstance(item, Bookmark):
                assert item.revision == head
                break
            revisions.append(item.revision)
        assert revisions == list(range(since + 1, head + 1)), "the log after the horizon is gap-free"
        for obj in (await client.list("widget")).items:
            snapshots = [e.body for e in await client.store.events(obj.key) if e.body is not None]
            assert snapshots[-1] == client.converter.unstructure(obj), "current = last snapshot"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, max_size=25), concurrent=st.booleans())
def test_log_and_projection_agree(operations: list[tuple[Any, ...]], concurrent: bool) -> None:
    """Random operations, sequential or concurrent, keep every store invariant."""
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(check(Path(folder) / "state.db", operations, concurrent))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, max_size=25), concurrent=st.booleans())
def test_log_and_projection_agree_on_postgres(
    postgres: Database, operations: list[tuple[Any, ...]], concurrent: bool
) -> None:
    """The same invariants on PostgreSQL, each example in a schema of its own."""
    asyncio.run(check(postgres.new_url(), operations, concurrent))


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    )
)
@settings(max_examples=200, deadline=None)
def test_any_manifest_validates_or_names_a_field(spec: object) -> None:
    """Any spec either validates or fails with an InvalidError whose errors have paths."""
    admission = Admission(example_kinds(), make_converter())
    manifest = widget("w")
    manifest["spec"] = spec
    try:
        admission.admit(manifest)
    except InvalidError as exc:
        assert exc.errors
        assert all(e.path.startswith("spec") for e in exc.errors), exc.errors


@given(
    st.floats(min_value=0, max_value=253402300799.0, allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, 0.9999995, 1.0000005, 59.9999999, 1_700_000_000.5, 86399.9999996])
)
def test_format_epoch_is_format_timestamp_of_the_same_instant(seconds: float) -> None:
    """The engine's stamp of a clock reading is the text of the datetime of that reading,
    to the microsecond (within one, where float rounding of a huge reading differs), and
    a second's text is never carried into the next second."""
    made = format_epoch(seconds)
    expected = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    parsed = datetime.datetime.fromisoformat(made)
    assert made.endswith("Z")
    assert len(made) == len("2026-12-04T09:11:07.010263Z")
    assert abs(parsed - expected) <= datetime.timedelta(microseconds=1)
    assert format_epoch(seconds + 1) > made or seconds + 1 >= 253402300800


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.tuples(inner) | st.dictionaries(st.text(max_size=3), inner)
    ),
    max_leaves=8,
)
STAMPS = st.datetimes(timezones=st.just(datetime.UTC)) | st.datetimes(
    timezones=st.sampled_from([datetime.timezone(datetime.timedelta(hours=-5)), datetime.UTC])
)
CONDITIONS = st.builds(
    Condition,
    st.sampled_from(["Ready", "Synced"]),
    st.sampled_from(list(ConditionStatus)),
    st.text(max_size=5),
    st.text(max_size=5),
    st.none() | STAMPS,
    st.integers(0, 9),
)


@settings(max_examples=100, deadline=None)
@given(
    conditions=st.lists(CONDITIONS, max_size=3),
    at_provider=st.dictionaries(st.text(max_size=4), JSON, max_size=4),
    shared=STAMPS,
)
def test_a_status_unstructures_as_cattrs_generic_path_does(
    conditions: list[Condition], at_provider: dict[str, Any], shared: datetime.datetime
) -> None:
    """The converter's own hooks for conditions and ``dict[str, Any]`` make exactly what
    cattrs' generic path makes with the same timestamp hook (conditions sharing a stamp
    object too, which the formatter remembers)."""
    generic = cattrs.Converter()
    generic.register_unstructure_hook(datetime.datetime, format_timestamp)
    generic.register_unstructure_hook_factory(
        attrs.has,
        lambda cls, conv: make_dict_unstructure_fn(
            cls, conv, **{f.name: override(rename=camel(f.name)) for f in attrs.fields(cls)}
        ),
    )
    together = [attrs.evolve(c, last_transition_time=shared) for c in conditions[:2]]
    status = ManagedStatus(
        observed_generation=1, conditions=(*conditions, *together), at_provider=at_provider
    )
    assert make_converter().unstructure(status, ManagedStatus) == generic.unstructure(status, ManagedStatus)
