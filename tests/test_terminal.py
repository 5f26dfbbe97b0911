"""A TerminalError is recorded in status (Synced=False), once, and cleared by a success."""

from __future__ import annotations

import asyncio
import datetime

import attrs
from helpers import running, settle, widget

from reconcile import Client, Condition, ConditionStatus, ObjectMeta, Resource, Status, TerminalError
from reconcile.controller import Controller, Request, Result
from reconcile.controller.terminal import CONTROLLER_MANAGER, TERMINAL_REASON, cleared, with_terminal
from reconcile.testing import WIDGET, FakeClock

NOW = datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC)


class Refuser:
    """Raises TerminalError for the names in ``refuse``; can write its own Synced=False
    first, or a status without telling the controller's cache (so the cache lags)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.controller: Controller | None = None
        self.refuse: dict[str, str] = {}
        self.calls: dict[str, int] = {}
        self.own_condition = False
        self.write_behind_cache = False

    async def reconcile(self, request: Request) -> Result | None:
        """Refuse, or succeed without writing anything."""
        self.calls[request.name] = self.calls.get(request.name, 0) + 1
        message = self.refuse.get(request.name)
        if message is None:
            return None
        assert self.controller is not None
        obj = self.controller.informer.get(request.key)
        assert obj is not None
        if self.own_condition:
            generation = obj.metadata.generation
            said = Condition("Synced", ConditionStatus.FALSE, "SizeRefused", message, NOW, generation)
            status = attrs.evolve(obj.status, conditions=(said,))
            await self.client.update_status(attrs.evolve(obj, status=status))
        if self.write_behind_cache:
            status = attrs.evolve(obj.status, observed_generation=obj.metadata.generation)
            await self.client.update_status(attrs.evolve(obj, status=status))
        raise TerminalError(message)


def make(client: Client, clock: FakeClock) -> tuple[Controller, Refuser]:
    """A Widget controller with a Refuser, no resync."""
    reconciler = Refuser(client)
    controller = Controller(client, WIDGET, reconciler, clock=clock, workers=2, resync_period=None)
    reconciler.controller = controller
    return controller, reconciler


async def synced(client: Client, name: str) -> Condition | None:
    """The stored object's Synced condition."""
    return (await client.get("widget", name)).status.condition("Synced")


async def spin() -> None:
    """Let anything already due run (a follow-up reconcile would be due at once)."""
    for _ in range(100):
        await asyncio.sleep(0)


class TestRecorded:
    """What the controller writes when a reconciler gives up."""

    async def test_terminal_error_is_recorded_once_and_triggers_nothing(
        self, client: Client, clock: FakeClock
    ) -> None:
        """Synced=False, reason TerminalError, the message and the generation, written by
        the controller's own manager; that write does not bring the key back."""
        await client.apply(widget("big", 7))
        await client.apply(widget("fine"))
        controller, reconciler = make(client, clock)
        reconciler.refuse["big"] = "size 7 is more than this site allows"
        async with running(controller):
            await settle(lambda: reconciler.calls.get("big") == 1 and reconciler.calls.get("fine") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
            await spin()
            assert reconciler.calls["big"] == 1, "the record is not a change to reconcile"
            revision = await client.revision()
            clock.advance(3600)
            await spin()
            assert reconciler.calls["big"] == 1, "no retry"
            assert await client.revision() == revision, "nothing more written"
        condition = await synced(client, "big")
        assert condition is not None
        assert (condition.status, condition.reason) == (ConditionStatus.FALSE, TERMINAL_REASON)
        assert condition.message == "size 7 is more than this site allows"
        assert condition.observed_generation == 1
        history = await client.history("widget", "big")
        assert [(e.type, e.actor) for e in history][-1] == ("StatusChanged", CONTROLLER_MANAGER)
        assert await synced(client, "fine") is None, "a success records nothing"

    async def test_success_after_a_change_clears_it(self, client: Client, clock: FakeClock) -> None:
        """The spec changes, the reconcile succeeds: Synced=True for the new generation."""
        await client.apply(widget("big", 7))
        controller, reconciler = make(client, clock)
        reconciler.refuse["big"] = "too big"
        async with running(controller):
            await settle(lambda: reconciler.calls.get("big") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
            del reconciler.refuse["big"]
            await client.apply(widget("big", 2))
            await settle(lambda: reconciler.calls.get("big") == 2)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
        condition = await synced(client, "big")
        assert condition is not None
        assert (condition.status, condition.reason, condition.observed_generation) == (
            ConditionStatus.TRUE,
            "ReconcileSuccess",
            2,
        )

    async def test_a_record_from_before_a_restart_is_cleared(self, client: Client, clock: FakeClock) -> None:
        """A controller that starts on an object holding a terminal record (another run
        wrote it) clears it when its own reconcile succeeds."""
        applied = await client.apply(widget("w"))
        recorded = with_terminal(applied, "refused last time", NOW)
        assert recorded is not None
        await client.update_status(recorded, manager=CONTROLLER_MANAGER)
        controller, reconciler = make(client, clock)
        async with running(controller):
            await settle(lambda: reconciler.calls.get("w") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
        condition = await synced(client, "w")
        assert condition is not None
        assert (condition.status, condition.reason) == (ConditionStatus.TRUE, "ReconcileSuccess")

    async def test_the_reconcilers_own_words_are_kept(self, client: Client, clock: FakeClock) -> None:
        """A reconciler that wrote Synced=False for this generation itself (as the managed
        reconciler does) is not overwritten."""
        await client.apply(widget("big", 7))
        controller, reconciler = make(client, clock)
        reconciler.refuse["big"] = "too big"
        reconciler.own_condition = True
        async with running(controller):
            await settle(lambda: reconciler.calls.get("big") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
        condition = await synced(client, "big")
        assert condition is not None
        assert condition.reason == "SizeRefused"
        history = await client.history("widget", "big")
        assert CONTROLLER_MANAGER not in {e.actor for e in history}

    async def test_a_lagging_cache_is_read_again(self, client: Client, clock: FakeClock) -> None:
        """The reconciler wrote status behind the cache's back: the guarded write
        conflicts, the controller reads the object again and keeps what was written."""
        await client.apply(widget("big", 7))
        controller, reconciler = make(client, clock)
        reconciler.refuse["big"] = "too big"
        reconciler.write_behind_cache = True
        async with running(controller):
            await settle(lambda: reconciler.calls.get("big") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
        obj = await client.get("widget", "big")
        assert obj.status.observed_generation == 1, "the reconciler's write survived"
        condition = obj.status.condition("Synced")
        assert condition is not None
        assert condition.reason == TERMINAL_REASON

    async def test_an_object_deleted_meanwhile_is_harmless(self, client: Client, clock: FakeClock) -> None:
        """Nothing to record on: the worker goes on."""
        await client.apply(widget("gone"))
        controller, reconciler = make(client, clock)

        class Deleter(Refuser):
            async def reconcile(self, request: Request) -> Result | None:
                self.calls[request.name] = self.calls.get(request.name, 0) + 1
                if controller.informer.get(request.key) is None:
                    return None  # the deletion's own reconcile
                await self.client.delete("widget", request.name)
                raise TerminalError("gave up")

        deleter = Deleter(client)
        controller.reconciler = deleter
        async with running(controller):
            await settle(lambda: deleter.calls.get("gone") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
            await client.apply(widget("again"))
            await settle(lambda: deleter.calls.get("again") == 1)
            await asyncio.wait_for(controller.queue.wait_idle(), 10)
        assert reconciler.calls == {}
        assert [e.type for e in await client.history("widget", "again")] == ["Created", "Deleted"]


class TestFunctions:
    """The status edits themselves."""

    def test_a_status_without_conditions_gets_nothing(self) -> None:
        """A kind whose status is not a Status (or not registered: a mapping) is left alone."""
        obj = Resource("x.dev/v1", "Thing", ObjectMeta(name="t", generation=1), {}, {"phase": "odd"})
        assert with_terminal(obj, "no", NOW) is None
        assert cleared(obj, NOW) is None

    def test_clear_touches_only_the_controllers_record(self) -> None:
        """A Synced=False the reconciler wrote (another reason) stays."""
        theirs = Condition("Synced", ConditionStatus.FALSE, "SizeRefused", "", NOW, 1)
        obj = Resource("x.dev/v1", "Thing", ObjectMeta(name="t", generation=1), {}, Status(1, (theirs,)))
        assert cleared(obj, NOW) is None

    def test_a_newer_generation_is_recorded_again(self) -> None:
        """A record for an older generation does not stop the record of this one."""
        old = Condition("Synced", ConditionStatus.FALSE, TERMINAL_REASON, "old", NOW, 1)
        obj = Resource("x.dev/v1", "Thing", ObjectMeta(name="t", generation=2), {}, Status(1, (old,)))
        new = with_terminal(obj, "new", NOW)
        assert new is not None
        condition = new.status.condition("Synced")
        assert (condition.message, condition.observed_generation) == ("new", 2)
