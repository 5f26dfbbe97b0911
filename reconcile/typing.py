"""Protocols for the seams users and plugin authors implement or type against: the one
place for them.

* :class:`Provider` and :class:`ExternalClient` -- what a provider plugin implements;
  :class:`Adopting`, :class:`StoreBound` and :class:`ListingOwned` -- what its client may
  implement besides (``adopt``, ``bind_store``, ``list_owned``/``delete_owned``).
* :class:`Reconciler` -- what a custom controller implements.
* :class:`EventStore` -- what a store backend implements (SQLite now, PostgreSQL next),
  and the :data:`Mutation` it applies.
* :class:`Clock` (monotonic time, sleeping and deadlines, for the controllers) -- what
  tests replace with :class:`reconcile.testing.FakeClock`.
* :class:`Context` -- what a hosted reconciler gets (its cached client, clock, telemetry).
* :class:`Reader`, :class:`Writer`, :class:`StatusWriter` and :class:`ResourceClient`
  (all three) -- the client's verbs, which both :class:`~reconcile.api.Client` and a
  reconciler's :class:`~reconcile.controller.CachedClient` implement: reconciler code
  typed against them runs against either.
"""

from __future__ import annotations

from reconcile.api.protocols import Reader, ResourceClient, StatusWriter, Writer
from reconcile.controller.clocks import Clock
from reconcile.controller.context import Context
from reconcile.controller.reconciling import Reconciler
from reconcile.model.external import Adopting, ExternalClient, ListingOwned, Provider, StoreBound
from reconcile.store.contract import EventStore, Mutation

__all__ = [
    "Adopting",
    "Clock",
    "Context",
    "EventStore",
    "ExternalClient",
    "ListingOwned",
    "Mutation",
    "Provider",
    "Reader",
    "Reconciler",
    "ResourceClient",
    "StatusWriter",
    "StoreBound",
    "Writer",
]
