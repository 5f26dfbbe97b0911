"""The reconciler contract: ``async def reconcile(request) -> Result``.

A request carries only the key, never the event that caused it: a reconciler reads the
object (from the informer's cache), observes the world, acts, and reports. It must be
idempotent: it runs again on every change, every resync, every retry.

* Return ``Result()`` (or None): done; the key's backoff is forgotten.
* Return ``Result(requeue_after=s)``: done for now; look again in ``s`` seconds.
* Raise :class:`~reconcile.errors.TerminalError`: stop; no retry until the next change.
* Raise anything else: retry with per-key exponential backoff
  (:class:`~reconcile.errors.TransientError` may say when).
"""

from __future__ import annotations

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


class Reconciler(Protocol):
    """Brings one object's world to its spec."""

    async def reconcile(self, request: Request) -> Result | None:
        """Observe and act for ``request.key``; see the module docstring for the outcomes."""
