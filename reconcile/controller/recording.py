"""How the managed reconciler writes what it did: action events with their bookkeeping
(markers, finalizer, status) in one atomic write, and status alone when only it changed;
the identity of the external resource recorded with them (:func:`with_identity`).

A reconcile's last write is not awaited: it goes back to the controller with the result
(:meth:`Recording._leaving`, ``Result.pending``), which lets the worker go on while it
lands and keeps the key in flight until it is durable. Every write a later step depends
on (the create-pending marker before the provider's create, the finalizer before an
update) is awaited where it is made."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from reconcile.controller.caching import CachedClient
from reconcile.controller.reconciling import Result
from reconcile.controller.statuses import Action, Verdict, new_status
from reconcile.controller.telemetry import NOT_RECORDING, Telemetry
from reconcile.model.external import ANNOTATION_EXTERNAL_IDENTITY, Observation
from reconcile.model.resource import AnyResource
from reconcile.model.serde import format_epoch

__all__ = ["Recording", "with_identity"]


class Recording:
    """The writes of a reconciler that records its actions (a base class: the managed
    reconciler sets ``client``, ``telemetry`` and ``_wall``)."""

    client: CachedClient
    telemetry: Telemetry
    _wall: Callable[[], float]

    async def _act(
        self,
        obj: AnyResource,
        events: list[Action],
        *,
        annotations: dict[str, str | None] | None = None,
        finalizer: str | None = None,
        status: Any = None,
    ) -> AnyResource:
        """Record action events with their bookkeeping (markers, finalizer, status) in one
        atomic write."""
        with self._span("store.record_actions", events):
            return await self.client.engine.record_actions(
                obj,
                self._events(obj, events),
                annotations=annotations,
                add_finalizer=finalizer,
                status=status,
            )

    async def _release(self, obj: AnyResource, finalizer: str, events: list[Action]) -> None:
        """Record action events and remove ``finalizer`` in one write (the last finalizer
        of a deleting object: the object goes with it)."""
        with self._span("store.release", events):
            await self.client.engine.release(obj, finalizer, self._events(obj, events))

    def _span(self, name: str, events: list[Action]) -> contextlib.AbstractContextManager[Any]:
        """The write's span, its attributes built only when something records spans."""
        if not self.telemetry.recording:
            return NOT_RECORDING
        return self.telemetry.span(name, {"event.types": ",".join(e.type for e in events)})

    @staticmethod
    def _events(obj: AnyResource, events: list[Action]) -> list[tuple[str, dict[str, Any] | None]]:
        generation = obj.metadata.generation
        return [
            (e.type, {"message": e.message, "generation": generation} if e.message else None) for e in events
        ]

    async def _status(
        self,
        obj: AnyResource,
        observation: Observation | None = None,
        *,
        synced: Verdict,
        ready: Verdict | None = None,
    ) -> None:
        new = self._new_status(obj, observation, synced=synced, ready=ready)
        if new is not None:
            await self._write_status(obj, new)

    def _status_then(
        self,
        obj: AnyResource,
        observation: Observation | None = None,
        *,
        synced: Verdict,
        ready: Verdict | None = None,
        result: Result | None = None,
    ) -> Result | None:
        """``result`` after :meth:`_status`'s write, left to land (``result`` alone when
        the status says so already)."""
        new = self._new_status(obj, observation, synced=synced, ready=ready)
        return result if new is None else self._leaving(self._write_status(obj, new), result)

    @staticmethod
    def _leaving(write: Awaitable[object], result: Result | None) -> Result:
        """``result`` with ``write``, the reconcile's last write (not awaited), for the
        controller to land (``Result.pending``)."""
        if result is None:
            return Result(pending=write)
        return Result(result.requeue_after, result.requeue, write)

    async def _write_status(self, obj: AnyResource, new: Any) -> None:
        with self.telemetry.span("store.update_status"):
            await self.client.update_status(attrs.evolve(obj, status=new), force=True)

    def _new_status(
        self,
        obj: AnyResource,
        observation: Observation | None,
        *,
        synced: Verdict,
        ready: Verdict | None = None,
    ) -> Any:
        """The status these conditions make, or None when it equals the current one."""
        return new_status(obj, observation, self._wall, synced=synced, ready=ready)

    def _now(self) -> str:
        return format_epoch(self._wall())


def with_identity(
    obj: AnyResource,
    observation: Observation,
    annotations: dict[str, str | None] | None,
    *,
    ours_for_sure: bool,
) -> dict[str, str | None] | None:
    """``annotations`` with the identity ``observation`` reports recorded, when it is what
    our own call left (``ours_for_sure``: the call's answer; otherwise a look that finds
    our mark) and differs from the record: what an unmarked resource is later compared
    with (:func:`reconcile.ours`). Never from a look that does not prove it ours."""
    identity = observation.identity
    if (
        identity is None
        or not (ours_for_sure or observation.owner == obj.metadata.uid)
        or identity == obj.metadata.annotations.get(ANNOTATION_EXTERNAL_IDENTITY)
    ):
        return annotations
    return {**(annotations or {}), ANNOTATION_EXTERNAL_IDENTITY: identity}
