"""Tuning CPython's cyclic garbage collector for a process that holds large caches: the
Runtime's, in one place (``Runtime(gc_tuning=True)``; ``reconcile run`` and ``reconcile
apply`` turn it on, an embedding service only when it asks).

The collector is the process's, not the Runtime's: it re-scans every tracked container
at every collection of its generation, whoever made it. A controller's cache of 100,000
objects and a bulk apply's tens of thousands of new objects are acyclic (reference
counting frees them), yet the collector re-scanned them as they piled up: pauses over
half a second and, measured, about half of a bulk apply's time and a tenth of a cold
convergence. Three measures, each process-wide, hence opt-in:

* **Freeze the caches** (:func:`cache_grew`, an informer's growth hook): past
  :data:`FREEZE_FROM` cached objects (in all the process's caches together: an
  operator's process holds several caches of a few thousand objects each, which the
  collector scans as it would one large one), after each list and whenever a tenth of a
  cache is new, ``gc.collect()`` what is not frozen yet (so no cyclic garbage is frozen
  with the cache) and ``gc.freeze()`` what is alive into the permanent generation the
  collector skips (a list splice: cheap).
* **A larger young generation** from a cache's first list on: a young collection every
  :data:`YOUNG_THRESHOLD` allocations instead of CPython's 700 (never lowered). What a
  reconcile allocates is short-lived and acyclic: the frequent young collections found
  almost nothing.
* **Fewer collections during a bulk apply** (:func:`collecting_less`, around
  ``apply_many``) **and while an informer reads and decodes a list** (its listing hook): the
  thresholds raised to :data:`BULK_THRESHOLDS` for its duration (nested and concurrent
  ones counted), then put back. A fresh runner's first list of 10,000 Files spent about
  0.06-0.08 s of its 1 s pass in middle-generation collections that found nothing;
  with this, under 0.01 s.

None of it turns collection on or off or lowers a threshold: a young threshold of 0
(collection off) is left as it is, and so is a collector turned off while a bulk apply
runs; thresholds set by somebody else while a bulk apply runs stand. The layers below know
nothing of this: the informer only reports that its cache grew
(:data:`~reconcile.controller.informing.GrowthHook`) and reads and decodes its lists inside
what it was given (:data:`~reconcile.controller.informing.ListingHook`), and the bulk
apply is wrapped by whoever calls it.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconcile.controller.informing import Informer

__all__ = ["BULK_THRESHOLDS", "FREEZE_FROM", "YOUNG_THRESHOLD", "cache_grew", "collecting_less", "forget"]

#: Cached objects (of all the informers that called :func:`cache_grew`, together)
#: before the caches are frozen.
FREEZE_FROM = 10_000
#: Allocations between two young-generation collections from a cache's first list on.
YOUNG_THRESHOLD = 20_000
#: The thresholds while bulk applies run: a young collection every 100,000 allocations,
#: the older generations a fifth and a tenth as often as by default.
BULK_THRESHOLDS = (100_000, 50, 100)


class _Collector:
    """What this module changed of the collector's settings: one, as the collector is."""

    def __init__(self) -> None:
        #: Bulk applies running now (nested and concurrent ones counted).
        self.bulk_applies = 0
        #: The thresholds to put back when the last bulk apply ends.
        self.saved: tuple[int, ...] = ()
        #: The thresholds the first bulk apply set (put back only if they still hold).
        self.raised: tuple[int, ...] = ()
        #: The informers whose growth hook was called (those of a closed Runtime go).
        self.informers: weakref.WeakSet[Informer] = weakref.WeakSet()


_COLLECTOR = _Collector()


def forget(informers: Iterable[Informer]) -> None:
    """A Runtime closed: its informers no longer count towards :data:`FREEZE_FROM`
    (an embedding service may keep the closed Runtime, and so its caches, around)."""
    for informer in informers:
        _COLLECTOR.informers.discard(informer)


def cache_grew(informer: Informer) -> None:
    """An informer listed, or a tenth of its cache is new (its growth hook): raise the
    young generation's threshold, and freeze what is alive once the caches are large
    (their objects counted together: no one of an operator's caches may reach
    :data:`FREEZE_FROM`, and then none was ever frozen)."""
    _raise_young()
    _COLLECTOR.informers.add(informer)
    if sum(cache.statistics().objects for cache in _COLLECTOR.informers) >= FREEZE_FROM:
        gc.collect()  # only what is not frozen yet: at most about a tenth of the cache
        gc.freeze()


def _raise_young() -> None:
    """The young generation collected every :data:`YOUNG_THRESHOLD` allocations at the
    least, from now on (also after a bulk apply running now ends)."""
    if _COLLECTOR.bulk_applies:
        young, *older = _COLLECTOR.saved
        if young > 0:
            _COLLECTOR.saved = (max(young, YOUNG_THRESHOLD), *older)
        return
    young, *older = gc.get_threshold()
    if 0 < young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, *older)


@contextlib.contextmanager
def collecting_less() -> Iterator[None]:
    """Fewer cyclic collections while the block runs (a bulk apply, an informer's list):
    the thresholds raised to :data:`BULK_THRESHOLDS` (never lowered) and put back as they
    were when the last such block ends, unless somebody set thresholds of their own
    meanwhile."""
    collector = _COLLECTOR
    if collector.bulk_applies == 0:
        collector.saved = collector.raised = gc.get_threshold()
        if gc.isenabled() and collector.saved[0] > 0:
            pairs = zip(collector.saved, BULK_THRESHOLDS, strict=False)
            collector.raised = tuple(max(a, b) for a, b in pairs)
            gc.set_threshold(*collector.raised)
    collector.bulk_applies += 1
    try:
        yield
    finally:
        collector.bulk_applies -= 1
        if collector.bulk_applies == 0 and gc.get_threshold() == collector.raised:
            gc.set_threshold(*collector.saved)
