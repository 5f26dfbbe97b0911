"""The decision ladder of the managed lifecycle: one step per case, and ``plan`` reports the
step ``run`` takes, for any object, kind and observation (by construction: both ask
:func:`reconcile.controller.ladder.decide`; these tests catch a path that stops doing so
or feeds it other inputs)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconcile.controller import ladder, managed
from reconcile.controller.context import Context
from reconcile.controller.ladder import (
    CREATE_PENDING_UNKNOWN_MESSAGE,
    INVALID_POLICY_MESSAGE,
    STEADY,
    Adopt,
    AlreadyGone,
    Create,
    CreateBlind,
    CreatePendingUnknown,
    Delete,
    DeleteBlind,
    Finalized,
    InvalidPolicy,
    NeedsObservation,
    NotOwned,
    ObserveOnly,
    Orphan,
    Paused,
    RecordFound,
    SkipDelete,
    Steady,
    Step,
    Update,
    decide,
    steady_again,
)
from reconcile.controller.managed import ManagedReconciler
from reconcile.controller.planning import Planned, describe, plan
from reconcile.controller.reconciling import Request
from reconcile.controller.telemetry import Telemetry
from reconcile.model import Condition, ConditionStatus, Kind
from reconcile.model.external import (
    ANNOTATION_ADOPT,
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_CREATE_SUCCEEDED,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_EXTERNAL_IDENTITY,
    ANNOTATION_MANAGEMENT_POLICY,
    ANNOTATION_PAUSED,
    FINALIZER,
    ManagedStatus,
    Observation,
)
from reconcile.model.kinds import Behaviour
from reconcile.model.meta import ObjectMeta
from reconcile.model.resource import AnyResource, Resource
from reconcile.testing import BUCKET, FakeClock
from reconcile.testing.memory import BucketSpec

UID = "uid-ours"
STAMP = "2026-01-01T00:00:00Z"
DELETED = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)


def resource(
    annotations: Mapping[str, str] | None = None,
    *,
    finalizers: Sequence[str] = (FINALIZER,),
    deleting: bool = False,
    generation: int = 2,
    observed_generation: int = 1,
    synced: bool = True,
) -> AnyResource:
    """A Bucket with these annotations, finalizers and status."""
    conditions = (
        (Condition("Synced", ConditionStatus.TRUE, "ReconcileSuccess", "", None, 1),) if synced else ()
    )
    return Resource(
        BUCKET.api_version,
        BUCKET.kind,
        ObjectMeta(
            "b",
            uid=UID,
            generation=generation,
            annotations=dict(annotations or {}),
            finalizers=tuple(finalizers),
            deletion_timestamp=DELETED if deleting else None,
        ),
        BucketSpec("b", "v"),
        ManagedStatus(observed_generation=observed_generation, conditions=conditions),
    )


PLAIN = Behaviour.ASSIGNED_NAME
DETERMINISTIC = Behaviour.IDEMPOTENT_BY_NAME
EXCLUSIVE = Behaviour.EXCLUSIVE
MINE = Observation(exists=True, owner=UID)
THEIRS = Observation(exists=True, owner="uid-theirs")
UNMARKED = Observation(exists=True)
ABSENT = Observation(exists=False)
SUCCEEDED = {ANNOTATION_CREATE_SUCCEEDED: STAMP}
PENDING = {ANNOTATION_CREATE_PENDING: STAMP}

#: (case, object, kind flags, observation, the step).
LADDER: list[tuple[str, AnyResource, ladder.Flags, Observation | None, Step]] = [
    ("paused", resource({ANNOTATION_PAUSED: "true"}, deleting=True), PLAIN, None, Paused()),
    (
        "invalid deletion policy",
        resource({ANNOTATION_DELETION_POLICY: "Keep"}),
        PLAIN,
        MINE,
        InvalidPolicy(INVALID_POLICY_MESSAGE),
    ),
    (
        "invalid management policy, deleting",
        resource({ANNOTATION_MANAGEMENT_POLICY: "Some"}, deleting=True),
        PLAIN,
        None,
        InvalidPolicy(INVALID_POLICY_MESSAGE),
    ),
    ("deleting, finalizer gone", resource(deleting=True, finalizers=()), PLAIN, None, Finalized()),
    (
        "deleting, orphan policy",
        resource({ANNOTATION_DELETION_POLICY: "Orphan"}, deleting=True),
        PLAIN,
        MINE,
        Orphan("Orphan", "Full"),
    ),
    (
        "deleting, observe only",
        resource({ANNOTATION_MANAGEMENT_POLICY: "ObserveOnly"}, deleting=True),
        PLAIN,
        None,
        Orphan("Delete", "ObserveOnly"),
    ),
    ("deleting, exclusive, recorded", resource(SUCCEEDED, deleting=True), EXCLUSIVE, None, DeleteBlind()),
    (
        "deleting, exclusive, interrupted create",
        resource({**SUCCEEDED, **PENDING}, deleting=True),
        EXCLUSIVE,
        None,
        NeedsObservation(deleting=True),
    ),
    (
        "deleting, not observed",
        resource(SUCCEEDED, deleting=True),
        PLAIN,
        None,
        NeedsObservation(deleting=True),
    ),
    ("deleting, theirs", resource(SUCCEEDED, deleting=True), PLAIN, THEIRS, SkipDelete()),
    ("deleting, ours", resource(SUCCEEDED, deleting=True), PLAIN, MINE, Delete()),
    ("deleting, exclusive, looked", resource(SUCCEEDED, deleting=True), EXCLUSIVE, MINE, Delete()),
    ("deleting, gone outside", resource(SUCCEEDED, deleting=True), PLAIN, ABSENT, AlreadyGone()),
    ("never reconciled, exclusive create", resource(synced=False), EXCLUSIVE, None, CreateBlind()),
    ("exclusive create, after a refusal", resource(), EXCLUSIVE, None, NeedsObservation(deleting=False)),
    (
        "exclusive create, to adopt",
        resource({ANNOTATION_ADOPT: "true"}, synced=False),
        EXCLUSIVE,
        None,
        NeedsObservation(deleting=False),
    ),
    (
        "exclusive create, observe only",
        resource({ANNOTATION_MANAGEMENT_POLICY: "ObserveOnly"}, synced=False),
        EXCLUSIVE,
        None,
        NeedsObservation(deleting=False),
    ),
    ("exclusive create, looked", resource(synced=False), EXCLUSIVE, THEIRS, NotOwned()),
    ("not observed", resource(), PLAIN, None, NeedsObservation(deleting=False)),
    (
        "observe only",
        resource({ANNOTATION_MANAGEMENT_POLICY: "ObserveOnly"}),
        PLAIN,
        THEIRS,
        ObserveOnly(exists=True),
    ),
    ("theirs, to adopt", resource({ANNOTATION_ADOPT: "true"}), PLAIN, THEIRS, Adopt()),
    ("theirs, adopt not true", resource({ANNOTATION_ADOPT: "false"}), PLAIN, THEIRS, NotOwned()),
    ("unmarked, nothing recorded", resource(), PLAIN, UNMARKED, NotOwned()),
    (
        "unmarked, another identity than recorded",
        resource({**SUCCEEDED, ANNOTATION_EXTERNAL_IDENTITY: "one"}),
        PLAIN,
        attrs.evolve(MINE, identity="two"),
        NotOwned(),
    ),
    ("unmarked, exclusive create interrupted", resource(PENDING), EXCLUSIVE, UNMARKED, NotOwned()),
    (
        "unmarked, create interrupted",
        resource(PENDING),
        PLAIN,
        UNMARKED,
        RecordFound("found after an interrupted create", add_finalizer=False),
    ),
    (
        "absent, create interrupted, identity not deterministic",
        resource(PENDING),
        PLAIN,
        ABSENT,
        CreatePendingUnknown(CREATE_PENDING_UNKNOWN_MESSAGE),
    ),
    (
        "absent, create interrupted, deterministic",
        resource(PENDING),
        DETERMINISTIC,
        ABSENT,
        Create(recreate=False),
    ),
    ("absent", resource(), PLAIN, ABSENT, Create(recreate=False)),
    ("absent, its create recorded", resource({**SUCCEEDED, **PENDING}), PLAIN, ABSENT, Create(recreate=True)),
    (
        "drifted",
        resource(SUCCEEDED, generation=1),
        PLAIN,
        attrs.evolve(MINE, up_to_date=False, diff="value: 'x' -> 'v'"),
        Update("value: 'x' -> 'v'", drift=True, add_finalizer=False),
    ),
    (
        "spec changed, no finalizer",
        resource(SUCCEEDED, finalizers=()),
        PLAIN,
        attrs.evolve(MINE, up_to_date=False),
        Update("", drift=False, add_finalizer=True),
    ),
    (
        "found in place, marked ours",
        resource(),
        PLAIN,
        attrs.evolve(MINE, found="found by its mark"),
        RecordFound("found by its mark", add_finalizer=False),
    ),
    (
        "found in place, the engine's words",
        resource(finalizers=()),
        PLAIN,
        MINE,
        RecordFound("found in place, marked as this resource's", add_finalizer=True),
    ),
    (
        "unmarked, the identity recorded",
        resource({**SUCCEEDED, ANNOTATION_EXTERNAL_IDENTITY: "one"}),
        EXCLUSIVE,
        attrs.evolve(UNMARKED, identity="one"),
        STEADY,
    ),
    ("steady", resource(SUCCEEDED), PLAIN, MINE, Steady(add_finalizer=False)),
    ("steady, no finalizer", resource(SUCCEEDED, finalizers=()), PLAIN, MINE, Steady(add_finalizer=True)),
]


@pytest.mark.parametrize(
    ("obj", "flags", "observation", "step"), [row[1:] for row in LADDER], ids=[row[0] for row in LADDER]
)
def test_the_ladder(
    obj: AnyResource, flags: ladder.Flags, observation: Observation | None, step: Step
) -> None:
    """One row per step (and per rung that leads to it): the step decided."""
    assert decide(obj, flags, observation) == step


def test_every_step_has_a_row() -> None:
    """The table covers the closed set of steps."""
    steps = set(ladder.Step.__args__)
    assert {type(row[-1]) for row in LADDER} == steps


# -- plan and run, through the paths they use ------------------------------------------------


class Store:
    """The cached client a ManagedReconciler writes through, keeping what it was told."""

    def __init__(self, obj: AnyResource, clock: FakeClock) -> None:
        self.obj, self.wall_clock = obj, clock
        self.events: list[str] = []
        self.statuses: list[Any] = []
        #: The engine-facing side (get, record_actions, release) is this fake too.
        self.engine = self

    async def get(self, key: object) -> AnyResource | None:  # noqa: ARG002
        """The one object."""
        return self.obj

    async def record_actions(
        self, obj: AnyResource, events: Sequence[tuple[str, Any]], **changes: Any
    ) -> AnyResource:
        """Keep the events and the status; the object unchanged."""
        self.events += [type_ for type_, _ in events]
        if changes.get("status") is not None:
            self.statuses.append(changes["status"])
        return obj

    async def release(self, obj: AnyResource, finalizer: str, events: Sequence[tuple[str, Any]]) -> None:  # noqa: ARG002
        """Keep the events."""
        self.events += [type_ for type_, _ in events]

    async def update_status(self, obj: AnyResource, *, force: bool = False) -> AnyResource:  # noqa: ARG002
        """Keep the status."""
        self.statuses.append(obj.status)
        return obj

    async def add_finalizer(self, kind: object, name: str, finalizer: str, *, namespace: str) -> AnyResource:  # noqa: ARG002
        """The object with the finalizer."""
        return attrs.evolve(self.obj, metadata=attrs.evolve(self.obj.metadata, finalizers=(finalizer,)))


class Outside:
    """A provider's client that observes ``observation`` (None: observing fails) and
    accepts every change."""

    def __init__(self, observation: Observation | None) -> None:
        self.observation = observation

    async def observe(self, resource: AnyResource) -> Observation:  # noqa: ARG002
        """The observation, or a failure."""
        if self.observation is None:
            raise RuntimeError("observing failed")
        return self.observation

    async def create(self, resource: AnyResource) -> None:
        """Accepted."""

    async def update(self, resource: AnyResource, observation: Observation) -> None:
        """Accepted."""

    async def delete(self, resource: AnyResource) -> None:
        """Accepted."""

    async def adopt(self, resource: AnyResource) -> None:
        """Accepted."""

    async def close(self) -> None:
        """Nothing held."""


@contextmanager
def decisions() -> Iterator[list[Step]]:
    """Every step the managed reconciler asks the ladder for, in order."""
    asked: list[Step] = []

    def recording(obj: AnyResource, kind: ladder.Flags, observation: Observation | None) -> Step:
        step = decide(obj, kind, observation)
        asked.append(step)
        return step

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(managed, "decide", recording)
        yield asked


def taken(asked: list[Step]) -> Step:
    """The step a pass took: its first decision, or the one after the look it needed."""
    first = asked[0]
    return asked[1] if isinstance(first, NeedsObservation) and len(asked) > 1 else first


async def run(
    obj: AnyResource, kind: Kind, observation: Observation | None
) -> tuple[Step, Store, BaseException | None]:
    """One pass of the managed reconciler over ``obj``: the step it took, what it wrote,
    what it raised."""
    clock = FakeClock()
    store = Store(obj, clock)
    outside = Outside(observation)

    async def connect() -> Outside:
        return outside

    reconciler = ManagedReconciler(
        Context(kind, store, clock, Telemetry()),  # type: ignore[arg-type]
        connect,
        attempts=1,
        call_timeout=None,
    )
    raised: BaseException | None = None
    with decisions() as asked:
        try:
            result = await reconciler.reconcile(Request(obj.key))
            if result is not None and result.pending is not None:
                await result.pending  # its last write, left to the caller to land
        except Exception as exc:  # noqa: BLE001 - what the pass raised, to compare
            raised = exc
    await reconciler.close()
    return taken(asked), store, raised


def behaving(behaviour: Behaviour) -> Kind:
    """The Bucket kind with this behaviour."""
    return attrs.evolve(BUCKET, behaviour=behaviour)


async def test_exclusive_create_interrupted_unmarked_is_not_owned() -> None:
    """Regression: an EXCLUSIVE kind, a create-pending marker, an unmarked resource.
    ``run`` says NotOwned (the provider would report an interrupted create of its own as
    marked); ``plan``, given the kind as the CLI gives it, says so too."""
    kind = behaving(Behaviour.EXCLUSIVE)
    obj = resource(PENDING, synced=False)
    step, store, raised = await run(obj, kind, UNMARKED)
    assert step == NotOwned()
    assert store.statuses[-1].condition("Synced").reason == "NotOwned"
    assert "not created by this object" in str(raised)
    planned = await plan(obj, Outside(UNMARKED), kind)
    assert planned == Planned(
        obj.key, "refuse", "exists and was not created by this object (NotOwned): left alone"
    )
    assert planned.step == NotOwned()


async def test_the_cli_plans_with_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """``reconcile plan`` hands each object's kind to :func:`plan` (its behaviour decides)."""
    from reconcile.cli import planning  # noqa: PLC0415

    kind = behaving(Behaviour.EXCLUSIVE)
    seen: list[object] = []

    async def planning_of(obj: AnyResource, external: object, flags: object = None) -> Planned:
        seen.append(flags)
        return Planned(obj.key, "nothing")

    class Registry:
        def get(self, api_version: str, kind_name: str) -> Kind:  # noqa: ARG002
            return kind

        def provider_of(self, found: Kind) -> str:  # noqa: ARG002
            return "memory"

    class Provider:
        name = "memory"

        async def connect(self, config: object) -> Outside:  # noqa: ARG002
            return Outside(UNMARKED)

    @attrs.define
    class Settings:
        kinds: Registry = attrs.Factory(Registry)
        provider_config: dict[str, Any] = attrs.Factory(dict)

    monkeypatch.setattr(planning, "plan", planning_of)
    monkeypatch.setattr(planning, "discover_providers", lambda: [Provider()])
    await planning._observe_all(Settings(), [resource(PENDING)], timeout=5, workers=1)  # type: ignore[arg-type]
    assert seen == [kind]


# -- the property -------------------------------------------------------------------------------

_maybe: Callable[[st.SearchStrategy[str]], st.SearchStrategy[str | None]] = lambda values: st.none() | values  # noqa: E731


@st.composite
def objects(draw: st.DrawFn) -> AnyResource:
    """Any object: annotations, policies, finalizers, deletion, markers, generation."""
    choices = {
        ANNOTATION_PAUSED: _maybe(st.sampled_from(["true", "false"])),
        ANNOTATION_DELETION_POLICY: _maybe(st.sampled_from(["Delete", "Orphan", "Keep"])),
        ANNOTATION_MANAGEMENT_POLICY: _maybe(st.sampled_from(["Full", "ObserveOnly", "Some"])),
        ANNOTATION_ADOPT: _maybe(st.sampled_from(["true", "false"])),
        ANNOTATION_CREATE_PENDING: _maybe(st.just(STAMP)),
        ANNOTATION_CREATE_SUCCEEDED: _maybe(st.just(STAMP)),
        ANNOTATION_EXTERNAL_IDENTITY: _maybe(st.sampled_from(["one", "two"])),
    }
    annotations = {name: value for name, values in choices.items() if (value := draw(values)) is not None}
    return resource(
        annotations,
        finalizers=draw(st.lists(st.sampled_from([FINALIZER, "x.dev/hold"]), unique=True, max_size=2)),
        deleting=draw(st.booleans()),
        generation=draw(st.integers(1, 3)),
        observed_generation=draw(st.integers(0, 3)),
        synced=draw(st.booleans()),
    )


observations = st.none() | st.builds(
    Observation,
    exists=st.booleans(),
    up_to_date=st.booleans(),
    diff=st.sampled_from(["", "value: 'x' -> 'v'"]),
    owner=_maybe(st.sampled_from([UID, "uid-theirs"])),
    found=st.sampled_from(["", "found by its mark"]),
    identity=_maybe(st.sampled_from(["one", "two"])),
)
kinds = st.sampled_from(Behaviour).map(behaving)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=objects(), kind=kinds, observation=observations)
def test_plan_reports_the_step_run_takes(
    obj: AnyResource, kind: Kind, observation: Observation | None
) -> None:
    """For any object, kind and observation (None: observing fails), the step ``plan``
    reports is the step one pass of the managed reconciler takes, and plan's action is
    the one that step (or, for a step taken without a look, what the look finds) means."""
    step, _, _ = asyncio.run(run(obj, kind, observation))
    planned = asyncio.run(plan(obj, Outside(observation), kind))
    assert planned.step == step
    if isinstance(step, NeedsObservation):
        assert planned.action == "error"
    elif isinstance(step, CreateBlind | DeleteBlind) and observation is not None:
        assert (planned.action, planned.detail) == describe(decide(obj, kind, observation))
    elif not isinstance(step, CreateBlind | DeleteBlind):
        assert (planned.action, planned.detail) == describe(step)


@st.composite
def steady_objects(draw: st.DrawFn) -> AnyResource:
    """An object the ladder can find steady: not paused, valid policies managing it fully,
    not being deleted, its create recorded, the engine's finalizer on."""
    choices = {
        ANNOTATION_PAUSED: _maybe(st.just("false")),
        ANNOTATION_DELETION_POLICY: _maybe(st.sampled_from(["Delete", "Orphan"])),
        ANNOTATION_MANAGEMENT_POLICY: _maybe(st.just("Full")),
        ANNOTATION_ADOPT: _maybe(st.sampled_from(["true", "false"])),
        ANNOTATION_CREATE_PENDING: _maybe(st.just(STAMP)),
        ANNOTATION_EXTERNAL_IDENTITY: _maybe(st.sampled_from(["one", "two"])),
    }
    annotations = {name: value for name, values in choices.items() if (value := draw(values)) is not None}
    return resource(
        {**annotations, **SUCCEEDED},
        finalizers=(FINALIZER, *draw(st.lists(st.just("x.dev/hold"), max_size=1))),
        generation=draw(st.integers(1, 3)),
        observed_generation=draw(st.integers(0, 3)),
        synced=draw(st.booleans()),
    )


@given(obj=steady_objects(), kind=kinds, observation=observations.filter(lambda o: o is not None))
def test_the_steady_memo_asks_the_ladder(obj: AnyResource, kind: Kind, observation: Observation) -> None:
    """The memo's question at a poll (:func:`steady_again`: only the rungs that read the
    observation) answers as the whole ladder does, for an object found steady before."""
    assert decide(obj, kind, MINE) is STEADY
    assert steady_again(obj, observation) == (decide(obj, kind, observation) is STEADY)


def test_plan_prints_where_a_run_stops(capsys: pytest.CaptureFixture[str]) -> None:
    """A step where a run stops is an ``error`` of its own in the summary, not a failed
    observe."""
    from reconcile.cli import planning  # noqa: PLC0415

    obj = resource(PENDING)
    stop = CreatePendingUnknown(CREATE_PENDING_UNKNOWN_MESSAGE)
    planned = [
        Planned(obj.key, *describe(stop), step=stop),
        Planned(obj.key, "error", "connection refused", step=NeedsObservation(deleting=False)),
    ]
    planning._print(planned)
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.endswith("; 0 unchanged, 1 could not be observed, 1 where a run stops.")
    assert [planning._stops(p) for p in planned] == [True, False]
