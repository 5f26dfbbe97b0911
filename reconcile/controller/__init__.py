"""The controller layer: clocks, the work queue, the informer and the reconcile loop."""

from reconcile.controller.clocks import Clock, LoopClock
from reconcile.controller.queueing import Priority, QueueShutDown, QueueStatistics, WorkQueue

__all__ = ["Clock", "LoopClock", "Priority", "QueueShutDown", "QueueStatistics", "WorkQueue"]
