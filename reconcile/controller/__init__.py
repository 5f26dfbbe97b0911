"""The controller layer: clocks, the work queue, the informer and the reconcile loop."""

from reconcile.controller.admitting import HookReader
from reconcile.controller.caching import Cache, CachedClient, CachedEngine
from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.collecting import COLLECTOR_MANAGER, GarbageCollector
from reconcile.controller.context import Context
from reconcile.controller.controlling import Controller
from reconcile.controller.informing import Informer, InformerEvent, InformerStatistics
from reconcile.controller.owning import Children
from reconcile.controller.queueing import Priority, QueueShutDown, QueueStatistics, WorkQueue
from reconcile.controller.reconciling import Reconciler, Request, Result
from reconcile.controller.telemetry import Telemetry

__all__ = [
    "COLLECTOR_MANAGER",
    "Cache",
    "CachedClient",
    "CachedEngine",
    "Children",
    "Clock",
    "Context",
    "Controller",
    "GarbageCollector",
    "HookReader",
    "Informer",
    "InformerEvent",
    "InformerStatistics",
    "LoopClock",
    "Priority",
    "QueueShutDown",
    "QueueStatistics",
    "Reconciler",
    "Request",
    "Result",
    "Telemetry",
    "WorkQueue",
]
