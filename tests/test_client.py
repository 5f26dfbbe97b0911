"""The resource API over every store backend: apply, get, list, patch, update, delete,
finalizers, status, history, watch, compaction and verify."""

from __future__ import annotations

import asyncio
import datetime
import gc
from typing import Any

import attrs
import pytest
from helpers import widget

from reconcile import (
    AlreadyExistsError,
    Bookmark,
    Client,
    ConflictError,
    Event,
    EventType,
    ExpiredError,
    InvalidError,
    Kind,
    NotFoundError,
    Status,
)
from reconcile.api.bulk import Applied
from reconcile.api.merging import merge_patch
from reconcile.model import Condition, ConditionStatus, LabelSelector
from reconcile.testing import FakeClock

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


async def event_count(client: Client) -> int:
    """How many events the log holds."""
    return len([e async for e in _drain(client)])


async def _drain(client: Client):  # type: ignore[no-untyped-def]
    async for item in client.watch(bookmarks=True):
        if isinstance(item, Bookmark):
            return
        yield item


class TestApply:
    """Declarative create-or-update."""

    async def test_create_sets_server_fields(self, client: Client, clock: FakeClock) -> None:
        """A new object gets a uid, generation 1, a revision and a creation time."""
        obj = await client.apply(widget("w1", 3))
        assert obj.metadata.uid
        assert obj.metadata.generation == 1
        assert obj.metadata.resource_version == 1
        assert obj.metadata.creation_timestamp is not None
        assert obj.metadata.creation_timestamp.timestamp() == pytest.approx(clock())
        assert obj.spec.size == 3
        assert obj.spec.color == "blue", "defaults come from the spec class"
        assert obj.status == Status()

    async def test_identical_apply_appends_nothing(self, client: Client) -> None:
        """Re-applying the same manifest bumps nothing and appends no event."""
        first = await client.apply(widget("w1", 3, labels={"app": "web"}))
        second = await client.apply(widget("w1", 3, labels={"app": "web"}))
        assert second.metadata.resource_version == first.metadata.resource_version
        assert await client.revision() == 1
        assert await event_count(client) == 1

    async def test_spec_change_bumps_generation(self, client: Client) -> None:
        """Only a spec change bumps generation; a label change does not."""
        await client.apply(widget("w1", 3))
        changed = await client.apply(widget("w1", 4))
        assert changed.metadata.generation == 2
        relabelled = await client.apply(widget("w1", 4, labels={"tier": "db"}))
        assert relabelled.metadata.generation == 2
        assert relabelled.metadata.resource_version == 3
        types = [e.type for e in await client.history("widget", "w1")]
        assert types == [EventType.CREATED, EventType.SPEC_CHANGED, EventType.METADATA_CHANGED]

    async def test_apply_three_way_merges_labels(self, client: Client) -> None:
        """Apply removes labels it applied before and keeps labels others added."""
        await client.apply(widget("w1", labels={"a": "1", "b": "2"}))
        await client.patch("widget", "w1", {"metadata": {"labels": {"owner": "ops"}}})
        obj = await client.apply(widget("w1", labels={"a": "1"}))
        assert obj.metadata.labels == {"a": "1", "owner": "ops"}

    async def test_apply_keeps_controller_finalizers(self, client: Client) -> None:
        """A finalizer added by a controller survives a re-apply of the manifest."""
        await client.apply(widget("w1"))
        await client.add_finalizer("widget", "w1", "example.dev/cleanup")
        obj = await client.apply(widget("w1", 2))
        assert obj.metadata.finalizers == ("example.dev/cleanup",)

    async def test_apply_ignores_status_and_server_fields(self, client: Client) -> None:
        """Status and server-owned metadata in a manifest are not taken."""
        manifest = widget("w1", uid="forged", generation=9)
        manifest["status"] = {"observedGeneration": 7}
        obj = await client.apply(manifest)
        assert obj.metadata.uid != "forged"
        assert obj.metadata.generation == 1
        assert obj.status.observed_generation == 0

    async def test_resource_version_in_manifest_is_a_precondition(self, client: Client) -> None:
        """A stale resourceVersion in an applied manifest is a conflict."""
        await client.apply(widget("w1"))
        await client.apply(widget("w1", 2))
        with pytest.raises(ConflictError):
            await client.apply(widget("w1", 3, resourceVersion=1))
        assert (await client.get("widget", "w1")).spec.size == 2

    async def test_create_refuses_existing(self, client: Client) -> None:
        """create of an existing object raises AlreadyExistsError and writes nothing."""
        await client.create(widget("w1"))
        with pytest.raises(AlreadyExistsError):
            await client.create(widget("w1", 5))
        assert await client.revision() == 1

    async def test_apply_accepts_a_resource(self, client: Client) -> None:
        """A Resource read back can be evolved and applied again."""
        obj = await client.apply(widget("w1"))
        again = await client.apply(attrs.evolve(obj, spec=attrs.evolve(obj.spec, size=9)))
        assert again.spec.size == 9


class TestReads:
    """get and list."""

    async def test_get_missing(self, client: Client) -> None:
        """get of an absent object raises NotFoundError."""
        with pytest.raises(NotFoundError):
            await client.get("widget", "nope")

    async def test_kind_names(self, client: Client) -> None:
        """Kinds resolve by name, plural, short name and qualified name."""
        await client.apply(widget("w1"))
        for name in ("Widget", "widgets", "wd", "widget.example.reconcile.dev"):
            assert (await client.get(name, "w1")).metadata.name == "w1"
        with pytest.raises(InvalidError, match="unknown kind"):
            await client.get("gadget", "w1")

    @pytest.mark.parametrize(
        ("kind", "plural"),
        [
            ("File", "files"),
            ("Directory", "directories"),
            ("Gateway", "gateways"),
            ("Box", "boxes"),
            ("Policy", "policies"),
            ("Address", "addresses"),
            ("Mesh", "meshes"),
        ],
    )
    def test_plurals(self, kind: str, plural: str) -> None:
        """Kinds' plural names follow English for the common endings."""
        assert Kind("x.reconcile.dev/v1", kind, dict).plural == plural

    async def test_list_namespaces_and_order(self, client: Client) -> None:
        """list is ordered by namespace then name, across namespaces unless one is given."""
        for ns, name in (("b", "x"), ("a", "y"), ("a", "x")):
            await client.apply(widget(name, namespace=ns))
        everything = await client.list("widget")
        assert [(o.metadata.namespace, o.metadata.name) for o in everything.items] == [
            ("a", "x"),
            ("a", "y"),
            ("b", "x"),
        ]
        assert everything.resource_version == 3
        only_b = await client.list("widget", namespace="b")
        assert [o.metadata.name for o in only_b.items] == ["x"]

    @pytest.mark.parametrize(
        ("selector", "expected"),
        [
            ("app=web", ["w1", "w2"]),
            ("app==web", ["w1", "w2"]),
            ("app!=web", ["w3", "w4"]),
            ("tier in (db,cache)", ["w2", "w3"]),
            ("tier notin (db)", ["w1", "w3", "w4"]),
            ("tier", ["w2", "w3"]),
            ("!tier", ["w1", "w4"]),
            ("app=web,tier=db", ["w2"]),
            ("", ["w1", "w2", "w3", "w4"]),
        ],
    )
    async def test_label_selectors(self, client: Client, selector: str, expected: list[str]) -> None:
        """Every Kubernetes selector operator filters as Kubernetes does."""
        await client.apply(widget("w1", labels={"app": "web"}))
        await client.apply(widget("w2", labels={"app": "web", "tier": "db"}))
        await client.apply(widget("w3", labels={"app": "api", "tier": "cache"}))
        await client.apply(widget("w4"))
        found = await client.list("widget", label_selector=selector)
        assert [o.metadata.name for o in found.items] == expected

    def test_selectors_are_canonical(self) -> None:
        """Requirements are sorted by key, as Kubernetes sorts them: the same selector
        written in another order prints alike and compares equal."""
        first, second = LabelSelector.parse("x=a,a=x"), LabelSelector.parse("a=x,x=a")
        assert first == second
        assert str(first) == str(second) == "a=x,x=a"
        assert LabelSelector.parse({"z": "1", "b": "2"}) == LabelSelector.parse("b=2,z=1")

    async def test_bad_selector(self, client: Client) -> None:
        """A selector that does not parse is an InvalidError naming the clause."""
        with pytest.raises(InvalidError, match="label_selector"):
            await client.list("widget", label_selector="app in web")

    async def test_pagination(self, client: Client) -> None:
        """limit and continue_ walk the whole list once, with a selector applied."""
        for i in range(7):
            await client.apply(widget(f"w{i}", labels={"even": str(i % 2 == 0).lower()}))
        names, token = [], None
        while True:
            page = await client.list("widget", label_selector="even=true", limit=2, continue_=token)
            names += [o.metadata.name for o in page.items]
            token = page.continue_
            if token is None:
                break
        assert names == ["w0", "w2", "w4", "w6"]
        with pytest.raises(InvalidError, match="continue_"):
            await client.list("widget", continue_="garbage!")


class TestPatchAndUpdate:
    """Merge patch and preconditioned update."""

    async def test_merge_patch(self, client: Client) -> None:
        """A merge patch changes, adds and removes (null) fields and re-validates."""
        await client.apply(widget("w1", 2, labels={"a": "1", "b": "2"}))
        obj = await client.patch(
            "widget", "w1", {"spec": {"color": "red"}, "metadata": {"labels": {"a": None, "c": "3"}}}
        )
        assert obj.spec.color == "red"
        assert obj.spec.size == 2
        assert obj.metadata.labels == {"b": "2", "c": "3"}
        assert obj.metadata.generation == 2

    def test_merge_patch_copies_containers_and_keeps_atoms(self) -> None:
        """RFC 7386: a mapping merges, null deletes, anything else replaces; the result
        never shares a list or mapping of the patch (strings and numbers, immutable, are
        taken as they are), and neither argument changes."""
        patch: dict[str, Any] = {"a": {"b": [1, 2]}, "c": "x", "d": None, "n": 3}
        target: dict[str, Any] = {"d": 1, "e": {"f": 1}, "c": ["old"]}
        result = merge_patch(target, patch)
        assert result == {"a": {"b": [1, 2]}, "c": "x", "e": {"f": 1}, "n": 3}
        assert result["a"] is not patch["a"]
        assert result["a"]["b"] is not patch["a"]["b"]
        patch["a"]["b"].append(3)
        assert result["a"]["b"] == [1, 2]
        assert target == {"d": 1, "e": {"f": 1}, "c": ["old"]}

    async def test_patch_is_validated(self, client: Client) -> None:
        """A patch that makes the spec invalid is refused with the path; nothing is written."""
        await client.apply(widget("w1"))
        with pytest.raises(InvalidError, match=r"spec\.size: must be >= 0"):
            await client.patch("widget", "w1", {"spec": {"size": -1}})
        with pytest.raises(InvalidError, match="status: cannot be patched"):
            await client.patch("widget", "w1", {"status": {}})
        assert await client.revision() == 1

    async def test_metadata_patch(self, client: Client) -> None:
        """A labels/annotations patch merges without touching spec or generation, is
        validated, honours a resourceVersion, and is a no-op when nothing changes."""
        obj = await client.apply(widget("w1", labels={"a": "1"}))
        patched = await client.patch(
            "widget", "w1", {"metadata": {"labels": {"a": None, "b": "2"}, "annotations": {"x.dev/y": "z"}}}
        )
        assert patched.metadata.labels == {"b": "2"}
        assert patched.metadata.annotations == {"x.dev/y": "z"}
        assert patched.metadata.generation == obj.metadata.generation
        revision = await client.revision()
        await client.patch("widget", "w1", {"metadata": {"labels": {"b": "2"}}})
        assert await client.revision() == revision, "an idempotent patch appends nothing"
        with pytest.raises(InvalidError, match=r"metadata\.labels\['b'\]: must be empty or"):
            await client.patch("widget", "w1", {"metadata": {"labels": {"b": "no spaces"}}})
        with pytest.raises(InvalidError, match="key name part"):
            await client.patch("widget", "w1", {"metadata": {"annotations": {"bad key": "v"}}})
        with pytest.raises(ConflictError):
            await client.patch("widget", "w1", {"metadata": {"labels": {"c": "3"}}}, resource_version=1)
        assert await client.revision() == revision

    async def test_update_with_stale_version_conflicts(self, client: Client) -> None:
        """update with an old resourceVersion raises ConflictError and changes nothing."""
        obj = await client.apply(widget("w1"))
        await client.apply(widget("w1", 2))
        with pytest.raises(ConflictError):
            await client.update(attrs.evolve(obj, spec=attrs.evolve(obj.spec, size=5)))
        assert (await client.get("widget", "w1")).spec.size == 2

    async def test_update_needs_a_version(self, client: Client) -> None:
        """update without a resourceVersion is refused."""
        obj = await client.apply(widget("w1"))
        stripped = attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, resource_version=None))
        with pytest.raises(InvalidError, match=r"metadata\.resourceVersion"):
            await client.update(stripped)

    async def test_concurrent_updates_one_winner_per_version(self, client: Client) -> None:
        """50 tasks updating from the same version: exactly one wins, the rest conflict."""
        base = await client.apply(widget("w1", 0))
        version = base.metadata.resource_version

        async def bump(i: int) -> bool:
            try:
                await client.update(attrs.evolve(base, spec=attrs.evolve(base.spec, size=i + 1)))
            except ConflictError:
                return False
            return True

        wins = await asyncio.gather(*(bump(i) for i in range(50)))
        assert wins.count(True) == 1
        final = await client.get("widget", "w1")
        assert final.metadata.resource_version == version + 1

    async def test_no_lost_update_under_contention(self, client: Client) -> None:
        """50 tasks each incrementing with read-modify-write retries: the count is exact."""
        await client.apply(widget("w1", 0))

        async def increment() -> None:
            while True:
                obj = await client.get("widget", "w1")
                try:
                    await client.update(
                        attrs.evolve(obj, spec=attrs.evolve(obj.spec, size=obj.spec.size + 1))
                    )
                except ConflictError:
                    continue
                return

        await asyncio.gather(*(increment() for _ in range(50)))
        assert (await client.get("widget", "w1")).spec.size == 50


class TestDeletion:
    """delete with and without finalizers."""

    async def test_delete_without_finalizers_removes(self, client: Client) -> None:
        """An object without finalizers is removed at once."""
        await client.apply(widget("w1"))
        assert await client.delete("widget", "w1") is None
        with pytest.raises(NotFoundError):
            await client.get("widget", "w1")
        with pytest.raises(NotFoundError):
            await client.delete("widget", "w1")

    async def test_finalizers_hold_deletion(self, client: Client, clock: FakeClock) -> None:
        """delete sets deletionTimestamp while finalizers remain; the last removal deletes."""
        await client.apply(widget("w1"))
        await client.add_finalizer("widget", "w1", "example.dev/a")
        await client.add_finalizer("widget", "w1", "example.dev/b")
        clock.advance(10)
        marked = await client.delete("widget", "w1")
        assert marked is not None
        assert marked.metadata.deletion_timestamp is not None
        assert marked.metadata.deletion_timestamp.timestamp() == pytest.approx(clock())
        again = await client.delete("widget", "w1")
        assert again is not None
        assert again.metadata.resource_version == marked.metadata.resource_version, "repeat is a no-op"
        with pytest.raises(InvalidError, match="being deleted"):
            await client.add_finalizer("widget", "w1", "example.dev/c")
        assert await client.remove_finalizer("widget", "w1", "example.dev/a") is not None
        assert await client.remove_finalizer("widget", "w1", "example.dev/b") is None
        with pytest.raises(NotFoundError):
            await client.get("widget", "w1")
        types = [e.type for e in await client.history("widget", "w1")]
        assert types[-3:] == [EventType.DELETION_REQUESTED, EventType.FINALIZER_REMOVED, EventType.DELETED]

    async def test_finalizer_calls_are_idempotent(self, client: Client) -> None:
        """Adding a present finalizer or removing an absent one appends nothing."""
        await client.apply(widget("w1"))
        await client.add_finalizer("widget", "w1", "example.dev/a")
        revision = await client.revision()
        await client.add_finalizer("widget", "w1", "example.dev/a")
        await client.remove_finalizer("widget", "w1", "example.dev/zzz")
        assert await client.revision() == revision

    async def test_recreate_after_delete_has_new_uid(self, client: Client) -> None:
        """A deleted then re-created object is a new incarnation; history shows both."""
        first = await client.apply(widget("w1"))
        await client.delete("widget", "w1")
        second = await client.apply(widget("w1"))
        assert second.metadata.uid != first.metadata.uid
        assert second.metadata.generation == 1
        history = await client.history("widget", "w1")
        assert [e.uid for e in history] == [first.metadata.uid] * 2 + [second.metadata.uid]


class TestStatus:
    """update_status touches status only."""

    async def test_status_only(self, client: Client) -> None:
        """A status write leaves spec and generation alone; an equal one appends nothing."""
        obj = await client.apply(widget("w1", 3))
        ready = Condition("Ready", ConditionStatus.TRUE, reason="Available")
        status = Status(observed_generation=1, conditions=(ready,))
        updated = await client.update_status(
            attrs.evolve(obj, status=status, spec=attrs.evolve(obj.spec, size=99))
        )
        assert updated.status == status
        assert updated.spec.size == 3
        assert updated.metadata.generation == 1
        revision = await client.revision()
        same = await client.update_status(updated)
        assert same.metadata.resource_version == revision
        assert await client.revision() == revision

    async def test_stored_status_reads_back_equal(self, client: Client) -> None:
        """Conditions read back through the stored-body path equal what was written,
        timestamps and enum included; a stored body with an unknown field still fails."""
        obj = await client.apply(widget("w1"))
        at = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)
        conditions = (
            Condition("Ready", ConditionStatus.FALSE, "Creating", "wait", at, 1),
            Condition("Synced", ConditionStatus.TRUE, "ReconcileSuccess", "", None, 1),
        )
        status = Status(observed_generation=1, conditions=conditions)
        await client.update_status(attrs.evolve(obj, status=status))
        read = await client.get("widget", "w1")
        assert read.status == status
        ready = read.status.condition("Ready")
        assert ready is not None
        assert ready.status is ConditionStatus.FALSE
        assert ready.last_transition_time == at
        stored = (await client.store.read(read.key)).body  # type: ignore[union-attr]
        stored["status"]["conditions"][0]["colour"] = "red"
        with pytest.raises(Exception, match="colour"):
            client.decode(stored)

    async def test_status_precondition(self, client: Client) -> None:
        """A status write from a stale read conflicts, unless forced."""
        obj = await client.apply(widget("w1"))
        await client.apply(widget("w1", 2))
        with pytest.raises(ConflictError):
            await client.update_status(attrs.evolve(obj, status=Status(observed_generation=1)))
        forced = await client.update_status(
            attrs.evolve(obj, status=Status(observed_generation=1)), force=True
        )
        assert forced.status.observed_generation == 1
        assert forced.spec.size == 2

    async def test_status_result_reuses_a_known_spec(self, client: Client) -> None:
        """``based_on`` (an object whose spec is the stored one of its generation): the
        result carries that spec while the generation is still its own, the stored one
        once the spec changed meanwhile; never the spec of the object written."""
        obj = await client.apply(widget("w1", 3))
        status = Status(observed_generation=1)
        reused = await client.update_status(attrs.evolve(obj, status=status), based_on=obj)
        assert reused.spec is obj.spec
        edited = attrs.evolve(
            reused, spec=attrs.evolve(obj.spec, size=99), status=Status(observed_generation=2)
        )
        assert (await client.update_status(edited, based_on=obj)).spec is obj.spec
        await client.apply(widget("w1", 5))
        forced = await client.update_status(attrs.evolve(obj, status=status), based_on=obj, force=True)
        assert forced.spec.size == 5
        assert forced.metadata.generation == 2

    async def test_status_result_on_its_own_revision_is_the_stored_object(self, client: Client) -> None:
        """A status write made on ``based_on``'s own revision builds its result from
        ``based_on`` (nothing decoded): the same object a read returns, metadata and all;
        made on a later revision (a forced write after a label change), the stored
        metadata, not ``based_on``'s."""
        obj = await client.apply(widget("w1", 3, labels={"app": "web"}, annotations={"a": "1"}))
        status = Status(observed_generation=1)
        written = await client.update_status(attrs.evolve(obj, status=status), based_on=obj)
        assert written == await client.get("widget", "w1")
        assert written.metadata.resource_version != obj.metadata.resource_version
        assert written.spec is obj.spec
        unchanged = await client.update_status(attrs.evolve(written, status=status), based_on=written)
        assert unchanged == written  # nothing written: the stored object as it is
        relabelled = await client.apply(widget("w1", 3, labels={"app": "db"}, annotations={"a": "1"}))
        forced = await client.update_status(
            attrs.evolve(written, status=Status(observed_generation=2)), based_on=written, force=True
        )
        assert forced == await client.get("widget", "w1")
        assert forced.metadata.labels == {"app": "db"}
        assert forced.metadata.resource_version != relabelled.metadata.resource_version

    async def test_status_result_takes_no_spec_of_an_earlier_incarnation(self, client: Client) -> None:
        """``based_on`` of an object since deleted and created again (another uid, the
        same generation): a forced status write on the new one carries its own spec."""
        old = await client.apply(widget("w1", 3))
        await client.delete("widget", "w1")
        new = await client.apply(widget("w1", 7))
        assert new.metadata.generation == old.metadata.generation
        forced = await client.update_status(
            attrs.evolve(old, status=Status(observed_generation=1)), based_on=old, force=True
        )
        assert forced.metadata.uid == new.metadata.uid
        assert forced.spec.size == 7

    async def test_invalid_status(self, client: Client) -> None:
        """A status of the wrong shape is refused with its path."""
        obj = await client.apply(widget("w1"))
        with pytest.raises(InvalidError, match=r"status\.observedGeneration"):
            await client.update_status(attrs.evolve(obj, status={"observedGeneration": "x"}))

    async def test_apply_never_touches_status(self, client: Client) -> None:
        """A spec change through apply keeps the status the controller wrote."""
        obj = await client.apply(widget("w1"))
        await client.update_status(attrs.evolve(obj, status=Status(observed_generation=1)))
        after = await client.apply(widget("w1", 2))
        assert after.status.observed_generation == 1


class TestHistory:
    """history tells who changed what, when."""

    async def test_history_records_changes(self, client: Client, clock: FakeClock) -> None:
        """Each event has revision, time, type, actor and the changed field paths."""
        await client.apply(widget("w1", 1), manager="alice")
        clock.advance(60)
        await client.apply(widget("w1", 2), manager="bob", force=True)  # alice's size, taken
        history = await client.history("widget", "w1")
        assert [(e.revision, e.type, e.actor) for e in history] == [
            (1, EventType.CREATED, "alice"),
            (2, EventType.SPEC_CHANGED, "bob"),
        ]
        assert history[1].time.timestamp() == pytest.approx(clock())
        changes = {c.path: (c.old, c.new) for c in history[1].changes}
        assert changes == {
            "spec.size": (1, 2),
            "metadata.generation": (1, 2),
            "metadata.managedFields.alice": (["spec/size"], None),
            "metadata.managedFields.bob": (None, ["spec/size"]),
        }
        assert history[1].object is not None
        assert history[1].object.spec.size == 2

    async def test_history_of_unknown_object(self, client: Client) -> None:
        """history of a key that never existed raises NotFoundError."""
        with pytest.raises(NotFoundError):
            await client.history("widget", "ghost")


class TestWatch:
    """watch: in order, no gaps, then live; bookmarks; expiry after compaction."""

    async def test_watch_replays_then_follows(self, client: Client) -> None:
        """A watch from 0 yields the log, a bookmark, then live events as they commit."""
        await client.apply(widget("w1"))
        await client.apply(widget("w2"))
        seen: list[Event | Bookmark] = []
        caught_up = asyncio.Event()
        done = asyncio.Event()

        async def consume() -> None:
            async for item in client.watch("widget", bookmarks=True):
                seen.append(item)
                if isinstance(item, Bookmark):
                    caught_up.set()
                if isinstance(item, Event) and item.revision == 4:
                    done.set()
                    return

        task = asyncio.create_task(consume())
        await asyncio.wait_for(caught_up.wait(), 5)
        await client.apply(widget("w3"))
        await client.apply(widget("w3", 2))
        await asyncio.wait_for(done.wait(), 5)
        await task
        revisions = [i.revision for i in seen if isinstance(i, Event)]
        assert revisions == [1, 2, 3, 4]
        assert Bookmark(2) in seen

    async def test_watch_since_and_filter(self, client: Client) -> None:
        """A watch from N starts after N; a kind filter drops other kinds."""
        await client.apply(widget("w1"))
        await client.apply(
            {
                "apiVersion": "example.reconcile.dev/v1",
                "kind": "RecordSet",
                "metadata": {"name": "rs"},
                "spec": {"zone": "example.org"},
            }
        )
        await client.apply(widget("w2"))
        found = []
        async for item in client.watch("widget", since=1, bookmarks=True):
            if isinstance(item, Bookmark):
                assert item.revision == 3
                break
            found.append(item.revision)
        assert found == [3]

    async def test_compaction_expires_old_watches(self, client: Client) -> None:
        """After compact(before=R), a watch from before R-1 raises ExpiredError; from R-1 works."""
        await client.apply(widget("w1", 1))
        await client.apply(widget("w1", 2))
        await client.apply(widget("w2", 1))
        await client.apply(widget("w2", 2))
        dropped = await client.compact(before=4)
        assert dropped == 2
        with pytest.raises(ExpiredError):
            async for _ in client.watch(since=1):
                pass
        items = []
        async for item in client.watch(since=3, bookmarks=True):
            if isinstance(item, Bookmark):
                break
            items.append(item.revision)
        assert items == [4]
        report = await client.verify()
        assert report.ok, report.differences
        assert (await client.get("widget", "w1")).spec.size == 2
        assert [e.revision for e in await client.history("widget", "w1")] == [2]

    async def test_compaction_drops_deleted_objects_history(self, client: Client) -> None:
        """Compaction past a deletion forgets the deleted object entirely."""
        await client.apply(widget("w1"))
        await client.delete("widget", "w1")
        await client.apply(widget("w2"))
        await client.compact(before=3)
        with pytest.raises(NotFoundError):
            await client.history("widget", "w1")
        assert (await client.verify()).ok

    async def test_recreate_after_compacted_delete(self, client: Client) -> None:
        """A key whose deletion was compacted away can be created again."""
        await client.apply(widget("w1"))
        await client.delete("widget", "w1")
        await client.apply(widget("w2"))
        await client.compact(before=2)
        again = await client.apply(widget("w1", 5))
        assert again.spec.size == 5
        assert (await client.verify()).ok


class TestRecord:
    """Controller actions recorded as events without changing the object."""

    async def test_record_joins_history_without_touching_the_object(self, client: Client) -> None:
        """record appends an event with data; resourceVersion stays; watch sees it."""
        obj = await client.apply(widget("w1"))
        revision = await client.record(
            "widget", "w1", "CreateRequested", data={"message": "creating"}, manager="widget-controller"
        )
        assert revision == 2
        assert (await client.get("widget", "w1")).metadata.resource_version == obj.metadata.resource_version
        last = (await client.history("widget", "w1"))[-1]
        assert (last.type, last.actor, last.data, last.object, last.changes) == (
            "CreateRequested",
            "widget-controller",
            {"message": "creating"},
            None,
            (),
        )
        async for event in client.watch(since=1):
            assert event.revision == 2
            assert event.object is None
            break

    async def test_record_actions_on_the_stored_revision_decodes_nothing(
        self, client: Client, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Recorded on the object as it is stored, the result is built from it (the
        write's metadata, the status written): equal to a fresh read, no body decoded."""
        obj = await client.apply(widget("w1", labels={"app": "x"}, finalizers=["example.dev/g"]))
        await client.delete("widget", "w1")  # a deletion timestamp too
        obj = await client.get("widget", "w1")
        decoded: list[object] = []
        decode = client.decoder.resource
        monkeypatch.setattr(client.decoder, "resource", lambda *a, **k: decoded.append(a) or decode(*a, **k))
        ready = Status(conditions=(Condition("Ready", ConditionStatus.TRUE, "Done", "", NOW, 1),))
        written = await client.engine.record_actions(
            obj,
            [("CreateSucceeded", None)],
            annotations={"a": "1"},
            add_finalizer="example.dev/g",
            status=ready,
        )
        assert decoded == []
        assert written == await client.get("widget", "w1")
        assert written.metadata.resource_version == await client.revision()
        assert (written.metadata.annotations, written.metadata.finalizers) == ({"a": "1"}, ("example.dev/g",))
        assert written.metadata.deletion_timestamp is not None
        assert written.status == ready
        # On a revision that is no longer the stored one: decoded from what was written.
        await client.patch("widget", "w1", {"metadata": {"labels": {"by": "them"}}})
        decoded.clear()
        again = await client.engine.record_actions(written, [], annotations={"b": "2"})
        assert len(decoded) == 1
        assert again == await client.get("widget", "w1")
        assert again.metadata.labels == {"app": "x", "by": "them"}

    async def test_record_refusals(self, client: Client) -> None:
        """A bad event type is InvalidError; an unknown object is NotFoundError."""
        await client.apply(widget("w1"))
        with pytest.raises(InvalidError, match="CamelCase"):
            await client.record("widget", "w1", "not camel")
        with pytest.raises(NotFoundError):
            await client.record("widget", "ghost", "CreateRequested")
        with pytest.raises(InvalidError, match="must be JSON data"):
            await client.record("widget", "w1", "CreateRequested", data={"when": object()})


class TestDeletingObjects:
    """Applying to an object whose deletion has begun."""

    async def test_releasing_the_last_finalizer_by_apply_completes_the_deletion(self, client: Client) -> None:
        """apply with ``finalizers: [x]``, delete, apply with ``finalizers: []``: the
        object goes (it used to stay forever with its deletionTimestamp)."""
        await client.apply(widget("w", finalizers=["example.dev/x"]))
        await client.delete("widget", "w")
        assert (await client.get("widget", "w")).metadata.deletion_timestamp is not None
        await client.apply(widget("w", finalizers=[]))
        with pytest.raises(NotFoundError):
            await client.get("widget", "w")
        assert (await client.verify()).ok

    async def test_a_deleting_object_takes_spec_changes_but_no_new_finalizer(self, client: Client) -> None:
        """A new spec for an object on its way out is stored (it stays deleting); a new
        finalizer is refused, saying why, and nothing is stored."""
        await client.apply(widget("w", finalizers=["example.dev/x"]))
        await client.delete("widget", "w")
        changed = await client.apply(widget("w", 2, finalizers=["example.dev/x"]))
        assert changed.metadata.deletion_timestamp is not None
        assert changed.metadata.generation == 2
        revision = await client.revision()
        with pytest.raises(
            InvalidError, match=r"cannot add finalizer 'example.dev/y': the object is being deleted"
        ):
            await client.apply(widget("w", 2, finalizers=["example.dev/x", "example.dev/y"]))
        assert await client.revision() == revision
        await client.apply(widget("w", 2, finalizers=["example.dev/x"]))  # the same: a no-op
        assert await client.revision() == revision

    @pytest.mark.parametrize(
        ("annotation", "value", "reason"),
        [
            (
                "reconcile.dev/deletion-policy",
                "orphan",
                r"must be one of Delete, Orphan, not 'orphan' \(did you mean \"Orphan\"\?\)",
            ),
            ("reconcile.dev/management-policy", "observe", "must be one of Full, ObserveOnly"),
            ("reconcile.dev/paused", "yes", "must be one of true, false"),
        ],
    )
    async def test_a_policy_the_runner_would_refuse_is_refused_at_apply(
        self, client: Client, annotation: str, value: str, reason: str
    ) -> None:
        """A policy annotation the engine does not understand: refused at apply (and by
        patch), with the field path."""
        with pytest.raises(InvalidError, match=rf"metadata.annotations\['{annotation}'\]: {reason}"):
            await client.apply(widget("w", annotations={annotation: value}))
        assert await client.revision() == 0
        await client.apply(widget("w"))
        with pytest.raises(InvalidError, match=reason):
            await client.patch("widget", "w", {"metadata": {"annotations": {annotation: value}}})


class TestApplyMany:
    """Client.apply_many: one admission and one mutation per document, one result each."""

    async def test_the_collector_is_left_alone(self, client: Client) -> None:
        """A bulk apply changes no process-wide setting: tuning the collector is the
        Runtime's, when asked (``gc_tuning``; see test_collecting.py)."""
        before = (gc.isenabled(), gc.get_threshold())
        seen: list[tuple[bool, tuple[int, ...]]] = []
        await client.apply_many(
            [widget(f"w{i}") for i in range(2)],
            on_applied=lambda _a: seen.append((gc.isenabled(), gc.get_threshold())),
        )
        assert seen == [before, before]

    async def test_one_result_per_document_in_order(self, client: Client) -> None:
        """Created, configured, unchanged, refused: each document says what it did; a
        later document declaring the same object wins; a refused one stops nothing else."""
        await client.apply(widget("old", 1))
        await client.apply(widget("same", 1))
        results = await client.apply_many(
            [widget("new", 1), widget("old", 2), widget("same", 1), {"kind": "Nope"}, widget("new", 7)]
        )
        assert [r.outcome for r in results] == ["created", "configured", "unchanged", "refused", "configured"]
        assert isinstance(results[3].error, InvalidError)
        assert (await client.get("widget", "new")).spec.size == 7
        assert results[1].object is not None
        assert results[1].object.spec.size == 2

    async def test_check_all_first_writes_nothing_when_one_is_refused(self, client: Client) -> None:
        """With check_all_first, a document the stored state refuses (a stale version)
        leaves every document unwritten, each saying so."""
        stale = widget("w1", 5)
        stale["metadata"]["resourceVersion"] = 999  # type: ignore[index]
        await client.apply(widget("w1", 1))
        revision = await client.revision()
        results = await client.apply_many([widget("w2", 1), stale], check_all_first=True)
        assert [r.outcome for r in results] == ["skipped", "refused"]
        assert isinstance(results[1].error, ConflictError)
        assert await client.revision() == revision

    async def test_atomic_stores_all_in_one_transaction(self, client: Client) -> None:
        """atomic: every document written together, later ones winning, one result each,
        and every object heard of by on_applied."""
        await client.apply(widget("old", 1))
        heard: list[str] = []
        results = await client.apply_many(
            [widget("new", 1), widget("old", 2), widget("new", 7)],
            atomic=True,
            on_applied=lambda a: heard.append(a.outcome),
        )
        assert [r.outcome for r in results] == ["created", "configured", "configured"]
        assert heard == ["created", "configured", "configured"]
        assert (await client.get("widget", "new")).spec.size == 7
        assert await client.revision() == 4

    async def test_atomic_refusal_at_write_time_stores_nothing(self, client: Client) -> None:
        """atomic: a document refused only when written (a version its own batch made
        stale, which the check against the store cannot see) leaves every document
        unwritten; it says why, the others are skipped."""
        stored = await client.apply(widget("w1", 1))
        first, second = widget("w1", 2), widget("w1", 3)
        for doc in (first, second):
            doc["metadata"]["resourceVersion"] = stored.metadata.resource_version  # type: ignore[index]
        revision = await client.revision()
        results = await client.apply_many([widget("w2", 1), first, second], atomic=True)
        assert [r.outcome for r in results] == ["skipped", "skipped", "refused"]
        assert isinstance(results[2].error, ConflictError)
        assert await client.revision() == revision
        assert (await client.get("widget", "w1")).spec.size == 1
        with pytest.raises(NotFoundError):
            await client.get("widget", "w2")

    async def test_atomic_stop_before_the_transaction_stores_nothing(self, client: Client) -> None:
        """atomic with a stop already asked for: nothing written, every document skipped."""
        results = await client.apply_many([widget("w1"), widget("w2")], atomic=True, stop=lambda: True)
        assert [r.outcome for r in results] == ["skipped", "skipped"]
        assert await client.revision() == 0

    async def test_stop_ends_between_runs(self, client: Client) -> None:
        """Without atomic, stop is asked before each run: the runs before it are stored,
        the rest skipped (each with its key)."""
        asked: list[int] = []

        def stop() -> bool:
            asked.append(1)
            return len(asked) > 2

        results = await client.apply_many([widget(f"w{i}") for i in range(5)], batch=2, stop=stop)
        assert [r.outcome for r in results] == ["created"] * 4 + ["skipped"]
        assert results[4].key is not None
        assert results[4].key.name == "w4"
        assert await client.revision() == 4

    async def test_a_thousand_documents(self, client: Client) -> None:
        """A thousand documents (four concurrent runs of 256): every one created."""
        results = await client.apply_many([widget(f"w{i}", i) for i in range(1000)])
        assert {r.outcome for r in results} == {"created"}
        assert len((await client.list("widget")).items) == 1000

    async def test_later_documents_win_across_runs_and_refusals_stop_nothing(self, client: Client) -> None:
        """With runs of two writes, the same object declared in three runs ends as the
        last declares it, each document saying what it did, and a refused document in
        the middle leaves the rest written."""
        docs = [widget("a", 1), widget("b", 1), widget("a", 2), {"kind": "Nope"}]
        docs += [widget("c", 1), widget("a", 3)]
        results = await client.apply_many(docs, batch=2)
        assert [r.outcome for r in results] == [
            "created",
            "created",
            "configured",
            "refused",
            "created",
            "configured",
        ]
        assert (await client.get("widget", "a")).spec.size == 3
        assert (await client.get("widget", "a")).metadata.generation == 3
        assert {w.metadata.name for w in (await client.list("widget")).items} == {"a", "b", "c"}

    async def test_objects_are_decoded_only_when_read(self, client: Client) -> None:
        """A caller that reads only the outcomes decodes nothing; reading ``object``
        decodes it once, and two results compare by the objects they hold."""
        decode = client.decoder.resource
        decoded: list[object] = []

        def counting(*args: object, **kwargs: object) -> object:
            decoded.append(args[0])
            return decode(*args, **kwargs)  # type: ignore[arg-type]

        client.decoder.resource = counting  # type: ignore[method-assign]
        results = await client.apply_many([widget(f"w{i}", i) for i in range(5)])
        assert [r.outcome for r in results] == ["created"] * 5
        assert decoded == []
        first = results[0].object
        assert first is not None
        assert first.spec.size == 0
        assert results[0].object is first
        assert len(decoded) == 1
        assert results[0] == Applied(results[0].key, "created", first)
        assert results[0] != Applied(results[0].key, "created", results[1].object)
        assert "size=0" in repr(results[0])
