"""One client shape: the same reconciler code runs against a user's Client (reads from the
store) and a reconciler's CachedClient (reads from the cache), typed against the client
protocols of reconcile.typing."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from helpers import cached_widgets, running, settle, widget

from reconcile import AlreadyExistsError, Client, NotFoundError, ObjectKey
from reconcile.api.engine import Engine
from reconcile.api.protocols import Recorder
from reconcile.controller import Cache, CachedClient, CachedEngine, Controller, Request, Result
from reconcile.testing import WIDGET, FakeClock
from reconcile.typing import Reader, ResourceClient, StatusWriter, Writer

FINALIZER = "example.dev/cleanup"


async def ensure_child(client: ResourceClient, key: ObjectKey) -> list[Any]:
    """A reconciler's pass over a parent Widget that manages a child Widget through every
    verb of the protocols; returns what it saw on the way."""
    seen: list[Any] = []
    parent = await client.get(key)
    name = f"{key.name}-child"
    try:
        await client.get("widget", name, namespace=key.namespace)
    except NotFoundError:
        seen.append("no child yet")
    manifest = widget(name, size=parent.spec.size, namespace=key.namespace)
    child = await client.create(manifest)
    try:
        await client.create(manifest)
    except AlreadyExistsError:
        seen.append("created once")
    seen.append((await client.get(child.key)).metadata.resource_version == child.metadata.resource_version)
    labels = {"metadata": {"labels": {"parent": key.name}}}
    await client.patch("widget", name, labels, namespace=key.namespace)
    listed = await client.list("widget", namespace=key.namespace, label_selector={"parent": key.name})
    seen.append([o.metadata.name for o in listed.items])
    child = await client.add_finalizer("widget", name, FINALIZER, namespace=key.namespace)
    grown = await client.update(attrs.evolve(child, spec=attrs.evolve(child.spec, size=child.spec.size + 1)))
    assert grown is not None
    reread = await client.get("widget", name, namespace=key.namespace)
    seen.append((reread.spec.size, reread.metadata.generation, reread.metadata.finalizers))
    seen.append(reread.metadata.resource_version == grown.metadata.resource_version)
    status = attrs.evolve(parent.status, observed_generation=parent.metadata.generation)
    written = await client.update_status(attrs.evolve(parent, status=status))
    seen.append((await client.get(key)).status.observed_generation == written.metadata.generation)
    marked = await client.delete("widget", name, namespace=key.namespace)
    seen.append(marked is not None and marked.metadata.deletion_timestamp is not None)
    seen.append(await client.remove_finalizer("widget", name, FINALIZER, namespace=key.namespace))
    try:
        await client.get("widget", name, namespace=key.namespace)
    except NotFoundError:
        seen.append("child gone")
    page = await client.list("widget", limit=1)
    seen.append(([o.metadata.name for o in page.items], page.continue_))
    return seen


def implementations(plain: Client, cached: CachedClient) -> tuple[ResourceClient, ResourceClient]:
    """Both clients are ResourceClients (mypy checks it here, signature by signature)."""
    return plain, cached


EXPECTED = [
    "no child yet",
    "created once",
    True,
    ["p-child"],
    (2, 2, (FINALIZER,)),
    True,
    True,
    True,
    None,
    "child gone",
    (["p"], None),
]


@pytest.fixture(params=["Client", "CachedClient"])
async def either(request: pytest.FixtureRequest, client: Client, clock: FakeClock) -> AsyncIterator[Any]:
    """A plain Client, or a CachedClient over it with a running Widget informer."""
    if request.param == "Client":
        yield client
        return
    async with cached_widgets(client, clock) as cached:
        yield cached


async def test_the_same_reconciler_runs_against_both_clients(
    either: Any, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every verb has one signature and one behaviour on both clients (a missing object
    is NotFoundError on both); the cached one reads from its cache, never the store."""
    for protocol in (Reader, Writer, StatusWriter, ResourceClient):
        assert isinstance(either, protocol)
    parent = await either.apply(widget("p"))
    store_reads = 0
    read = client.store.read

    async def counted(key: ObjectKey) -> Any:
        nonlocal store_reads
        store_reads += 1
        return await read(key)

    monkeypatch.setattr(client.store, "read", counted)
    assert await ensure_child(either, parent.key) == EXPECTED
    if isinstance(either, CachedClient):
        assert store_reads == 0
    else:
        assert store_reads > 0


async def test_a_cached_list_pages_as_the_store_does(client: Client, clock: FakeClock) -> None:
    """CachedClient.list gives Client.list's pages: (namespace, name) order, namespace and
    selector filters, limit and continue tokens either client accepts."""
    for name, namespace in [("c", "a"), ("a", "b"), ("b", "a"), ("d", "b")]:
        await client.apply(widget(name, namespace=namespace, labels={"even": str(name in "bd").lower()}))
    cache = Cache(client, clock=clock)
    informer = cache.informer(WIDGET)
    task = asyncio.create_task(informer.run())
    try:
        await settle(informer.synced.is_set)
        cached = CachedClient(client, cache)
        every: list[dict[str, Any]] = [{}, {"namespace": "b"}, {"label_selector": "even=true"}, {"limit": 1}]
        for options in every:
            pages: list[list[list[str]]] = []
            for reader in (client, cached):
                names, token = [], None
                while True:
                    page = await reader.list("widget", continue_=token, **options)
                    names.append([f"{o.metadata.namespace}/{o.metadata.name}" for o in page.items])
                    token = page.continue_
                    if token is None:
                        break
                pages.append(names)
            assert pages[0] == pages[1], options
        assert (await cached.list("widget", limit=2)).resource_version == informer.revision
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_not_found_for_a_gone_object_ends_its_reconcile(client: Client, clock: FakeClock) -> None:
    """A reconciler that lets get(request.key)'s NotFoundError out: once its object is
    gone, the pass ends as a success (nothing to retry, as with controller-runtime's
    IgnoreNotFound); while the object is cached, a NotFoundError is a failure."""
    cache = Cache(client, clock=clock)
    cached = CachedClient(client, cache)
    outcomes: list[tuple[str, str]] = []

    class ReadsChild:
        async def reconcile(self, request: Request) -> Result | None:
            await cached.get(request.key)
            await cached.get("widget", f"{request.name}-child")  # never made
            return None

    controller = Controller(client, WIDGET, ReadsChild(), cache=cache, clock=clock, resync_period=None)
    controller.add_listener(lambda key, outcome: outcomes.append((key.name, outcome)))
    async with running(controller):
        await cached.apply(widget("w1"))
        await settle(lambda: ("w1", "error") in outcomes)
        assert [k.name for k in controller.failures] == ["w1"]
        await cached.delete("widget", "w1")
        await settle(lambda: ("w1", "success") in outcomes)
        assert not controller.failures


def recorders(plain: Client, cached: CachedClient) -> tuple[Recorder, Recorder]:
    """Both engines are Recorders (mypy checks it here, signature by signature)."""
    return plain.engine, cached.engine


def test_both_engines_record_with_one_signature() -> None:
    """``client.engine`` and ``cached.engine`` take the same arguments for the
    bookkeeping writes (the object as read, not its kind and name)."""
    for name in ("record_actions", "release"):
        plain = inspect.signature(getattr(Engine, name))
        cached = inspect.signature(getattr(CachedEngine, name))
        assert plain == cached, name
        assert next(iter(list(plain.parameters)[1:])) == "obj", name


@pytest.mark.parametrize("through", ["client", "cached"])
async def test_the_same_bookkeeping_runs_on_both_engines(
    client: Client, clock: FakeClock, through: str
) -> None:
    """A recording reconciler's writes (actions with a finalizer, then the release that
    removes a deleting object) run unchanged on either engine."""
    cache = Cache(client, clock=clock)
    cached = CachedClient(client, cache)
    recorder: Recorder = client.engine if through == "client" else cached.engine
    obj = await client.apply(widget("w1"))
    marked = await recorder.record_actions(obj, [("CreateSucceeded", None)], add_finalizer=FINALIZER)
    assert marked.metadata.finalizers == (FINALIZER,)
    deleting = await client.delete("widget", "w1")
    assert deleting is not None
    gone, revision = await recorder.release(deleting, FINALIZER, [("DeleteSucceeded", None)])
    assert gone is None
    assert revision == await client.revision()
    with pytest.raises(NotFoundError):
        await client.get("widget", "w1")
    history = [event.type for event in await client.history("widget", "w1")]
    assert "CreateSucceeded" in history
    assert "DeleteSucceeded" in history
