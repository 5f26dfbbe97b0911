"""The conformance kit: what every provider must do, checked the same way for all.

A provider author describes how to reach behind the engine's back (:class:`Outside`) and
how to write a manifest, then runs every check in :data:`CHECKS`::

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
    async def test_conformance(check, tmp_path):
        await check(Harness(MyProvider(), MyOutside(), my_manifest, tmp_path / "state.db"))

Each check starts a :class:`~reconcile.Runtime` with only that provider, on a
:class:`FakeClock` (polls happen when the check advances time), and asserts one rule:

* apply converges, and a second pass (a poll) performs no external write;
* out-of-band deletion is recreated; out-of-band drift is repaired;
* delete removes the external resource and clears the finalizer; ``Orphan`` keeps it;
* create and delete are idempotent when repeated; observe changes nothing;
* a crash between create and recording it neither leaks nor duplicates;
* a resource that exists but is not ours is never touched, by the engine or by the
  provider's own create (and delete, for an ``EXCLUSIVE`` kind);
* a resource replaced by somebody else after our create is not ours (NotOwned, untouched,
  kept when the object is deleted);
* an observation a create, update or delete returns agrees with a real ``observe`` made
  right after it (every check verifies this for every call the engine makes).

And each kind's :class:`~reconcile.model.kinds.Behaviour` keeps its promise, the one the
engine relies on to skip a durable write or a provider call:

* ``ASSIGNED_NAME``: an interrupted create is not retried (``CreatePendingUnknown``), and
  nothing else is made (:func:`check_crash_between_create_and_record`);
* ``IDEMPOTENT_BY_NAME``: a repeated create makes no duplicate
  (:func:`check_create_and_delete_are_idempotent`), an interrupted one is found and not
  made again (:func:`check_crash_between_create_and_record`), and a create at the name of
  somebody else's resource raises NotOwnedError, writing nothing
  (:func:`check_create_refuses_a_foreign_resource`);
* ``MARKED_ON_CREATE``: besides, a create is marked as the object's in the same step:
  after a crash that left no marker at all (none is written before such a create), the
  engine finds the resource as its own (:func:`check_crash_between_create_and_record`),
  and a create's resource observes marked at once
  (:func:`check_create_marks_in_the_same_step`);
* ``EXCLUSIVE``: besides, the provider's delete refuses somebody else's resource
  (:func:`check_delete_refuses_a_foreign_resource`), and observe reports an interrupted
  create of its own as marked, since the engine counts no unmarked resource as an
  interrupted create of ours (:func:`check_crash_between_create_and_record`);
* ``EXCLUSIVE_MARKED_ON_CREATE``: the promises of both.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable

from reconcile.errors import NotOwnedError
from reconcile.model.events import ActionType
from reconcile.model.external import (
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_PAUSED,
    FINALIZER,
    Created,
    ListingOwned,
    bind_store,
    client_of,
)
from reconcile.testing.counting import CountingClient
from reconcile.testing.harness import POLL, Harness, Outside, annotated

__all__ = ["CHECKS", "CountingClient", "Harness", "Outside"]


# -- the checks -------------------------------------------------------------------------------


async def check_converges_and_second_pass_writes_nothing(h: Harness) -> None:
    """Apply converges; a later poll observes again and writes nothing, anywhere."""
    manifest = h.manifest("conf-a")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-a", manifest)
        assert await h.outside.exists(obj), "the external resource exists once Ready"
        await h.idle()
        writes, revision = h.writes, await runtime.client.revision()
        h.clock.advance(POLL * 1.2)
        await h.idle()
        assert h.writes == writes, "a poll of an up-to-date resource made an external write"
        assert await runtime.client.revision() == revision, "a no-op reconcile wrote to the log"


async def check_out_of_band_deletion_is_recreated(h: Harness) -> None:
    """An external resource deleted by hand comes back on the next poll."""
    manifest = h.manifest("conf-b")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-b", manifest)
        await h.idle()
        await h.outside.delete(obj)
        h.clock.advance(POLL * 1.2)

        async def back() -> bool:
            return await h.outside.exists(obj)

        await h.until(back)
        await h.ready("conf-b", manifest)


async def check_drift_is_repaired(h: Harness) -> None:
    """An external resource changed by hand is set back and recorded as DriftDetected."""
    manifest = h.manifest("conf-c")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-c", manifest)
        await h.idle()
        await h.outside.drift(obj)
        h.clock.advance(POLL * 1.2)
        kind = h.kind_name(manifest)

        async def repaired() -> bool:
            history = await runtime.client.history(kind, "conf-c")
            return any(e.type == ActionType.UPDATE_SUCCEEDED for e in history)

        await h.until(repaired)
        types = [e.type for e in await runtime.client.history(kind, "conf-c")]
        assert "DriftDetected" in types
        await h.ready("conf-c", manifest)


async def check_delete_removes_external_and_finalizer(h: Harness) -> None:
    """Deleting the resource deletes the external one, then the object."""
    manifest = h.manifest("conf-d")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-d", manifest)
        assert FINALIZER in obj.metadata.finalizers
        kind = h.kind_name(manifest)
        await runtime.client.delete(kind, "conf-d", namespace=obj.metadata.namespace)

        await h.until_gone(kind, "conf-d", obj.metadata.namespace)
        assert not await h.outside.exists(obj)


async def check_orphan_leaves_external(h: Harness) -> None:
    """With deletion policy Orphan the external resource outlives the object."""
    manifest = h.manifest("conf-e")
    manifest.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_DELETION_POLICY] = "Orphan"
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-e", manifest)
        kind = h.kind_name(manifest)
        await runtime.client.delete(kind, "conf-e", namespace=obj.metadata.namespace)

        await h.until_gone(kind, "conf-e", obj.metadata.namespace)
        assert await h.outside.exists(obj)
        assert h.calls["delete"] == 0


async def check_create_and_delete_are_idempotent(h: Harness) -> None:
    """create twice makes one resource; delete twice succeeds."""
    manifest = h.manifest("conf-f")
    async with h.running() as runtime:
        obj = await runtime.apply(annotated(manifest, {ANNOTATION_PAUSED: "true"}))
        client = await h.connect()
        before = await h.outside.count()
        created = Created.of(await client.create(obj))
        name = created.external_name
        if name:
            obj = await runtime.client.patch(
                h.kind_name(manifest),
                "conf-f",
                {"metadata": {"annotations": {"reconcile.dev/external-name": name}}},
                namespace=obj.metadata.namespace,
            )
        if created.observation is not None:
            seen = await client.observe(obj)
            assert (created.observation.exists, created.observation.up_to_date) == (True, True)
            assert (seen.exists, seen.up_to_date, seen.owner) == (True, True, created.observation.owner), (
                f"create returned {created.observation}, observe saw {seen}"
            )
        if runtime.client.kinds.lookup(obj.api_version, obj.kind).behaviour.deterministic_identity:
            await client.create(obj)
            assert await h.outside.count() == before + 1, "a repeated create made a duplicate"
        for _ in range(2):
            after = await client.delete(obj)
            assert after is None or not after.exists, f"delete returned {after}"
        assert not await h.outside.exists(obj)
        await client.close()


async def check_observe_changes_nothing(h: Harness) -> None:
    """observe, repeated, changes nothing: same answer, same count."""
    manifest = h.manifest("conf-g")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-g", manifest)
        client = await h.connect()
        count = await h.outside.count()
        first = await client.observe(obj)
        second = await client.observe(obj)
        assert first == second
        assert first.exists
        assert first.up_to_date
        assert await h.outside.count() == count
        await client.close()


async def check_crash_between_create_and_record(h: Harness) -> None:
    """A create whose success was never recorded neither leaks nor duplicates: with a
    deterministic identity the engine finds its resource (for an ``EXCLUSIVE`` kind, by the
    mark observe reports); otherwise it stops and says so. For a kind marked on create
    (``MARKED_ON_CREATE``, ``EXCLUSIVE_MARKED_ON_CREATE``), whose create has no marker
    written before it, also after a crash that left no marker at all."""
    kind = h.kind_of(h.manifest("conf-h"))
    await _crash_after_create(h, "conf-h", {ANNOTATION_CREATE_PENDING: "2026-01-01T00:00:00.000000Z"})
    if kind.behaviour.atomic_create:
        await _crash_after_create(h, "conf-h2", {})


async def _crash_after_create(h: Harness, name: str, markers: dict[str, str]) -> None:
    manifest = h.manifest(name)
    crashed = annotated(manifest, {ANNOTATION_PAUSED: "true", **markers})
    async with h.running() as runtime:
        obj = await runtime.apply(crashed)
        client = await h.connect()
        # (The process that died ran on this store: its client was bound to it.)
        bind_store(
            client, await runtime.client.engine.store_identity(), await runtime.client.engine.store_mark_key()
        )
        before = await h.outside.count()
        await client.create(obj)  # the create went through, then the process died
        await client.close()
        kind = h.kind_name(manifest)
        namespace = obj.metadata.namespace
        await runtime.client.patch(
            kind, name, {"metadata": {"annotations": {ANNOTATION_PAUSED: None}}}, namespace=namespace
        )
        if runtime.client.kinds.lookup(obj.api_version, obj.kind).behaviour.deterministic_identity:
            await h.ready(name, manifest)
            assert await h.outside.count() == before + 1, "the interrupted create was duplicated"
        else:

            async def stopped() -> bool:
                current = await runtime.client.get(kind, name, namespace=namespace)
                synced = current.status.condition("Synced")
                return synced is not None and synced.reason == "CreatePendingUnknown"

            await h.until(stopped)
            assert await h.outside.count() == before + 1, "the engine created a second resource"


async def check_not_ours_is_never_touched(h: Harness) -> None:
    """An existing external resource we did not create: NotOwned, untouched, kept on delete."""
    manifest = h.manifest("conf-i")
    await h.outside.plant_foreign(manifest)
    async with h.running() as runtime:
        await runtime.apply(manifest)
        kind = h.kind_name(manifest)

        async def refused() -> bool:
            synced = (await runtime.client.get(kind, "conf-i")).status.condition("Synced")
            return synced is not None and synced.reason == "NotOwned"

        await h.until(refused)
        obj = await runtime.client.get(kind, "conf-i")
        await runtime.client.delete(kind, "conf-i", namespace=obj.metadata.namespace)

        await h.until_gone(kind, "conf-i", obj.metadata.namespace)
        assert h.writes == 0, "the engine wrote to a resource that is not ours"
        assert await h.outside.exists(obj)


async def check_replaced_by_somebody_else_is_not_ours(h: Harness) -> None:
    """A resource replaced by somebody else after our create (deleted out of band and made
    again by them, without our mark) is not ours: the next poll says NotOwned, nothing is
    written to it, and deleting the object leaves it. Only our mark, or the identity the
    engine recorded at our own create or update (:func:`reconcile.ours`), proves a
    resource ours; that a create of ours was once recorded proves nothing about what is
    there now."""
    manifest = h.manifest("conf-m")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-m", manifest)
        if not runtime.client.kinds.lookup(obj.api_version, obj.kind).behaviour.deterministic_identity:
            return  # the system names each created resource: nothing can take its place
        await h.idle()
        replace = getattr(h.outside, "replace", None)
        if replace is not None:
            await replace(obj, manifest)
        else:
            await h.outside.delete(obj)
            await h.outside.plant_foreign(manifest)
        writes = h.writes
        h.clock.advance(POLL * 1.2)
        kind, namespace = h.kind_name(manifest), obj.metadata.namespace

        async def refused() -> bool:
            synced = (await runtime.client.get(kind, "conf-m", namespace=namespace)).status.condition(
                "Synced"
            )
            return synced is not None and synced.reason == "NotOwned"

        await h.until(refused)
        await runtime.client.delete(kind, "conf-m", namespace=namespace)
        await h.until_gone(kind, "conf-m", namespace)
        assert h.writes == writes, "the engine wrote to a resource somebody else put in place of ours"
        assert await h.outside.exists(obj), "deleting the object deleted somebody else's resource"


async def check_create_refuses_a_foreign_resource(h: Harness) -> None:
    """The provider's own ``create``, called directly for a resource somebody else made
    (deterministic identities: the same name): NotOwnedError, and nothing is written.
    The engine's observe would have stopped it first; a provider must not rely on that."""
    manifest = h.manifest("conf-j")
    await h.outside.plant_foreign(manifest)
    async with h.running() as runtime:
        obj = await runtime.apply(annotated(manifest, {ANNOTATION_PAUSED: "true"}))
        if not runtime.client.kinds.lookup(obj.api_version, obj.kind).behaviour.deterministic_identity:
            return  # the system names each created resource: a create cannot meet another's
        client = await h.connect()
        before = await h.outside.count()
        try:
            with contextlib.suppress(NotOwnedError):
                await client.create(obj)
                raise AssertionError("create of a resource that is not ours did not raise NotOwnedError")
            assert await h.outside.count() == before, "create of a foreign resource wrote one"
            assert await h.outside.exists(obj)
            observation = await client.observe(obj)
            assert observation.owner != obj.metadata.uid, "create marked a foreign resource as ours"
        finally:
            await client.close()


async def check_delete_refuses_a_foreign_resource(h: Harness) -> None:
    """For an ``EXCLUSIVE`` kind (the engine deletes without observing first): the
    provider's ``delete`` of a resource somebody else made raises NotOwnedError, and the
    resource stays."""
    manifest = h.manifest("conf-k")
    await h.outside.plant_foreign(manifest)
    async with h.running() as runtime:
        obj = await runtime.apply(annotated(manifest, {ANNOTATION_PAUSED: "true"}))
        if not runtime.client.kinds.lookup(obj.api_version, obj.kind).behaviour.exclusive_delete:
            return  # the engine observes before it deletes
        client = await h.connect()
        try:
            with contextlib.suppress(NotOwnedError):
                await client.delete(obj)
                raise AssertionError("delete of a resource that is not ours did not raise NotOwnedError")
            assert await h.outside.exists(obj), "delete of a foreign resource deleted it"
        finally:
            await client.close()


async def check_create_marks_in_the_same_step(h: Harness) -> None:
    """For a kind marked on create (``MARKED_ON_CREATE``, ``EXCLUSIVE_MARKED_ON_CREATE``:
    the engine writes no marker before the create): the provider's ``create``, called
    directly, leaves a resource that observe reports as the object's, by its mark, with
    nothing recorded of the create (a crash right after it leaves just that)."""
    manifest = h.manifest("conf-n")
    if not h.kind_of(manifest).behaviour.atomic_create:
        return  # the engine writes the create-pending marker first
    async with h.running() as runtime:
        obj = await runtime.apply(annotated(manifest, {ANNOTATION_PAUSED: "true"}))
        client = await h.connect()
        try:
            bind_store(
                client,
                await runtime.client.engine.store_identity(),
                await runtime.client.engine.store_mark_key(),
            )
            await client.create(obj)
            seen = await client.observe(obj)
            assert seen.exists, "the create made nothing observe can see"
            assert seen.owner == obj.metadata.uid, (
                f"a kind marked on create observed its create's resource with owner {seen.owner!r}, "
                f"not {obj.metadata.uid!r}: the mark must come with the create (else declare "
                "IDEMPOTENT_BY_NAME or EXCLUSIVE, whose marker the engine writes first)"
            )
            await client.delete(obj)
        finally:
            await client.close()


async def check_owned_listing_names_this_store(h: Harness) -> None:
    """For a client that lists what its store made (``ListingOwned``): a resource the
    engine created is listed once bound to the store's identity, and not by a client bound
    to another store's; ``delete_owned`` deletes it; nothing to check otherwise."""
    manifest = h.manifest("conf-l")
    async with h.running() as runtime:
        await runtime.apply(manifest)
        obj = await h.ready("conf-l", manifest)
        kind = h.kind_of(manifest)
        identity = await runtime.client.engine.store_identity()
        connected, other = await h.connect(), await h.connect()
        try:
            # (The kind's own client, when the provider gives one per kind.)
            ours, theirs = client_of(connected, kind), client_of(other, kind)
            if not isinstance(ours, ListingOwned):
                return
            bind_store(connected, identity, await runtime.client.engine.store_mark_key())
            bind_store(other, "0" * 16 if identity != "0" * 16 else "1" * 16, secrets.token_bytes(32))
            listed = [item for item in await ours.list_owned(kind) if item.uid == obj.metadata.uid]
            assert len(listed) == 1, f"the resource the engine made is listed once, not {len(listed)} times"
            assert isinstance(theirs, ListingOwned)
            assert all(item.uid != obj.metadata.uid for item in await theirs.list_owned(kind)), (
                "another store's client listed our resource"
            )
            await ours.delete_owned(kind, listed[0])
            assert not await h.outside.exists(obj), "delete_owned left the resource"
        finally:
            await connected.close()
            await other.close()


CHECKS: tuple[Callable[[Harness], Awaitable[None]], ...] = (
    check_converges_and_second_pass_writes_nothing,
    check_out_of_band_deletion_is_recreated,
    check_drift_is_repaired,
    check_delete_removes_external_and_finalizer,
    check_orphan_leaves_external,
    check_create_and_delete_are_idempotent,
    check_observe_changes_nothing,
    check_crash_between_create_and_record,
    check_not_ours_is_never_touched,
    check_replaced_by_somebody_else_is_not_ours,
    check_create_refuses_a_foreign_resource,
    check_delete_refuses_a_foreign_resource,
    check_create_marks_in_the_same_step,
    check_owned_listing_names_this_store,
)
