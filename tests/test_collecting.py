"""The Runtime's collector tuning (``reconcile.runtime.collecting``): one place, off
unless asked for, on in the CLI."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import widget

from reconcile import Client, Runtime, RuntimeOptions
from reconcile.controller import Informer
from reconcile.runtime import collecting
from reconcile.testing import WIDGET, FakeClock, example_kinds

DEADLINE = 10.0


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's switch and thresholds put back as they were after the test (a
    gc.freeze() it made is undone too)."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    try:
        yield
    finally:
        (gc.enable if enabled else gc.disable)()
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@pytest.mark.usefixtures("collector")
class TestCollectingLess:
    """Fewer cyclic collections while a bulk apply runs."""

    @pytest.mark.parametrize(
        ("enabled", "before", "during"),
        [
            (True, (700, 10, 10), (100_000, 50, 100)),
            (True, (200_000, 5, 500), (200_000, 50, 500)),  # never lowered
            (True, (0, 10, 10), (0, 10, 10)),  # a threshold of 0 (collection off) is left
            (False, (700, 10, 10), (700, 10, 10)),  # a collector turned off is left off
        ],
    )
    def test_raised_while_it_runs_then_put_back(
        self, enabled: bool, before: tuple[int, int, int], during: tuple[int, int, int]
    ) -> None:
        """The thresholds are raised inside the block (nested blocks counted) and put back
        as they were when the last one ends; collection is never turned off."""
        (gc.enable if enabled else gc.disable)()
        gc.set_threshold(*before)
        with collecting.collecting_less():
            assert (gc.isenabled(), gc.get_threshold()) == (enabled, during)
            with collecting.collecting_less():
                assert gc.get_threshold() == during
            assert gc.get_threshold() == during, "the outer block still runs"
        assert (gc.isenabled(), gc.get_threshold()) == (enabled, before)

    def test_thresholds_set_meanwhile_stand(self) -> None:
        """Thresholds somebody else sets while a bulk apply runs are not undone."""
        gc.set_threshold(700, 10, 10)
        with collecting.collecting_less():
            gc.set_threshold(5_000, 10, 10)
        assert gc.get_threshold() == (5_000, 10, 10)

    def test_a_cache_listed_meanwhile_keeps_its_young_threshold(self) -> None:
        """A cache's first list during a bulk apply: the larger young generation it asks
        for is what the apply puts back."""
        gc.set_threshold(700, 10, 10)
        with collecting.collecting_less():
            collecting._raise_young()
            assert gc.get_threshold() == collecting.BULK_THRESHOLDS
        assert gc.get_threshold() == (collecting.YOUNG_THRESHOLD, 10, 10)


@pytest.mark.usefixtures("collector")
class TestCacheGrew:
    """The informer's growth hook: a larger young generation, a frozen large cache."""

    async def test_freezes_a_large_cache(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After the list: the young generation's threshold raised (never lowered), and,
        once the cache holds FREEZE_FROM objects, what is not frozen collected, then the
        rest frozen."""
        calls: list[str] = []
        monkeypatch.setattr(collecting, "FREEZE_FROM", 3)
        monkeypatch.setattr(collecting.gc, "collect", lambda *_: calls.append("collect") or 0)
        monkeypatch.setattr(collecting.gc, "freeze", lambda: calls.append("freeze"))
        gc.set_threshold(700, 10, 10)
        informer = Informer(client, WIDGET, clock=clock)
        collecting.cache_grew(informer)
        assert calls == [], "an empty cache: nothing to freeze"
        assert gc.get_threshold() == (collecting.YOUNG_THRESHOLD, 10, 10)
        for i in range(3):
            informer.written(await client.apply(widget(f"w{i}")))
        gc.set_threshold(50_000, 10, 10)
        collecting.cache_grew(informer)
        assert calls == ["collect", "freeze"]
        assert gc.get_threshold() == (50_000, 10, 10), "never lowered"

    async def test_counts_the_caches_together(
        self, client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Caches each under FREEZE_FROM objects, over it together (an operator's
        process: its sites, their folders, their files): frozen all the same."""
        calls: list[str] = []
        monkeypatch.setattr(collecting, "FREEZE_FROM", 3)
        monkeypatch.setattr(collecting.gc, "collect", lambda *_: calls.append("collect") or 0)
        monkeypatch.setattr(collecting.gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(collecting._COLLECTOR, "informers", weakref.WeakSet())
        widgets = Informer(client, WIDGET, clock=clock)
        others = Informer(client, WIDGET, namespace="other", clock=clock)
        for informer, namespace in ((widgets, "default"), (others, "other")):
            for i in range(2):
                informer.written(await client.apply(widget(f"w{i}", namespace=namespace)))
        collecting.cache_grew(widgets)
        assert calls == [], "2 objects: under FREEZE_FROM"
        collecting.cache_grew(others)
        assert calls == ["collect", "freeze"], "4 objects in the two caches"


class TestRuntimeOption:
    """``Runtime(gc_tuning=...)``: off by default, the former ``freeze_gc`` deprecated."""

    @pytest.mark.usefixtures("collector")
    @pytest.mark.parametrize("tuning", [False, True])
    async def test_apply_many_and_the_cache(self, tmp_path: Path, tuning: bool) -> None:
        """With gc_tuning, the Runtime's apply_many collects less while it runs and its
        cache calls the tuning after the list; without, the collector is never touched."""
        gc.set_threshold(700, 10, 10)
        seen: list[tuple[int, ...]] = []
        async with Runtime(
            tmp_path / "state.db", providers=[], kinds=example_kinds(), gc_tuning=tuning
        ) as rt:
            assert rt.cache.on_growth is (collecting.cache_grew if tuning else None)
            assert rt.cache.listing is (collecting.collecting_less if tuning else None)
            original = rt.client.apply_many

            async def watching(*args: object, **kwargs: object) -> object:
                seen.append(gc.get_threshold())
                return await original(*args, **kwargs)  # type: ignore[arg-type]

            rt.client.apply_many = watching  # type: ignore[method-assign]
            await rt.apply_many([widget("w")])
        assert seen == [collecting.BULK_THRESHOLDS if tuning else (700, 10, 10)]
        after = gc.get_threshold()
        if tuning:  # put back (a cache's first list may have raised the young generation)
            assert after in {(700, 10, 10), (collecting.YOUNG_THRESHOLD, 10, 10)}
        else:
            assert after == (700, 10, 10)

    @pytest.mark.usefixtures("collector")
    async def test_a_closed_runtimes_caches_no_longer_count(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An embedding service keeping a closed Runtime (and so its caches) around: its
        informers leave the count towards FREEZE_FROM when it closes."""
        monkeypatch.setattr(collecting._COLLECTOR, "informers", weakref.WeakSet())
        async with Runtime(tmp_path / "state.db", providers=[], kinds=example_kinds(), gc_tuning=True) as rt:
            await rt.apply_many([widget("a"), widget("b")])
            informer = rt.cache.informer(WIDGET)
            collecting.cache_grew(informer)
            assert informer in collecting._COLLECTOR.informers
        assert list(collecting._COLLECTOR.informers) == []
        assert rt.cache.informers()  # (kept: the Runtime is still referenced)

    def test_off_unless_asked_for(self) -> None:
        """An embedded Runtime leaves the process's collector alone by default."""
        assert RuntimeOptions().gc_tuning is False

    def test_freeze_gc_is_deprecated(self) -> None:
        """``freeze_gc=True`` still turns the tuning on, with a DeprecationWarning naming
        its new name; the options made from it do not warn again."""
        with pytest.warns(DeprecationWarning, match="use gc_tuning"):
            options = RuntimeOptions(freeze_gc=True)
        assert options.gc_tuning is True
        assert options.freeze_gc is None
        with pytest.warns(DeprecationWarning, match="use gc_tuning"):
            runtime = Runtime("sqlite:///unused.db", freeze_gc=True)
        assert runtime.options.gc_tuning is True
