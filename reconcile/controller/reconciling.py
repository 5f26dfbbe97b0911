"""The reconciler contract: ``async def reconcile(request) -> Result``.

A request carries only the key, never the event that caused it: a reconciler reads the
object (from the informer's cache), observes the world, acts, and reports. It must be
idempotent: it runs again on every change, every resync, every retry.

* Return ``Result()`` (or None): done; the key's backoff is forgotten.
* Return ``Result(requeue_after=s)``: done for now; look again in ``s`` seconds.
* Return ``Result(pending=write)`` (with either of the above): done once ``write``, the
  reconcile's last write, not yet awaited, is durable. The worker goes on to another key
  meanwhile; this one stays in flight (not handed out again) until the write ends, and
  a write that fails counts as the reconcile failing (retried with backoff).
* Raise :class:`~reconcile.errors.TerminalError`: stop; no retry until the next change.
* Raise anything else: retry with per-key exponential backoff
  (:class:`~reconcile.errors.TransientError` may say when).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

import attrs

from reconcile.model.meta import ObjectKey

__all__ = ["Reconciler", "Request", "Result"]


@attrs.frozen
class Request:
    """Reconcile the object with this key."""

    key: ObjectKey

    @property
    def name(self) -> str:
        """The object's name."""
        return self.key.name

    @property
    def namespace(self) -> str:
        """The object's namespace."""
        return self.key.namespace


@attrs.frozen
class Result:
    """What to do next with the key."""

    #: Look at the key again after this many seconds (drift polling, waiting on the world).
    requeue_after: float | None = None
    #: Look again soon, with the key's backoff (without counting as an error).
    requeue: bool = False
    #: The reconcile's last write, submitted but not awaited (a coroutine, or a future):
    #: the controller awaits it off the worker, and follows the rest of the result only
    #: once it is durable. Only a write nothing after it in the reconcile depends on may
    #: be left so (a record of intent made before acting must be awaited before acting).
    #: Whoever calls ``reconcile`` directly awaits it.
    pending: Awaitable[object] | None = attrs.field(default=None, eq=False, repr=False)


class Reconciler(Protocol):
    """Brings one object's world to its spec."""

    async def reconcile(self, request: Request) -> Result | None:
        """Observe and act for ``request.key``; see the module docstring for the outcomes."""
