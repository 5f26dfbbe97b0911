"""What admission hooks read other objects with: in a Runtime, the shared informer cache
for a kind whose informer has synced (no store round trip), the store for the others;
outside one (``reconcile apply``), the store through the client the write goes through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import run_benchmark, settle

import reconcile
from reconcile import AdmissionRequest, FieldError, InvalidError, Kind, KindRegistry, NotFoundError, Runtime
from reconcile.controller import Context, HookReader, Request, Result
from reconcile.testing.kinds import WIDGET


@attrs.frozen
class GadgetSpec:
    """A gadget: a title unique among gadgets, and a widget it needs."""

    title: str = ""
    widget: str = ""


def gadget(name: str, **spec: Any) -> dict[str, Any]:
    """A Gadget manifest."""
    return {
        "apiVersion": "gadgets.example.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }


def widget(name: str) -> dict[str, Any]:
    """A Widget manifest."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 1},
    }


class Seen:
    """What the hook saw: the reader it was given and where each kind was answered from."""

    def __init__(self) -> None:
        self.readers: list[object] = []
        self.sources: list[tuple[str, str]] = []


def gadget_kind(seen: Seen) -> Kind:
    """Gadget with one validating hook: its title unique, its widget (when named) stored."""
    kind = Kind("gadgets.example.dev/v1", "Gadget", GadgetSpec)

    @kind.validating
    async def rules(request: AdmissionRequest) -> list[FieldError]:
        seen.readers.append(request.client)
        if isinstance(request.client, HookReader):
            seen.sources += [(k, request.client.source(k)) for k in ("Gadget", "Widget")]
        errors = []
        listed = await request.client.list("Gadget")
        taken = [o.metadata.name for o in listed.items if o.spec.title == request.spec.title]
        if [n for n in taken if n != request.object.metadata.name]:
            errors.append(FieldError("spec.title", f"taken by {taken[0]}"))
        if request.spec.widget:
            try:
                await request.client.get("Widget", request.spec.widget)
            except NotFoundError:
                errors.append(FieldError("spec.widget", f"no widget {request.spec.widget}"))
        return errors

    return kind


async def idle(_request: Request, _context: Context) -> Result | None:
    """A reconciler that does nothing: it is here for its informer."""
    return None


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[tuple[Runtime, Seen]]:
    """A Runtime watching Gadget (a controller, so an informer), knowing Widget (none:
    without the garbage collector, which watches every kind)."""
    seen = Seen()
    kind = gadget_kind(seen)
    runtime = Runtime(
        tmp_path / "r.db",
        providers=[],
        kinds=KindRegistry([kind, WIDGET]),
        resync_period=None,
        garbage_collection=False,
    )
    runtime.controller(kind)(idle)
    async with runtime:
        await settle(lambda: runtime.cache.synced(kind) is not None)
        yield runtime, seen


class TestInARuntime:
    """Hooks read through the Runtime's cache, falling back to the store per kind."""

    async def test_a_watched_kind_is_read_from_the_cache(
        self, runtime: tuple[Runtime, Seen], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The hook's reader answers Gadget from the cache: the rule holds (read-your-writes:
        the first apply's result is in the cache) and no store read is made for it."""
        rt, seen = runtime
        await rt.apply(gadget("a", title="T"))
        store = rt.client.store
        reads: list[str] = []
        original_read, original_list = store.read, store.list

        async def read(*args: Any, **kwargs: Any) -> Any:
            reads.append("read")
            return await original_read(*args, **kwargs)

        async def listed(*args: Any, **kwargs: Any) -> Any:
            reads.append("list")
            return await original_list(*args, **kwargs)

        monkeypatch.setattr(store, "read", read)
        monkeypatch.setattr(store, "list", listed)
        with pytest.raises(InvalidError, match=r"spec\.title: taken by a"):
            await rt.apply(gadget("b", title="T"))
        assert isinstance(seen.readers[-1], HookReader)
        assert ("Gadget", "cache") in seen.sources
        assert reads == []  # Gadget's list came from the cache; nothing else was read

    async def test_an_unwatched_kind_is_read_from_the_store(self, runtime: tuple[Runtime, Seen]) -> None:
        """Widget has no informer: the hook reads the store, so it sees a widget another
        client (another process: ``reconcile apply``) stored a moment before."""
        rt, seen = runtime
        with pytest.raises(InvalidError, match=r"spec\.widget: no widget w"):
            await rt.apply(gadget("a", title="T", widget="w"))
        async with reconcile.connect(rt.store_url, kinds=KindRegistry([WIDGET])) as other:
            await other.apply(widget("w"))
        applied = await rt.apply(gadget("a", title="T", widget="w"))
        assert applied.spec.widget == "w"
        assert ("Widget", "store") in seen.sources

    async def test_before_the_informer_synced_the_store_answers(self, tmp_path: Path) -> None:
        """A kind whose informer has not listed yet (the Runtime starting) is read from
        the store, not from an empty cache."""
        seen = Seen()
        kind = gadget_kind(seen)
        async with reconcile.connect(tmp_path / "s.db", kinds=KindRegistry([kind])) as client:
            await client.apply(gadget("a", title="T"))
        runtime = Runtime(
            tmp_path / "s.db", providers=[], kinds=KindRegistry([kind, WIDGET]), resync_period=None
        )
        async with runtime:  # no controller: Gadget has no informer
            reader = runtime.client.engine.reader
            assert isinstance(reader, HookReader)
            informer = runtime.cache.informer(kind)  # made, never run: not synced
            assert not informer.synced.is_set()
            assert reader.source("Gadget") == "store"
            with pytest.raises(InvalidError, match=r"spec\.title: taken by a"):
                await runtime.apply(gadget("b", title="T"))


class TestStaleness:
    """The cache trails the store by the watch: a write by another process reaches a
    hook once the watch has brought it."""

    async def test_another_process_write_is_seen_once_the_watch_brings_it(self, tmp_path: Path) -> None:
        """With the garbage collector on, every kind has an informer; a widget stored by
        another client is read from the cache as soon as the cache holds it."""
        seen = Seen()
        kind = gadget_kind(seen)
        runtime = Runtime(
            tmp_path / "w.db", providers=[], kinds=KindRegistry([kind, WIDGET]), resync_period=None
        )
        async with runtime:
            await settle(lambda: runtime.cache.synced("Widget") is not None)
            reader = runtime.client.engine.reader
            assert isinstance(reader, HookReader)
            assert reader.source("Widget") == "cache"
            async with reconcile.connect(tmp_path / "w.db", kinds=KindRegistry([WIDGET])) as other:
                await other.apply(widget("w"))
            informer = runtime.cache.informer(WIDGET)
            await settle(
                lambda: informer.get(runtime.client.kinds.key_of(WIDGET, "w", "default")[1]) is not None
            )
            applied = await runtime.apply(gadget("a", widget="w"))
            assert applied.spec.widget == "w"


class TestOutsideARuntime:
    """A plain client (the CLI's) gives hooks itself: reads from the store."""

    async def test_the_client_reads_the_store(self, tmp_path: Path) -> None:
        """The hook's reader is the client the write goes through."""
        seen = Seen()
        async with reconcile.connect(
            tmp_path / "c.db", kinds=KindRegistry([gadget_kind(seen), WIDGET])
        ) as client:
            await client.apply(gadget("a", title="T"))
            with pytest.raises(InvalidError, match=r"spec\.title: taken by a"):
                await client.apply(gadget("b", title="T"))
            assert seen.readers[-1] is client


def test_the_benchmark_runs(tmp_path: Path) -> None:
    """benchmarks/hook_reads.py at a tiny size: the three ways measured, in seconds."""
    rows, printed = run_benchmark("hook_reads", 5, tmp_path, "--applies", "2", "--runs", "1")
    assert set(rows) == {"cache", "store", "limit"}
    assert all(row["min_s"] > 0 for row in rows.values())
    assert "x limit" in printed
