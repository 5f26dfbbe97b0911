"""Protocols for the seams users and plugin authors implement or type against.

* :class:`Provider` and :class:`ExternalClient` -- what a provider plugin implements.
* :class:`Reconciler` -- what a custom controller implements.
* :class:`EventStore` -- what a store backend implements (SQLite now, PostgreSQL next).
* :class:`Clock` (monotonic time, sleeping and deadlines, for the controllers) -- what
  tests replace with :class:`reconcile.testing.FakeClock`.
* :class:`Context` -- what a hosted reconciler gets (its cached client, clock, telemetry).
"""

from __future__ import annotations

from reconcile.controller.clocks import Clock
from reconcile.controller.context import Context
from reconcile.controller.reconciling import Reconciler
from reconcile.model.external import ExternalClient, Provider
from reconcile.store.contract import EventStore, Mutation

__all__ = ["Clock", "Context", "EventStore", "ExternalClient", "Mutation", "Provider", "Reconciler"]
