"""A bulk apply stores what applying each document alone stores: the same bodies (managed
fields, finalizers, defaults, generation), the same events in the same order, the same
outcomes and the same refusals with their field paths, for creates and for updates mixed
in with them, with and without ``atomic``; and a created body is exactly what the apply
rules make of its manifest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from reconcile import Client, KindRegistry, ObjectKey, ReconcileError
from reconcile.model.external import ANNOTATION_MANAGEMENT_POLICY, FINALIZER
from reconcile.store import EventStore, open_store
from reconcile.testing import FakeClock
from reconcile.testing.kinds import GIZMO, RECORD_SET, WIDGET

GROUP = "example.reconcile.dev"


def registry() -> KindRegistry:
    """Widgets managed by a provider (so a create gets the managed finalizer), record
    sets, and gizmos served in two versions (a v1alpha1 document is converted)."""
    kinds = KindRegistry([RECORD_SET, GIZMO])
    kinds.register(WIDGET, provider="example")
    return kinds


def widget(name: str, size: int, **metadata: Any) -> dict[str, Any]:
    """A Widget manifest with a colour and tags."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": {"size": size, "color": "red", "tags": ["a", "b"]},
    }


def gizmo(name: str, version: str, **spec: Any) -> dict[str, Any]:
    """A Gizmo manifest in ``version``."""
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gizmo", "metadata": {"name": name}, "spec": spec}


def record_set(name: str, ttl: int = 300) -> dict[str, Any]:
    """A RecordSet manifest with one record."""
    records = [{"name": "www", "type": "A", "ttl": ttl, "value": "192.0.2.1"}]
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "RecordSet",
        "metadata": {"name": name},
        "spec": {"zone": "example.com", "records": records},
    }


def first_documents() -> list[dict[str, Any]]:
    """Creates: labels, annotations, a finalizer listed, an observe-only widget (no
    managed finalizer), a converted gizmo, a record set, and one refused document."""
    return [
        widget("w1", 1, labels={"app": "one", "tier": "web"}),
        widget("w2", 2, annotations={"note": "two"}, finalizers=["example.dev/keep"]),
        widget("w3", 3, annotations={ANNOTATION_MANAGEMENT_POLICY: "ObserveOnly"}),
        widget("bad", -1),
        gizmo("g1", "v1alpha1", size=4, color="green"),
        record_set("r1"),
        widget("w4", 4),
    ]


def second_documents() -> list[dict[str, Any]]:
    """Updates mixed with creates: a spec change, a label dropped and one added, an
    unchanged document, an object declared twice (the later one wins), a new object, a
    gizmo in its storage version, a stale resourceVersion (refused), a new record set."""
    return [
        widget("w1", 10, labels={"app": "one"}),
        widget("w5", 5),
        widget("w2", 2, annotations={"note": "two"}, finalizers=["example.dev/keep"]),
        widget("w3", 3, labels={"new": "yes"}, annotations={ANNOTATION_MANAGEMENT_POLICY: "ObserveOnly"}),
        widget("w1", 11, labels={"app": "one"}),
        gizmo("g1", "v1", size=4, colors=["green", "blue"], note="n"),
        widget("w4", 40, resourceVersion=999),
        record_set("r2", ttl=60),
        record_set("r1", ttl=120),
    ]


def accepted(document: dict[str, Any]) -> bool:
    """Whether a document of the two passes is one that is not refused."""
    return document["spec"].get("size", 0) >= 0 and "resourceVersion" not in document["metadata"]


async def opened(url: str, clock: FakeClock) -> EventStore:
    """A store at ``url`` on the fake clock."""
    return await open_store(url, clock=clock)


@pytest.fixture
async def stores(
    store_url: str, tmp_path: Path, clock: FakeClock, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[EventStore, EventStore]]:
    """Two empty stores of one backend: the bulk apply's and the one-by-one apply's."""
    if store_url.startswith("sqlite:"):
        other = f"sqlite:///{tmp_path / 'alone.db'}"
    else:
        other = request.getfixturevalue("postgres").new_url()
    bulk, alone = await opened(store_url, clock), await opened(other, clock)
    try:
        yield bulk, alone
    finally:
        await bulk.close()
        await alone.close()


def outcome_of(result: Any) -> tuple[str, list[str] | str | None]:
    """An outcome, with the field paths (or the message) of its error."""
    error = result.error
    if error is None:
        return result.outcome, None
    paths = [e.path for e in getattr(error, "errors", ())]
    return result.outcome, paths or str(error)


async def applied_alone(client: Client, documents: Sequence[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Apply each document by itself (``Client.apply``), in order; the outcome of each
    as the bulk apply names it."""
    outcomes: list[tuple[str, Any]] = []
    for document in documents:
        before = await client.revision()
        meta = document["metadata"]
        existed = await client.engine.store.read(ObjectKey(GROUP, document["kind"], "default", meta["name"]))
        try:
            await client.apply(document)
        except ReconcileError as exc:
            paths = [e.path for e in getattr(exc, "errors", ())]
            outcomes.append(("refused", paths or str(exc)))
            continue
        if existed is None:
            outcomes.append(("created", None))
        else:
            outcomes.append(("configured" if await client.revision() > before else "unchanged", None))
    return outcomes


async def everything(store: EventStore) -> tuple[list[Any], list[Any]]:
    """Every stored object and every event, each uid named by its object's key (uids are
    random: the same object's are told apart by where they are, not their value)."""
    uids: dict[str, str] = {}
    objects: list[Any] = []
    for kind in ("Widget", "Gizmo", "RecordSet"):
        page = await store.list(GROUP, kind)
        for found in page.items:
            uids[found.uid] = f"uid of {found.key.name}"
            objects.append((found.key, found.resource_version, named(found.body, uids)))
    events = []
    for key, _, _ in objects:
        for event in await store.events(key):
            body = None if event.body is None else named(event.body, uids)
            events.append((event.revision, event.type, event.key, event.actor, event.user, body, event.data))
    return objects, sorted(events, key=lambda event: event[0])


def named(body: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
    """``body`` with its uid replaced by its name in ``uids``."""
    meta = dict(body["metadata"])
    meta["uid"] = uids.get(meta["uid"], meta["uid"])
    return {**body, "metadata": meta}


class TestBulkEqualsAlone:
    """The bulk apply and the one-by-one apply leave the same store."""

    @pytest.mark.parametrize("atomic", [False, True])
    async def test_the_same_objects_events_and_outcomes(
        self, stores: tuple[EventStore, EventStore], clock: FakeClock, *, atomic: bool
    ) -> None:
        """Creates, then updates mixed with creates: each pass's outcomes, and after both
        every stored body and every event, are those of applying one document at a time
        (without ``atomic``; with it, a refusal stores nothing of its pass, so the pass
        is compared without its refused document)."""
        bulk_store, alone_store = stores
        kinds = registry()
        bulk, alone = Client(bulk_store, kinds, clock=clock), Client(alone_store, kinds, clock=clock)
        for documents in (first_documents(), second_documents()):
            applied = [d for d in documents if not atomic or accepted(d)]
            results = await bulk.apply_many(applied, atomic=atomic)
            assert [outcome_of(r) for r in results] == await applied_alone(alone, applied)
            clock.advance(1.5)
        assert await everything(bulk_store) == await everything(alone_store)

    async def test_each_refusal_is_in_its_place_with_its_reason(
        self, stores: tuple[EventStore, EventStore], clock: FakeClock
    ) -> None:
        """The invalid widget is refused at its index naming ``spec.size``, the stale
        version at its index naming the version given; the documents around them land."""
        bulk = Client(stores[0], registry(), clock=clock)
        first = [outcome_of(r) for r in await bulk.apply_many(first_documents())]
        assert first[3] == ("refused", ["spec.size"])
        assert [o for i, o in enumerate(first) if i != 3] == [("created", None)] * 6
        second = [outcome_of(r) for r in await bulk.apply_many(second_documents())]
        assert second[6][0] == "refused"
        assert "resourceVersion 999" in str(second[6][1])
        assert [o[0] for o in second] == [
            "configured",
            "created",
            "unchanged",
            "configured",
            "configured",
            "configured",
            "refused",
            "created",
            "configured",
        ]


class TestCreatedBody:
    """What a create stores, field by field."""

    async def test_a_created_widget_is_its_manifest_with_the_apply_defaults(
        self, store: EventStore, clock: FakeClock
    ) -> None:
        """Labels, annotations and listed finalizers as written, the managed finalizer
        after them, every declared field owned by the manager (sorted, metadata first),
        generation 1, the creation time, the default status, the spec's defaults."""
        client = Client(store, registry(), clock=clock)
        manifest = widget("w1", 7, labels={"b": "2", "a": "1"}, finalizers=["example.dev/keep"])
        manifest["spec"] = {"size": 7}
        [result] = await client.apply_many([manifest], manager="me")
        assert result.outcome == "created"
        stored = await store.read(ObjectKey(GROUP, "Widget", "default", "w1"))
        assert stored is not None
        body = stored.body
        meta = body["metadata"]
        assert meta == {
            "name": "w1",
            "namespace": "default",
            "uid": stored.uid,
            "generation": 1,
            "resourceVersion": 1,
            "creationTimestamp": meta["creationTimestamp"],
            "deletionTimestamp": None,
            "labels": {"a": "1", "b": "2"},
            "annotations": {},
            "finalizers": ["example.dev/keep", FINALIZER],
            "ownerReferences": [],
            "managedFields": {"me": ["finalizers/example.dev/keep", "labels/a", "labels/b", "spec/size"]},
        }
        assert meta["creationTimestamp"].startswith("20")
        assert body["spec"] == {"size": 7, "color": "blue", "tags": []}
        assert body["status"] == {"observedGeneration": 0, "conditions": []}
        assert (await store.events(stored.key))[0].type == "Created"
        assert result.object is not None
        assert result.object.metadata.uid == stored.uid
