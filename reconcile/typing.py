"""Protocols for the seams users and plugin authors implement or type against.

* :class:`Provider` and :class:`ExternalClient` -- what a provider plugin implements.
* :class:`Reconciler` -- what a custom controller implements.
* :class:`EventStore` -- what a store backend implements (SQLite now, PostgreSQL next).
* :class:`Clock` (monotonic time and sleeping, for the controllers) and
  :class:`WallClock` (timestamps, for the store and the API) -- what tests replace with
  :class:`reconcile.testing.FakeClock`, which is both.
"""

from __future__ import annotations

from typing import Protocol

from reconcile.controller.clocks import Clock
from reconcile.controller.reconciling import Reconciler
from reconcile.model.external import ExternalClient, Provider
from reconcile.store.contract import EventStore, Mutation

__all__ = ["Clock", "EventStore", "ExternalClient", "Mutation", "Provider", "Reconciler", "WallClock"]


class WallClock(Protocol):
    """Wall-clock time in seconds since the epoch (``time.time`` by default)."""

    def __call__(self) -> float:
        """The current time."""
