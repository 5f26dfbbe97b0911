"""The managed reconciler: the engine's generic loop for provider kinds (after Crossplane).

For each key it reads the object from the informer's cache, asks the decision ladder
(:mod:`reconcile.controller.ladder`: pause, policies, deletion, markers, finalizer,
ownership, create / adopt / update / steady) for the step to take, observing first when
the step depends on what is outside, and executes it: a status that says so (paused, an
invalid policy, observe only, not ours), a delete or the release of the finalizer, an
adoption, a create, an update (recording ``DriftDetected`` when the spec had not
changed), the record of a resource found in place, or only a report. ``plan`` prints the
same step.

After acting it records the outcome with the status that follows, from the observation
the provider's call returned or, when it returned none, from observing again. That last
write is returned unawaited (``Result.pending``): the controller lands it while the
worker goes on, and reconciles the key again only once it is durable.

Every action is an event in the log (``CreateRequested`` -> ``CreateSucceeded`` /
``CreateFailed``, ``UpdateRequested`` ..., ``DeleteRequested`` ..., ``DriftDetected``,
``ObserveFailed``), so ``history`` tells the whole story. Status (``observed_generation``,
``Ready``, ``Synced``, ``at_provider``) is written only when it changed.

Crash safety of create: the ``external-create-pending`` annotation is written (durably)
before ``create`` is called and ``external-create-succeeded`` after. Finding "pending"
without "succeeded" and no external resource means a crash came between: with a
deterministic identity the create is simply retried (it is idempotent); otherwise the
engine cannot know whether a resource was made, so it stops with ``Synced=False``,
reason ``CreatePendingUnknown``, rather than risk a duplicate.

Ownership: an external resource that exists but carries another owner's marker, or no
marker and not the identity our own last create or update recorded
(``reconcile.dev/external-identity``), is never touched (``NotOwned``): see
:func:`reconcile.ours`, the one rule.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import NoReturn

from reconcile.controller.calling import ProviderCalls
from reconcile.controller.context import Context
from reconcile.controller.failing import Failing
from reconcile.controller.ladder import (
    STEADY,
    Adopt,
    Create,
    CreateBlind,
    CreatePendingUnknown,
    Delete,
    DeleteBlind,
    Finalized,
    InvalidPolicy,
    NeedsObservation,
    NotOwned,
    ObserveOnly,
    Orphan,
    Paused,
    RecordFound,
    SkipDelete,
    Steady,
    Step,
    Update,
    decide,
    steady_again,
)
from reconcile.controller.reconciling import Request, Result
from reconcile.controller.recording import with_identity
from reconcile.controller.statuses import Action, Verdict, new_status, repeats
from reconcile.errors import (
    DeadlineExceededError,
    NotOwnedError,
    TerminalError,
)
from reconcile.model.conditions import ConditionStatus
from reconcile.model.events import ActionType
from reconcile.model.external import (
    ANNOTATION_ADOPT,
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_CREATE_SUCCEEDED,
    ANNOTATION_EXTERNAL_IDENTITY,
    ANNOTATION_EXTERNAL_NAME,
    FINALIZER,
    Created,
    ExternalClient,
    Observation,
    client_of,
)
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.model.serde import parse_timestamp

__all__ = ["ENGINE_MANAGER", "ManagedReconciler"]

ENGINE_MANAGER = "reconcile-engine"
TRUE, FALSE = ConditionStatus.TRUE, ConditionStatus.FALSE
SUCCESS = Verdict(TRUE, "ReconcileSuccess")
AVAILABLE = Verdict(TRUE, "Available")
#: How soon to look again when the external system has not yet caught up with an action.
_SETTLE_POLL = 1.0


class ManagedReconciler(Failing):
    """Drives one provider kind through observe / create / update / delete."""

    def __init__(
        self,
        context: Context,
        connect: Callable[[], Awaitable[ExternalClient]],
        *,
        poll_interval: float = 60.0,
        poll_jitter: float = 0.1,
        creation_grace: float = 0.0,
        attempts: int = 3,
        call_timeout: float | None = 60.0,
        random_source: Callable[[], float] = random.random,
    ) -> None:
        #: Reads from the cache, writes through the API as the engine (ENGINE_MANAGER).
        self.client = context.client
        self.kind = context.kind
        self._connect = connect
        self._client: ExternalClient | None = None
        self.clock = context.clock
        self.poll_interval = poll_interval
        self.poll_jitter = poll_jitter
        self.creation_grace = creation_grace
        self.telemetry = context.telemetry
        self._calls = ProviderCalls(
            self.kind.kind, self.clock, self.telemetry, attempts=attempts, timeout=call_timeout
        )
        self._call = self._calls.call
        self._wall = self.client.wall_clock
        self._random = random_source
        #: key -> (uid, generation, annotations) of objects whose last attempt failed
        #: permanently: not attempted again (by a resync) until one of those changes, or
        #: the process restarts.
        self._gave_up: dict[ObjectKey, tuple[str | None, int, dict[str, str]]] = {}
        #: key -> the cached object whose status a pass found already saying Synced and
        #: Ready for it: the next poll or resync of that very object (the cache's, until
        #: anything in it changes) compares only what it observed (``at_provider``).
        self._steady: dict[ObjectKey, AnyResource] = {}

    async def _external(self) -> ExternalClient:
        # Connect once; the Runtime shares one client per provider between its kinds (of
        # which this kind's serves it, when the provider gave one per kind).
        if self._client is None:
            self._client = client_of(await self._connect(), self.kind)
        return self._client

    # -- the loop --------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        """One pass over one object."""
        key = request.key
        obj = await self.client.engine.get(key)  # None, not NotFoundError, when gone
        if obj is None:
            self._gave_up.pop(key, None)
            self._steady.pop(key, None)
            return None
        if self._steady.get(key) is not obj:
            return await self._pass(key, obj, None)
        # The common case of a poll or a resync: nothing in the object changed since a
        # pass found it steady with its status already saying so (every rung of the
        # ladder that reads the object alone gave the same then): only what the provider
        # observes may differ.
        external = self._client if self._client is not None else await self._external()
        try:
            observation: Observation = await self._call("observe", external.observe, obj)
        except Exception as exc:  # noqa: BLE001 - recorded, then classified and re-raised
            await self._observe_failed(obj, exc)
        if steady_again(obj, observation) and getattr(obj.status, "at_provider", None) in (
            None,
            observation.observed,
        ):
            return self._poll()
        del self._steady[key]
        return await self._pass(key, obj, observation)

    async def _pass(self, key: ObjectKey, obj: AnyResource, observed: Observation | None) -> Result | None:
        """The whole pass: the ladder's step (observing first, unless ``observed``
        already, when the step depends on it), executed."""
        step = decide(obj, self.kind, observed)
        if isinstance(step, Paused):
            return self._status_then(
                obj, synced=Verdict(FALSE, "ReconcilePaused", "reconciliation is paused by annotation")
            )
        if isinstance(step, InvalidPolicy):
            await self._status(obj, synced=Verdict(FALSE, "InvalidPolicy", step.message))
            raise TerminalError(step.message)
        if obj.metadata.deletion_timestamp is not None:  # the ladder's deleting rungs
            return await self._finalize(obj, step)
        if self._gave_up:
            self._still_given_up(obj)
        external = self._client if self._client is not None else await self._external()
        if isinstance(step, CreateBlind):
            return await self._create(key, obj, external, recreate=False)
        observation = observed if observed is not None else await self._observe(obj, external)
        if isinstance(step, NeedsObservation):
            step = decide(obj, self.kind, observation)
        return await self._observed(key, obj, external, step, observation)

    async def _observed(
        self, key: ObjectKey, obj: AnyResource, external: ExternalClient, step: Step, observation: Observation
    ) -> Result | None:
        """Execute a step decided by what observing found."""
        if isinstance(step, ObserveOnly):
            ready = AVAILABLE if step.exists else Verdict(FALSE, "NotFound", "does not exist")
            return self._status_then(
                obj,
                observation,
                ready=ready,
                synced=Verdict(TRUE, "ReconcileSuccess", "observe only"),
                result=self._poll(),
            )
        if isinstance(step, Adopt):
            return await self._adopt(obj, external, observation)
        if isinstance(step, NotOwned):
            await self._not_owned(obj, observation)
        if isinstance(step, CreatePendingUnknown):
            await self._status(obj, synced=Verdict(FALSE, "CreatePendingUnknown", step.message))
            raise TerminalError(step.message)
        if isinstance(step, Create):
            return await self._create(key, obj, external, recreate=step.recreate)
        assert isinstance(step, Update | RecordFound | Steady), step
        if step.add_finalizer:
            # (A create adds it in the same write as its pending marker.)
            obj = await self.client.add_finalizer(
                self.kind, obj.metadata.name, FINALIZER, namespace=obj.metadata.namespace
            )
        if isinstance(step, Update):
            return await self._update(key, obj, external, observation, step)
        ready, synced = AVAILABLE, SUCCESS
        if isinstance(step, RecordFound):
            found = {ANNOTATION_CREATE_SUCCEEDED: self._now(), ANNOTATION_CREATE_PENDING: None}
            recorded = self._act(
                obj,
                [Action(ActionType.CREATE_SUCCEEDED, step.how)],
                annotations=with_identity(obj, observation, found, ours_for_sure=False),
                status=self._new_status(obj, observation, synced=synced, ready=ready),
            )
            return self._leaving(recorded, self._poll())
        new = new_status(obj, observation, self._wall, synced=synced, ready=ready)
        if new is not None:
            return self._leaving(self._write_status(obj, new), self._poll())
        # Steady (the ladder said so) with its status saying so already: what
        # _remember_steady checks after an action, known here without asking again.
        self._steady[key] = obj
        return self._poll()

    def _poll(self) -> Result:
        spread = self.poll_interval * self.poll_jitter
        return Result(requeue_after=self.poll_interval + spread * (2 * self._random() - 1))

    # -- actions -------------------------------------------------------------------------------

    async def _create(
        self, key: ObjectKey, obj: AnyResource, external: ExternalClient, *, recreate: bool
    ) -> Result | None:
        requested: list[Action] = []
        if recreate:
            succeeded = obj.metadata.annotations[ANNOTATION_CREATE_SUCCEEDED]
            age = self._wall() - parse_timestamp(succeeded).timestamp()
            if age < self.creation_grace:
                reason = "waiting for the external system to show the created resource"
                return self._status_then(
                    obj,
                    ready=Verdict(FALSE, "Creating", reason),
                    synced=SUCCESS,
                    result=Result(requeue_after=min(_SETTLE_POLL, self.creation_grace - age)),
                )
            requested.append(
                Action(ActionType.DRIFT_DETECTED, "the external resource was deleted out of band")
            )
        requested.append(Action(ActionType.CREATE_REQUESTED))
        if self.kind.atomic_create and FINALIZER in obj.metadata.finalizers:
            # Nothing to write first: the finalizer came with the apply, and a crash after
            # the create leaves a resource that observing finds marked as this object's.
            # The request is recorded with the outcome, in one write.
            early: list[Action] = requested
        else:
            # One write: the finalizer (so a delete can clean up), the pending marker (so
            # a crash during create is known afterwards) and the CreateRequested event.
            early = []
            obj = await self._act(
                obj,
                requested,
                annotations={ANNOTATION_CREATE_PENDING: self._now(), ANNOTATION_CREATE_SUCCEEDED: None},
                finalizer=FINALIZER,
            )
        try:
            created = Created.of(await self._call("create", external.create, obj))
        except Exception as exc:  # noqa: BLE001 - classified and re-raised (by _failed)
            # A create that answered with an error did not happen: the marker goes. One cut
            # short by its deadline may have: the marker stays, as after a crash, and the
            # next reconcile looks before it creates again.
            if isinstance(exc, NotOwnedError):
                # Somebody else's (found by an exclusive create, or made between our
                # observe and our create): look, and say so as an observe would have.
                try:
                    seen: Observation | None = await self._call("observe", external.observe, obj)
                except Exception:  # noqa: BLE001 - no look: recorded below as the create's failure
                    seen = None
                if seen is not None and seen.exists and seen.owner != obj.metadata.uid:
                    if not early:
                        # CreateRequested is in the log already (written with the pending
                        # marker before the call): its outcome goes beside it, so the
                        # history does not show a create of somebody else's resource as
                        # requested and never answered. (Written with the outcome, as for
                        # an atomic create, the request is not recorded at all.)
                        obj = await self._act(
                            obj,
                            [Action(ActionType.CREATE_FAILED, f"refused: {exc}")],
                            annotations={ANNOTATION_CREATE_PENDING: None},
                        )
                    await self._not_owned(obj, seen, {ANNOTATION_CREATE_PENDING: None})
            unknown = isinstance(exc, DeadlineExceededError)
            obj = await self._act(
                obj,
                [*early, Action(ActionType.CREATE_FAILED, str(exc))],
                annotations=None if unknown or early else {ANNOTATION_CREATE_PENDING: None},
            )
            await self._failed(obj, exc)
        done: dict[str, str | None] = {
            ANNOTATION_CREATE_SUCCEEDED: self._now(),
            ANNOTATION_CREATE_PENDING: None,
        }
        if created.external_name:
            done[ANNOTATION_EXTERNAL_NAME] = created.external_name
        return await self._settle(
            key,
            obj,
            external,
            "Creating",
            [*early, Action(ActionType.CREATE_SUCCEEDED)],
            annotations=done,
            known=created.observation,
        )

    async def _update(
        self,
        key: ObjectKey,
        obj: AnyResource,
        external: ExternalClient,
        observation: Observation,
        step: Update,
    ) -> Result | None:
        requested: list[Action] = []
        if step.drift:
            # The spec has not changed since we last made it so: the world moved.
            requested.append(
                Action(ActionType.DRIFT_DETECTED, step.diff or "the external resource differs from the spec")
            )
        requested.append(Action(ActionType.UPDATE_REQUESTED, step.diff))
        # Nothing written before the call: an update of a resource that is ours needs no
        # crash marker (after a crash, the next pass observes and updates again), so the
        # request is recorded with its outcome and the status, in one write.
        try:
            after: Observation | None = await self._call("update", external.update, obj, observation)
        except Exception as exc:  # noqa: BLE001 - classified and re-raised by _failed
            if not repeats(obj, exc):
                obj = await self._act(obj, [*requested, Action(ActionType.UPDATE_FAILED, str(exc))])
            await self._failed(obj, exc)
        return await self._settle(
            key,
            obj,
            external,
            "Updating",
            [*requested, Action(ActionType.UPDATE_SUCCEEDED)],
            annotations=None,
            known=after,
        )

    async def _settle(
        self,
        key: ObjectKey,
        obj: AnyResource,
        external: ExternalClient,
        doing: str,
        events: list[Action],
        *,
        annotations: dict[str, str | None] | None,
        known: Observation | None,
    ) -> Result | None:
        """Record the outcome, the markers and the status in one write, so status tells
        the truth at once: from what the provider's call returned (``known``), or else
        from observing again."""
        if known is not None:
            observation = known
        else:
            try:
                observation = await self._call("observe", external.observe, obj)
            except Exception as exc:  # noqa: BLE001 - recorded with the outcome, then classified
                obj = await self._act(
                    obj, [*events, Action(ActionType.OBSERVE_FAILED, str(exc))], annotations=annotations
                )
                await self._failed(obj, exc)
        annotations = with_identity(obj, observation, annotations, ours_for_sure=known is not None)
        synced = SUCCESS
        if observation.exists and observation.up_to_date:
            ready, result = AVAILABLE, self._poll()
        else:
            ready = Verdict(FALSE, doing, "waiting for the external system to reflect the change")
            result = Result(requeue_after=_SETTLE_POLL)
        status = self._new_status(obj, observation, synced=synced, ready=ready)
        recorded = self._act(obj, events, annotations=annotations, status=status)
        if ready is not AVAILABLE:
            return self._leaving(recorded, result)
        return self._leaving(self._steadied(key, recorded, observation), result)

    async def _steadied(
        self, key: ObjectKey, recorded: Awaitable[AnyResource], observation: Observation
    ) -> None:
        """``recorded``'s write, then :meth:`_remember_steady` of what it wrote (while the
        key is still in flight: before its next reconcile)."""
        self._remember_steady(key, await recorded, observation)

    def _remember_steady(self, key: ObjectKey, obj: AnyResource, observation: Observation) -> None:
        """Remember ``obj`` (what the cache now holds, written from ``observation``) as
        steady when a pass over it with that observation would find nothing to do: the
        ladder says :data:`STEADY` and its status already says Synced and Ready for its
        generation. The next poll or resync of it then only observes and asks the ladder's
        :func:`~reconcile.controller.ladder.steady_again` (a converged object's first
        resync included)."""
        if (
            key not in self._gave_up
            and decide(obj, self.kind, observation) is STEADY
            and new_status(obj, observation, self._wall, synced=SUCCESS, ready=AVAILABLE) is None
        ):
            self._steady[key] = obj  # (the queue's own key: a new one per object would cost memory)

    async def _not_owned(
        self, obj: AnyResource, observation: Observation, annotations: dict[str, str | None] | None = None
    ) -> NoReturn:
        """Say that the external resource is somebody else's and stop. A finding, not an
        action: recorded once (with the status that says it, in one write), not again at
        every resync or poll."""
        whose = f" (it is marked {observation.owner})" if observation.owner else ""
        message = f"the external resource exists but was not created by this object{whose}; it is left alone"
        status = self._new_status(obj, observation, synced=Verdict(FALSE, ActionType.NOT_OWNED, message))
        if status is not None or annotations:
            await self._act(
                obj, [Action(ActionType.NOT_OWNED, message)], annotations=annotations, status=status
            )
        raise TerminalError(message)

    async def _adopt(
        self, obj: AnyResource, external: ExternalClient, observation: Observation
    ) -> Result | None:
        """Take over an existing external resource that is not ours, as asked by the
        ``reconcile.dev/adopt`` annotation (Terraform's import): the provider marks it
        ours, ``Adopted`` records it (with whose it was), the annotation goes, and the
        next reconcile brings the resource to the spec like any other."""
        adopt = getattr(external, "adopt", None)
        if adopt is None:
            message = f"the {self.kind.kind} provider cannot adopt an existing resource; it is left alone"
            await self._status(obj, synced=Verdict(FALSE, "NotOwned", message))
            raise TerminalError(message)
        await self._call("adopt", adopt, obj)
        whose = f"marked {observation.owner}" if observation.owner else "unmarked"
        adopted: dict[str, str | None] = {ANNOTATION_ADOPT: None, ANNOTATION_CREATE_SUCCEEDED: self._now()}
        # The resource taken over is from now on the one ours is (a replacement of it is
        # not): its identity, as the look before the adopt saw it, is the record.
        adopted[ANNOTATION_EXTERNAL_IDENTITY] = observation.identity
        recorded = self._act(
            obj,
            [Action(ActionType.ADOPTED, f"took over the existing external resource ({whose})")],
            annotations=adopted,
            finalizer=FINALIZER,
        )
        return self._leaving(recorded, Result(requeue=True))

    async def _finalize(self, obj: AnyResource, step: Step) -> Result | None:
        """Clean up, then record what was done and release the finalizer in one write
        (the object goes with it). Nothing is written before the external delete: after a
        crash during it, the next pass finds the resource gone, or deletes it again."""
        if isinstance(step, Finalized):
            return None
        events: list[Action] = []
        if isinstance(step, Orphan):
            policies = f"deletion policy {step.deletion}, management policy {step.management}"
            events = [Action(ActionType.ORPHANED, policies)]
        else:
            external = await self._external()
            if isinstance(step, NeedsObservation):
                step = decide(obj, self.kind, await self._observe(obj, external))
            skipped = "the external resource is not ours; it is left alone"
            if isinstance(step, SkipDelete):
                events = [Action(ActionType.DELETE_SKIPPED, skipped)]
            elif isinstance(step, Delete | DeleteBlind):
                requested = Action(ActionType.DELETE_REQUESTED)
                try:
                    after: Observation | None = await self._call("delete", external.delete, obj)
                except NotOwnedError as exc:
                    events = [requested, Action(ActionType.DELETE_SKIPPED, f"{skipped}: {exc}")]
                except Exception as exc:  # noqa: BLE001 - classified and re-raised by _failed
                    if not repeats(obj, exc):
                        obj = await self._act(obj, [requested, Action(ActionType.DELETE_FAILED, str(exc))])
                    await self._failed(obj, exc)
                else:
                    events = [requested, Action(ActionType.DELETE_SUCCEEDED)]
                    if (after if after is not None else await self._observe(obj, external)).exists:
                        message = "waiting for the external system to finish deleting"
                        status = self._new_status(
                            obj, None, ready=Verdict(FALSE, "Deleting", message), synced=SUCCESS
                        )
                        return self._leaving(self._act(obj, events, status=status), Result(requeue=True))
        return self._leaving(self._release(obj, FINALIZER, events), None)

    async def close(self) -> None:
        """Release what the reconciler holds beyond its calls (the deadline watchdog)."""
        await self._calls.close()
