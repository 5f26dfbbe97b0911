"""How a Runtime runs: its settings, in one object (``Runtime(options=...)``, or the same
names as keywords)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.telemetry import Telemetry

__all__ = ["RuntimeOptions"]

RunnerLock = Literal["fail", "wait", "off"]


def _runner_lock(_instance: object, _attribute: object, value: str) -> None:
    if value not in ("fail", "wait", "off"):
        msg = f"runner_lock must be 'fail', 'wait' or 'off', not {value!r}"
        raise ValueError(msg)


def _positive(_instance: object, attribute: Any, value: Any) -> None:
    if value is not None and value < 0:
        msg = f"{attribute.name} must be >= 0, not {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class RuntimeOptions:
    """Every setting of a :class:`~reconcile.Runtime` (see ``docs/reference/runtime.md``)."""

    #: Monotonic time for every delay, wait and deadline (a FakeClock in tests).
    clock: Clock = attrs.field(factory=LoopClock)
    #: The wall clock the store stamps times with.
    wall_clock: Callable[[], float] = time.time
    #: Reconciles in flight per controller.
    workers: int = attrs.field(default=16, validator=attrs.validators.ge(1))
    #: Seconds between drift checks of a Ready object, unless the kind says otherwise.
    poll_interval: float = attrs.field(default=60.0, validator=_positive)
    #: Per-kind poll intervals, by any of the kind's names.
    poll_intervals: Mapping[str, float] = attrs.field(factory=dict, converter=dict)
    #: The fraction by which each poll interval is spread at random.
    poll_jitter: float = attrs.field(default=0.1, validator=_positive)
    #: Seconds a created resource may take to appear before it counts as deleted.
    creation_grace: float = attrs.field(default=0.0, validator=_positive)
    #: Tries per provider call (transient failures) within one reconcile.
    provider_attempts: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    #: Seconds one provider call may take (None: no limit).
    provider_timeout: float | None = attrs.field(default=60.0, validator=_positive)
    #: Seconds between full resyncs of every cached object (None: never).
    resync_period: float | None = attrs.field(default=600.0, validator=_positive)
    #: Seconds in-flight reconciles get to finish on close.
    shutdown_deadline: float = attrs.field(default=30.0, validator=_positive)
    #: Spans and metrics.
    telemetry: Telemetry = attrs.field(factory=Telemetry)
    #: Stop on SIGINT and SIGTERM (for a process whose main job this is).
    handle_signals: bool = False
    #: Tune CPython's cyclic garbage collector for large caches and bulk applies
    #: (process-wide, so off unless asked for; see :mod:`reconcile.runtime.collecting`).
    gc_tuning: bool = False
    #: Deprecated: the former name of ``gc_tuning`` (a DeprecationWarning; True turns it on).
    freeze_gc: bool | None = attrs.field(default=None, repr=False, eq=False)
    #: One runner per store: fail to start, wait as a standby, or do not check.
    runner_lock: RunnerLock = attrs.field(default="fail", validator=_runner_lock)
    #: Seconds a read waits for the cache to reflect a write of the key it reads.
    read_timeout: float = attrs.field(default=5.0, validator=_positive)
    #: Run the garbage collector (dependents follow their owners' deletion by
    #: propagation policy; :mod:`reconcile.controller.collecting`).
    garbage_collection: bool = True

    def __attrs_post_init__(self) -> None:
        if self.freeze_gc is not None:
            warnings.warn(
                "freeze_gc is deprecated and will be removed; use gc_tuning (it also raises the "
                "collector's thresholds while apply_many runs)",
                DeprecationWarning,
                stacklevel=4,
            )
            object.__setattr__(self, "gc_tuning", self.gc_tuning or self.freeze_gc)
            object.__setattr__(self, "freeze_gc", None)  # (so that attrs.evolve does not warn again)

    @classmethod
    def names(cls) -> frozenset[str]:
        """The settings' names."""
        return frozenset(field.name for field in attrs.fields(cls))
