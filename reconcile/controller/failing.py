"""How the managed reconciler fails: it records what failed (``ObserveFailed``), says why
in status (``Synced=False``; after a failed observe ``Ready=Unknown``), forgets the object
as steady, and lets the controller retry, or, for a permanent error, gives up until the
spec or the annotations change ("no retry until the spec changes", resyncs included)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from reconcile.controller.recording import Recording
from reconcile.controller.statuses import Action, Verdict, cannot_tell, repeats
from reconcile.errors import FencedError, NotOwnedError, PermanentError, TerminalError
from reconcile.model.conditions import ConditionStatus
from reconcile.model.events import ActionType
from reconcile.model.external import ExternalClient, Observation
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource

__all__ = ["Failing"]

LOG = logging.getLogger("reconcile.managed")


class Failing(Recording):
    """The failures of a reconciler that records its actions (a base class: the managed
    reconciler sets ``_call``, ``_gave_up`` and ``_steady`` besides what
    :class:`Recording` needs)."""

    _call: Callable[..., Awaitable[Any]]
    #: key -> (uid, generation, annotations) of objects whose last attempt failed
    #: permanently.
    _gave_up: dict[ObjectKey, tuple[str | None, int, dict[str, str]]]
    #: key -> the cached object a pass found steady.
    _steady: dict[ObjectKey, AnyResource]

    def _still_given_up(self, obj: AnyResource) -> None:
        """Raise TerminalError again, without calling the provider, when the last attempt
        failed permanently and neither the spec (its generation) nor the annotations
        changed since: "no retry until the spec changes", resyncs included."""
        meta = obj.metadata
        gave_up = self._gave_up.get(obj.key)
        if gave_up is None:
            return
        if gave_up != (meta.uid, meta.generation, meta.annotations):
            del self._gave_up[obj.key]
            return
        synced = obj.status.condition("Synced")
        raise TerminalError(synced.message if synced is not None else "failed permanently")

    async def _failed(
        self, obj: AnyResource, exc: BaseException, *, ready: Verdict | None = None
    ) -> NoReturn:
        """Say why in Synced (and what ``ready`` says in Ready), then let the controller
        retry (or not, for permanent errors)."""
        self._steady.pop(obj.key, None)
        if isinstance(exc, FencedError):
            raise exc  # the key is another runner's now: nothing of ours to record on it
        permanent = isinstance(exc, PermanentError)
        reason = ActionType.NOT_OWNED if isinstance(exc, NotOwnedError) else "ReconcileError"
        try:
            await self._status(
                obj,
                synced=Verdict(ConditionStatus.FALSE, reason, str(exc) or type(exc).__name__),
                ready=ready,
            )
        except Exception:
            LOG.exception("%s: could not record the failure in status", obj.key)
        if permanent:
            meta = obj.metadata
            self._gave_up[obj.key] = (meta.uid, meta.generation, dict(meta.annotations))
            raise TerminalError(str(exc)) from exc
        raise exc

    async def _observe(self, obj: AnyResource, external: ExternalClient) -> Observation:
        try:
            observation: Observation = await self._call("observe", external.observe, obj)
        except Exception as exc:  # noqa: BLE001 - recorded, then classified and re-raised
            await self._observe_failed(obj, exc)
        return observation

    async def _observe_failed(self, obj: AnyResource, exc: Exception) -> NoReturn:
        """Record ObserveFailed, say why in status, raise (see :meth:`_failed`). Ready
        turns Unknown (Kubernetes' "we cannot tell"): a Ready=True left from an earlier
        look is no longer known to hold, and a reader must not trust it; the message
        keeps when it was last known Ready."""
        if not repeats(obj, exc):
            await self._act(obj, [Action(ActionType.OBSERVE_FAILED, str(exc))])
        await self._failed(obj, exc, ready=cannot_tell(obj, exc))
