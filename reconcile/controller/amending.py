"""How the controller records a terminal error in an object's status, and clears it
after a success: a status amended under the object's version, retried on a conflict,
never raised into the worker (a base class of
:class:`~reconcile.controller.controlling.Controller`)."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable

from opentelemetry import trace

from reconcile.api.client import Client
from reconcile.controller.caching import Cache, CachedClient
from reconcile.controller.terminal import cleared, with_terminal
from reconcile.errors import ConflictError, NotFoundError, TerminalError
from reconcile.model.kinds import Kind
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource

__all__ = ["Amending"]

LOG = logging.getLogger("reconcile.controller")


class Amending:
    """The controller's terminal error record in status (what the controller sets in its
    ``__init__`` is declared here)."""

    name: str
    kind: Kind
    client: Client
    cache: Cache
    gave_up: dict[ObjectKey, str]
    _writer: CachedClient

    async def _clear_terminal(self, key: ObjectKey) -> None:
        """A success after a terminal error: the terminal record in status goes."""
        await self._amend_status(key, lambda obj: cleared(obj, self._now()))

    async def _terminated(self, key: ObjectKey, exc: TerminalError, span: trace.Span) -> str:
        """A TerminalError: no retry; say so in status (the terminal record)."""
        message = str(exc) or type(exc).__name__
        self.gave_up[key] = message
        span.set_status(trace.StatusCode.ERROR, str(exc))
        LOG.warning("%s: %s: terminal: %s", self.name, key, exc)
        await self._amend_status(key, lambda obj: with_terminal(obj, message, self._now()))
        return "terminal"

    async def _amend_status(self, key: ObjectKey, amend: Callable[[AnyResource], AnyResource | None]) -> None:
        """Write the status ``amend`` makes of the object (nothing when it returns None),
        guarded by the object's version: on a conflict, read the object again and retry.
        Bookkeeping: a failure is logged, never raised into the worker."""
        try:
            obj = await self.cache.get(key)
            for _ in range(3):
                new = None if obj is None else amend(obj)
                if new is None:
                    return
                try:
                    await self._writer.update_status(new)
                except ConflictError:
                    obj = await self.client.get(self.kind, key.name, namespace=key.namespace)
                    continue
                return
            LOG.warning(
                "%s: %s: status kept changing; the terminal error record was not updated", self.name, key
            )
        except NotFoundError:
            return  # deleted meanwhile: nothing to record it on
        except Exception:
            LOG.exception("%s: %s: could not update the terminal error record in status", self.name, key)

    def _now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.client.clock(), datetime.UTC)
