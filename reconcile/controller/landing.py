"""How the controller follows a reconcile whose last write is still landing (a base class
of :class:`~reconcile.controller.controlling.Controller`).

A reconcile's status must be durable before the next action *on that object* depends on
it, not before the worker may take another key. A reconciler that ends with a write
nothing after it depends on returns it unawaited, as ``Result(pending=write)``; the
worker hands it to a landing task (:meth:`Landing._hold`) and takes the next key at once.

The invariants, and why they hold:

* **The key stays in flight until its write is durable.** The queue hands a key out
  once until ``done(key)`` (adds meanwhile are deferred to one follow-up), and only the
  landing task calls ``done``, after the write ended. So no reconcile of the object
  begins before its previous write committed, and none acts on a status that a crash
  could still take back; read-your-writes holds as before (the write's result is in the
  cache before ``done``).
* **A failed write is a failed reconcile**, classified as the worker classifies a
  reconcile's exception (:meth:`Landing._failed_with`): a retry with the key's backoff
  (a conflict, a full disk), a dropped key (fenced), a terminal record. Success is
  followed as the worker follows a result (:meth:`Landing._succeeded`).
* **Bounded.** A worker takes no other key while ``max_pending_writes`` writes are
  landing for its controller: it waits for one to land (the back-pressure a worker
  awaiting its write had). Workers whose reconciles were running when the limit was
  reached each add theirs: at most ``max_pending_writes + workers - 1`` at once. Each
  landing write is bounded by ``reconcile_timeout`` as a reconcile is (a
  ``DeadlineExceededError``: a retry with backoff).
* **Shutdown waits for them**: a held key is still processing, so the queue is not idle
  (``Controller.shutdown`` waits for idle), and a worker does not end while writes are
  landing: one may release a deferred add that a worker must still take.
* **Context.** The landing task is made in the worker's context while the reconcile's
  span is current (its write's span is the reconcile's child) and the key's shard fence
  is set (the write is fenced as it would have been awaited); the worker then leaves the
  span's block, and the landing task ends the span with the outcome.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry import trace

from reconcile.controller.clocks import Clock
from reconcile.controller.queueing import WorkQueue
from reconcile.controller.reconciling import Result
from reconcile.controller.tracing import Traced
from reconcile.errors import DeadlineExceededError, TerminalError
from reconcile.model.meta import ObjectKey

__all__ = ["FORGETTING", "Landing"]

#: The outcomes after which the queue forgets the key's failures (its next failure waits
#: the base delay again): ``done(key, forget=...)`` does it, in the same call.
FORGETTING = frozenset({"success", "requeue_after", "terminal"})


class Landing:
    """The landing writes of a controller (what the controller sets in its ``__init__``
    is declared here; the helpers it calls are its other base classes')."""

    queue: WorkQueue[ObjectKey]
    _listeners: list[Callable[[ObjectKey, str], None]]
    _terminal: set[ObjectKey]
    #: How many reconciles' last writes may land at once (see the module docstring).
    max_pending_writes: int
    #: What bounds a reconcile, and its landing write on its own (None: nothing).
    reconcile_timeout: float | None
    clock: Clock
    #: The landing tasks (held here: the loop keeps only weak references to tasks).
    _landing: set[asyncio.Task[None]]
    #: How many of them have not finished their key yet (a task leaves ``_landing`` only
    #: a turn of the loop after it ends).
    _landing_count: int
    #: Workers waiting for room (a write to land), each with a future.
    _room: collections.deque[asyncio.Future[None]]

    if TYPE_CHECKING:  # the controller's other base classes' (Following, Amending, Tracing)

        def _errored(self, key: ObjectKey, exc: Exception, span: trace.Span) -> str: ...
        def _follow(self, key: ObjectKey, result: Result | None) -> str: ...
        async def _terminated(self, key: ObjectKey, exc: TerminalError, span: trace.Span) -> str: ...
        async def _clear_terminal(self, key: ObjectKey) -> None: ...
        def _ended(self, traced: Traced, outcome: str, *, finished: bool = True) -> None: ...

    async def _failed_with(self, key: ObjectKey, exc: Exception, span: trace.Span) -> str:
        """A reconcile ended by ``exc`` (raised by it, or by its landing write): a
        terminal record, or a retry with backoff (see ``Following._errored``)."""
        if isinstance(exc, TerminalError):
            return await self._terminated(key, exc, span)
        return self._errored(key, exc, span)

    async def _succeeded(self, key: ObjectKey, result: Result | None) -> str:
        """A reconcile ended with ``result`` (its writes durable): follow it, and clear a
        terminal record a former reconcile left in status."""
        outcome = self._follow(key, result)
        terminal = self._terminal
        if terminal and key in terminal:
            await self._clear_terminal(key)
        return outcome

    def _hold(self, key: ObjectKey, result: Result, traced: Traced | None, span: trace.Span) -> None:
        """Land ``result.pending`` off the worker, then finish ``key`` (called by the
        worker in the reconcile's context, see the module docstring)."""
        task = asyncio.get_running_loop().create_task(self._land(key, result, traced, span))
        self._landing_count += 1
        self._landing.add(task)
        task.add_done_callback(self._landing.discard)

    async def _land(self, key: ObjectKey, result: Result, traced: Traced | None, span: trace.Span) -> None:
        pending = result.pending
        assert pending is not None
        outcome, finished = "error", False
        try:
            seconds = self.reconcile_timeout
            if seconds is None:
                await pending
            else:
                # Bounded as the reconcile is: a write that hangs (a lock another process
                # holds) costs a retry, not a landing slot for good.
                expiry = None
                try:
                    async with self.clock.timeout(seconds) as expiry:
                        await pending
                except TimeoutError:
                    if expiry is not None and expiry.expired():
                        msg = f"the reconcile's last write did not land within {seconds:g} s"
                        raise DeadlineExceededError(msg) from None
                    raise
        except asyncio.CancelledError:
            raise  # the controller is torn down: the key goes with its queue
        except Exception as exc:  # noqa: BLE001 - any failure of the write means retry
            outcome = await self._failed_with(key, exc, span)
            finished = True
        else:
            outcome = await self._succeeded(key, result)
            finished = True
        finally:
            if traced is not None:
                self._ended(traced, outcome, finished=finished)
            self.queue.done(key, forget=outcome in FORGETTING)
            self._landing_count -= 1
            self._give_room()
        for listener in self._listeners:  # after done(): a listener sees the queue as it now is
            listener(key, outcome)

    def _give_room(self) -> None:
        """A write landed: wake a worker waiting for room."""
        room = self._room
        while room:
            waiter = room.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _wait_for_room(self) -> None:
        """Wait until fewer than :attr:`max_pending_writes` writes are landing."""
        loop = asyncio.get_running_loop()
        while self._landing_count >= self.max_pending_writes:
            waiter: asyncio.Future[None] = loop.create_future()
            self._room.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._give_room()  # pass the wake-up on
                raise

    async def _wait_landed(self) -> None:
        """Wait until every write landing now has landed (a worker that found the queue
        shut down: a landing write may still release a deferred add of its key)."""
        while self._landing:
            await asyncio.wait(list(self._landing))

    async def _abandon_landing(self) -> None:
        """Cancel the writes still landing (the controller is torn down, not drained)."""
        for task in list(self._landing):
            task.cancel()
        while self._landing:
            await asyncio.wait(list(self._landing))
