"""The scale-out benchmark's provider: the memory provider (``reconcile.testing.memory``)
with every call (observe, create, update, delete) sleeping ``RECONCILE_BENCH_LATENCY``
seconds (5 ms unless set) on the event loop, as a call to a remote API waits on the
network. Its items live in the runner's memory.

``benchmarks/scaleout.py`` installs it for its ``reconcile run`` processes as a
distribution of its own (this module and a dist-info naming it under the
``reconcile.providers`` entry points) in a temporary folder on their ``PYTHONPATH``.
"""

from __future__ import annotations

import os

from reconcile.testing.memory import MemoryCloud, MemoryProvider

#: Seconds each provider call sleeps.
LATENCY = float(os.environ.get("RECONCILE_BENCH_LATENCY", "0.005"))


def provider() -> MemoryProvider:
    """The memory provider over a cloud whose every call takes :data:`LATENCY`."""
    cloud = MemoryCloud()
    cloud.latency = LATENCY
    return MemoryProvider(cloud)
