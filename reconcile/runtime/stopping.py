"""How a Runtime stops: a stop requested (by the host or a handled signal), and the
drain that closes it, controllers first, then what holds threads, files and locks (a
base class of :class:`~reconcile.runtime.running.Runtime`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from reconcile.api.client import Client
from reconcile.controller.caching import Cache
from reconcile.controller.clocks import Clock
from reconcile.controller.collecting import GarbageCollector
from reconcile.controller.controlling import Controller
from reconcile.errors import LockedError, ReconcileError
from reconcile.model.external import ExternalClient
from reconcile.runtime import collecting
from reconcile.runtime.converging import Tracker
from reconcile.runtime.options import RuntimeOptions
from reconcile.runtime.sharding import Sharding
from reconcile.runtime.supervising import Supervisor
from reconcile.store.contract import Claim
from reconcile.store.finishing import finish

__all__ = ["Stopping"]


class Stopping:
    """Stopping and closing a Runtime (what the Runtime sets in its ``__init__`` is
    declared here)."""

    options: RuntimeOptions
    clock: Clock
    controllers: dict[str, Controller]
    supervisor: Supervisor
    tracker: Tracker
    collector: GarbageCollector | None
    sharding: Sharding | None
    _claim: Claim | None
    lock_lost: LockedError | None
    _client: Client | None
    _cache: Cache | None
    _connections: dict[str, ExternalClient]
    _stop: asyncio.Event
    _signals: list[signal.Signals]
    _closing: asyncio.Task[bool] | None

    async def _stopped_within(self, seconds: float) -> bool:
        """Sleep ``seconds`` on the clock, or less if a stop is requested meanwhile."""
        sleeping = asyncio.ensure_future(self.clock.sleep(seconds))
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({sleeping, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, stopping):
                task.cancel()
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Ask :meth:`run_until_stopped` to return (what SIGINT and SIGTERM do)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called (or a handled signal arrived)."""
        return self._stop.is_set()

    async def wait_stop_requested(self) -> None:
        """Return once :meth:`request_stop` was called (or a handled signal arrived)."""
        await self._stop.wait()

    async def run_until_stopped(self) -> None:
        """Serve until :meth:`request_stop` (or a signal, with ``handle_signals``).

        Raises LockedError, naming the new holder, when the stop came from the runner
        lock lost to another runner (see :mod:`reconcile.runtime.leading`): as
        controller-runtime's manager returns "leader election lost"."""
        await self._stop.wait()
        if self.lock_lost is not None:
            raise self.lock_lost

    async def close(self, *, deadline: float | None = None) -> bool:
        """Drain and stop. In-flight reconciles get ``deadline`` seconds (default: the
        ``shutdown_deadline`` option) to finish; returns False if some had to be
        abandoned then (the log and the external markers keep that safe: a restart
        resumes); none once the runner lock was lost. A caller with a deadline of its
        own (``reconcile run --once --timeout``) passes what is left of it.

        Idempotent, and shielded: a cancelled ``close()`` still finishes in the
        background (no store thread is left to keep the process alive), and a second
        ``close()`` waits for the first to end."""
        if self._closing is None:
            budget = self.options.shutdown_deadline if deadline is None else max(0.0, deadline)
            if self.lock_lost is not None:
                budget = 0.0  # no graceful drain for a lost lock (controller-runtime's way)
            self._closing = asyncio.get_running_loop().create_task(self._close(budget), name="runtime close")
        return await finish(self._closing)

    async def _close(self, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals.clear()
        self.supervisor.stopping = True
        if self.collector is not None:
            self.collector.shut_down()
        results = [False]
        try:
            results = await asyncio.gather(*(c.shutdown(deadline) for c in self.controllers.values()))
        finally:
            # Cancelled or not, what holds threads, files and locks is released.
            try:
                await self._release_controllers()
                if self.sharding is not None:
                    await self.sharding.release()  # after the last reconcile: the others take over
            finally:
                if self._claim is not None:
                    self._claim.release()  # after the last reconcile: the next runner may start
                    self._claim = None
                if self._cache is not None:
                    collecting.forget(self._cache.informers())
                if self._client is not None:
                    client, self._client = self._client, None
                    await client.store.close()
        return all(results)

    async def _release_controllers(self) -> None:
        await self.supervisor.stop()
        for controller in self.controllers.values():
            close = getattr(controller.reconciler, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        self.tracker.close(ReconcileError("the runtime closed while waiting"))
        for connection in self._connections.values():
            with contextlib.suppress(Exception):
                await connection.close()
        self._connections.clear()
