"""The EventStore contract, written once and run against every backend (see conftest).

These tests speak to the store directly, with hand-written mutations, so a new backend
(PostgreSQL) proves the same semantics the Client relies on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from reconcile import (
    Bookmark,
    ConflictError,
    ExpiredError,
    InvalidError,
    NotFoundError,
    ObjectKey,
    StoreError,
)
from reconcile.store import (
    MAX_OBJECT_BYTES,
    EventStore,
    Note,
    Put,
    Remove,
    SQLiteStore,
    StoredObject,
    locate_store,
    paging,
)

KEY = ObjectKey("example.reconcile.dev", "Widget", "default", "w")
DEADLINE = 30


def body(name: str = "w", size: int = 1, uid: str = "u1") -> dict[str, Any]:
    """A minimal object body."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, "uid": uid},
        "spec": {"size": size},
    }


def put(event_type: str = "Created", **kwargs: Any):  # type: ignore[no-untyped-def]
    """A mutation that puts a body regardless of the current state."""
    return lambda _current: Put(event_type, body(**kwargs))


class TestStoreContract:
    """Semantics every backend provides."""

    async def test_put_read_and_revision(self, store: EventStore) -> None:
        """A put returns the stamped object; read returns it; the head advances by one."""
        result = await store.write(KEY, put(), actor="t")
        assert result.written
        assert result.revision == 1
        assert result.object is not None
        assert result.object.body["metadata"]["resourceVersion"] == 1
        read = await store.read(KEY)
        assert read == StoredObject(KEY, "u1", 1, result.object.body)
        assert await store.revision() == 1

    async def test_a_store_that_takes_writes_refuses_none(self, store: EventStore) -> None:
        """``write_refusal()`` is None on a database that takes writes (a read-only
        server: tests/test_postgres_faults.py)."""
        assert await store.write_refusal() is None

    async def test_no_change_writes_nothing(self, store: EventStore) -> None:
        """A mutation returning None appends nothing and reports the current version."""
        await store.write(KEY, put(), actor="t")
        result = await store.write(KEY, lambda _current: None, actor="t")
        assert not result.written
        assert result.revision == 1
        assert await store.revision() == 1

    async def test_mutation_sees_current_copy(self, store: EventStore) -> None:
        """A mutation receives the current object and may not harm it by mutating."""
        await store.write(KEY, put(size=1), actor="t")
        seen: list[int] = []

        def vandal(current: StoredObject | None) -> None:
            assert current is not None
            seen.append(current.body["spec"]["size"])
            current.body["spec"]["size"] = 999
            raise ConflictError("changed my mind")

        with pytest.raises(ConflictError):
            await store.write(KEY, vandal, actor="t")
        assert seen == [1]
        stored = await store.read(KEY)
        assert stored is not None
        assert stored.body["spec"]["size"] == 1

    async def test_failures_are_per_write(self, store: EventStore) -> None:
        """In one batch, a failing mutation fails only its own write; order is kept."""

        def failing(_current: StoredObject | None) -> None:
            raise ConflictError("no")

        keys = [ObjectKey(KEY.api_group, KEY.kind, "default", f"w{i}") for i in range(10)]
        writes = [store.write(k, put(name=k.name), actor="t") for k in keys]
        writes.insert(5, store.write(KEY, failing, actor="t"))
        results = await asyncio.gather(*writes, return_exceptions=True)
        assert isinstance(results[5], ConflictError)
        ok = [r for r in results if not isinstance(r, BaseException)]
        assert sorted(r.revision for r in ok) == list(range(1, 11))

    async def test_writes_to_one_key_in_a_batch_chain(self, store: EventStore) -> None:
        """Concurrent mutations of one key each see the previous one's result."""

        def increment(current: StoredObject | None) -> Put:
            size = 0 if current is None else current.body["spec"]["size"]
            return Put("SpecChanged", body(size=size + 1))

        await asyncio.gather(*(store.write(KEY, increment, actor="t") for _ in range(25)))
        stored = await store.read(KEY)
        assert stored is not None
        assert stored.body["spec"]["size"] == 25
        assert stored.resource_version == 25

    async def test_submit_many_queues_in_order_with_a_future_each(self, store: EventStore) -> None:
        """submit_many: one future per write, in order; a refusal is that write's alone;
        two writes of one key apply in order (the later wins); each future's callbacks
        run before the write's watch event is delivered."""

        def failing(_current: StoredObject | None) -> None:
            raise ConflictError("no")

        keys = [ObjectKey(KEY.api_group, KEY.kind, "default", f"w{i}") for i in range(5)]
        writes = [(k, put(name=k.name)) for k in keys]
        writes.insert(2, (KEY, failing))
        writes.append((keys[0], put("SpecChanged", name="w0", size=7)))
        order: list[str] = []
        watching = asyncio.Event()

        async def watch() -> None:
            async for item in store.watch(since=0):
                watching.set()
                if not isinstance(item, Bookmark):
                    order.append("event")
                    if order.count("event") == 6:
                        return

        watcher = asyncio.create_task(watch())
        await asyncio.wait_for(watching.wait(), DEADLINE)
        futures = store.submit_many(writes, actor="t")
        for future in futures:
            future.add_done_callback(lambda _f: order.append("done"))
        results = await asyncio.gather(*futures, return_exceptions=True)
        await asyncio.wait_for(watcher, DEADLINE)
        assert isinstance(results[2], ConflictError)
        revisions = [r.revision for r in results if not isinstance(r, BaseException)]
        assert revisions == list(range(1, 7))
        stored = await store.read(keys[0])
        assert stored is not None
        assert stored.body["spec"]["size"] == 7
        assert order.index("event") >= 6, order
        assert store.submit_many([], actor="t") == []

    async def test_write_many_commits_every_write_together(self, store: EventStore) -> None:
        """write_many: one result per write, in order; two writes of one key chain; one
        revision per event, all visible at once."""
        keys = [ObjectKey(KEY.api_group, KEY.kind, "default", f"w{i}") for i in range(3)]
        writes = [(k, put(name=k.name)) for k in keys]
        writes.append((keys[0], put("SpecChanged", name="w0", size=7)))
        results = await store.write_many(writes, actor="t")
        assert [(r.revision, r.written) for r in results] == [(1, True), (2, True), (3, True), (4, True)]
        assert await store.revision() == 4
        stored = await store.read(keys[0])
        assert stored is not None
        assert stored.body["spec"]["size"] == 7
        assert await store.write_many([], actor="t") == []

    async def test_write_many_is_all_or_nothing(self, store: EventStore) -> None:
        """One mutation that raises rolls back every write of the batch, and its error is raised."""
        await store.write(KEY, put(size=1), actor="t")

        def failing(_current: StoredObject | None) -> None:
            raise ConflictError("no")

        keys = [ObjectKey(KEY.api_group, KEY.kind, "default", f"w{i}") for i in range(3)]
        writes = [(k, put(name=k.name)) for k in keys]
        writes.insert(1, (KEY, put("SpecChanged", size=2)))
        writes.append((KEY, failing))
        with pytest.raises(ConflictError, match="no"):
            await store.write_many(writes, actor="t")
        assert await store.revision() == 1
        assert [await store.read(k) for k in keys] == [None, None, None]
        stored = await store.read(KEY)
        assert stored is not None
        assert stored.body["spec"]["size"] == 1
        assert (await store.verify()).ok

    async def test_write_many_rollback_spares_concurrent_writes(self, store: EventStore) -> None:
        """Writes queued around a refused write_many are committed; only the batch is rolled back."""

        def failing(_current: StoredObject | None) -> None:
            raise ConflictError("no")

        keys = [ObjectKey(KEY.api_group, KEY.kind, "default", f"w{i}") for i in range(4)]
        before = store.submit_many([(keys[0], put(name="w0"))], actor="t")
        batch = asyncio.ensure_future(
            store.write_many([(keys[1], put(name="w1")), (keys[2], failing)], actor="t")
        )
        await asyncio.sleep(0)  # queued after the first write, before the last
        after = store.submit_many([(keys[3], put(name="w3"))], actor="t")
        results = await asyncio.gather(*before, batch, *after, return_exceptions=True)
        assert isinstance(results[1], ConflictError)
        assert [await store.read(k) is not None for k in keys] == [True, False, False, True]
        assert await store.revision() == 2

    async def test_note_does_not_touch_the_object(self, store: EventStore) -> None:
        """A note appends an event without a snapshot and leaves resourceVersion alone."""
        await store.write(KEY, put(), actor="t")
        result = await store.write(KEY, lambda _: Note("CreateRequested", {"message": "hi"}), actor="ctl")
        assert result.revision == 2
        stored = await store.read(KEY)
        assert stored is not None
        assert stored.resource_version == 1
        events = await store.events(KEY)
        assert [(e.type, e.body is None, e.data) for e in events] == [
            ("Created", False, None),
            ("CreateRequested", True, {"message": "hi"}),
        ]

    async def test_several_changes_in_one_write(self, store: EventStore) -> None:
        """A mutation may return several changes: each gets its revision, all commit together."""
        await store.write(KEY, put(), actor="t")
        result = await store.write(
            KEY, lambda _: [Note("CreateRequested"), Put("MetadataChanged", body(size=2))], actor="ctl"
        )
        assert result.revision == 3
        assert result.object is not None
        assert result.object.resource_version == 3
        assert [(e.revision, e.type) for e in await store.events(KEY)] == [
            (1, "Created"),
            (2, "CreateRequested"),
            (3, "MetadataChanged"),
        ]
        assert (await store.verify()).ok

    async def test_several_changes_are_all_or_nothing(self, store: EventStore) -> None:
        """If one change of a write is refused, none of its events is appended."""
        await store.write(KEY, put(), actor="t")
        huge = body(size=3)
        huge["spec"]["pad"] = "x" * (MAX_OBJECT_BYTES + 1)
        with pytest.raises(InvalidError):
            await store.write(KEY, lambda _: [Note("CreateRequested"), Put("SpecChanged", huge)], actor="t")
        assert await store.revision() == 1
        stored = await store.read(KEY)
        assert stored is not None
        assert stored.body["spec"]["size"] == 1
        assert (await store.verify()).ok

    async def test_note_on_unknown_key(self, store: EventStore) -> None:
        """A note about a key that never existed is NotFoundError and appends nothing."""
        with pytest.raises(NotFoundError):
            await store.write(KEY, lambda _: Note("CreateRequested"), actor="t")
        assert await store.revision() == 0

    async def test_remove_keeps_last_state_in_the_log(self, store: EventStore) -> None:
        """Remove deletes from the projection and logs the last state."""
        await store.write(KEY, put(), actor="t")
        result = await store.write(KEY, lambda current: Remove(current.body if current else {}), actor="t")
        assert result.object is None
        assert await store.read(KEY) is None
        events = await store.events(KEY)
        assert events[-1].type == "Deleted"
        assert events[-1].body is not None
        assert events[-1].body["metadata"]["resourceVersion"] == 2

    async def test_list_revision_and_paging(self, store: EventStore) -> None:
        """list is ordered, pages with next_after, and reports the revision it reflects."""
        for name in ("c", "a", "b"):
            await store.write(ObjectKey(KEY.api_group, KEY.kind, "default", name), put(name=name), actor="t")
        first = await store.list(KEY.api_group, KEY.kind, limit=2)
        assert [i.key.name for i in first.items] == ["a", "b"]
        assert first.next_after == ("default", "b")
        assert first.revision == 3
        rest = await store.list(KEY.api_group, KEY.kind, after=first.next_after)
        assert [i.key.name for i in rest.items] == ["c"]
        assert rest.next_after is None
        empty = await store.list(KEY.api_group, "Gadget")
        assert empty.items == ()
        assert empty.revision == 3

    async def test_pages_in_and_across_namespaces_match_the_order_of_keys(
        self, store: EventStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every combination of namespace, start key, limit and predicate gives the
        objects a plain walk of the (namespace, name) order gives: the start key of
        another namespace (before it, inside it, after it) included, pages followed to
        the end, each full but the last (a predicate's page read in steps of 2 rows)."""
        monkeypatch.setattr(paging, "SCAN", 2)
        keys = [(ns, f"n{i}") for ns in ("a", "default", "z") for i in range(4)]
        for ns, name in keys:
            await store.write(ObjectKey(KEY.api_group, KEY.kind, ns, name), put(name=name), actor="t")
        starts = [None, ("a", "n1"), ("default", "n1"), ("default", "n3"), ("b", "x"), ("zz", "x"), ("", "")]
        predicates: dict[str, Any] = {
            "all": None,
            "odd": lambda item: item.key.name in {"n1", "n3"},
            "none": lambda _item: False,
        }
        for namespace in (None, "a", "default", "z", "missing"):
            for after in starts:
                for picked, predicate in predicates.items():
                    expected = [k for k in sorted(keys) if (namespace is None or k[0] == namespace)]
                    expected = [k for k in expected if after is None or k > after]
                    expected = [k for k in expected if picked != "odd" or k[1] in {"n1", "n3"}]
                    expected = [] if picked == "none" else expected
                    for limit in (None, 1, 2, 5):
                        pages: list[list[tuple[str, str]]] = []
                        cursor = after
                        while True:
                            page = await store.list(
                                KEY.api_group,
                                KEY.kind,
                                namespace=namespace,
                                after=cursor,
                                limit=limit,
                                predicate=predicate,
                            )
                            pages.append([(i.key.namespace, i.key.name) for i in page.items])
                            if page.next_after is None:
                                break
                            cursor = page.next_after
                        case = (namespace, after, picked, limit)
                        assert [k for keys_ in pages for k in keys_] == expected, case
                        assert all(len(p) == limit for p in pages[:-1]), case
                        assert limit is None or len(pages[-1]) <= limit, case

    async def test_the_largest_limit_is_every_object_and_none_is_refused(self, store: EventStore) -> None:
        """A limit past what SQL's integers hold reads every object (as no limit does),
        with or without a predicate; a limit under 1 is refused before anything is read."""
        for name in ("a", "b", "c"):
            await store.write(ObjectKey(KEY.api_group, KEY.kind, "default", name), put(name=name), actor="t")
        for predicate in (None, lambda item: item.key.name != "b"):
            page = await store.list(KEY.api_group, KEY.kind, limit=2**63 - 1, predicate=predicate)
            expected = ["a", "c"] if predicate is not None else ["a", "b", "c"]
            assert ([i.key.name for i in page.items], page.next_after) == (expected, None)
        for limit in (0, -1):
            with pytest.raises(ValueError, match="at least 1"):
                await store.list(KEY.api_group, KEY.kind, limit=limit)

    async def test_a_page_reads_its_rows_not_the_rest(
        self, store: EventStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A page of ``limit`` reads ``limit + 1`` rows, whatever follows (paging through
        a kind costs its rows once, not once a page); a page a predicate picks from reads
        ``paging.SCAN`` rows, then twice as many (up to ``paging.MOST`` a statement)
        until it is full or the rows run out, and no further: full pages, every match
        once, in order."""
        names = [f"o{i:02}" for i in range(10)]
        for name in names:
            await store.write(ObjectKey(KEY.api_group, KEY.kind, "default", name), put(name=name), actor="t")
        read: list[int] = []
        take = paging.Pager.take

        def counting(pager: paging.Pager, rows: Any) -> Any:
            read.append(len(rows))
            return take(pager, rows)

        monkeypatch.setattr(paging.Pager, "take", counting)
        first = await store.list(KEY.api_group, KEY.kind, limit=2)
        assert [i.key.name for i in first.items] == ["o00", "o01"]
        assert (first.next_after, read) == (("default", "o01"), [3])
        monkeypatch.setattr(paging, "SCAN", 3)
        monkeypatch.setattr(paging, "MOST", 6)
        wanted = {"o04", "o05", "o09"}

        def picked(item: Any) -> bool:
            return item.key.name in wanted

        read.clear()
        page = await store.list(KEY.api_group, KEY.kind, limit=2, predicate=picked)
        assert ([i.key.name for i in page.items], page.next_after) == (["o04", "o05"], ("default", "o05"))
        assert read == [3, 6]  # full at o05: nothing after it read (o06-o08 came with it)
        read.clear()
        page = await store.list(KEY.api_group, KEY.kind, limit=2, predicate=picked, after=page.next_after)
        assert ([i.key.name for i in page.items], page.next_after) == (["o09"], None)
        assert read == [3, 1]
        # Without a limit, every row after the cursor, as before.
        read.clear()
        rest = await store.list(KEY.api_group, KEY.kind, predicate=picked, after=("default", "o04"))
        assert ([i.key.name for i in rest.items], rest.next_after, read) == (["o05", "o09"], None, [5])

    async def test_watch_from_list_revision_misses_nothing(self, store: EventStore) -> None:
        """A watch from a list's revision delivers exactly the writes after the list."""
        await store.write(KEY, put(), actor="t")
        page = await store.list(KEY.api_group, KEY.kind)
        other = ObjectKey(KEY.api_group, KEY.kind, "default", "later")
        await store.write(other, put(name="later"), actor="t")
        seen = []
        async for item in store.watch(since=page.revision, kind=KEY.kind):
            if isinstance(item, Bookmark):
                break
            seen.append(item.key.name)
        assert seen == ["later"]

    async def test_watch_events_say_whether_they_carry_a_body(self, store: EventStore) -> None:
        """has_body answers without parsing; a note has none; bodies read as written."""
        for size in (1, 2):
            await store.write(KEY, put(size=size), actor="t")
        await store.write(KEY, lambda _current: Note("Noted", {"n": 1}), actor="t")
        seen = []
        async for item in store.watch(kind=KEY.kind):
            if isinstance(item, Bookmark):
                break
            seen.append((item.revision, item.has_body))
            if item.has_body:
                assert item.body is not None
                assert item.body["spec"] == {"size": item.revision}
            else:
                assert item.body is None
                assert item.data == {"n": 1}
        assert seen == [(1, True), (2, True), (3, False)]

    async def test_watch_ends_when_store_closes(self, store: EventStore) -> None:
        """A waiting watch ends (no hang) when the store is closed."""
        items = []
        caught_up = asyncio.Event()

        async def follow() -> None:
            async for item in store.watch():
                items.append(item)
                caught_up.set()

        task = asyncio.create_task(follow())
        await asyncio.wait_for(caught_up.wait(), 5)
        await store.close()
        await asyncio.wait_for(task, 5)
        assert items == [Bookmark(0)]

    async def test_compaction_horizon(self, store: EventStore) -> None:
        """Compaction keeps live snapshots; watching from before the horizon expires."""
        for size in range(1, 5):
            await store.write(KEY, put(size=size), actor="t")
        assert await store.compact(4) == 3
        assert [e.revision for e in await store.events(KEY)] == [4]
        with pytest.raises(ExpiredError) as caught:
            async for _ in store.watch(since=2):
                pass
        assert caught.value.horizon == 4
        assert (await store.verify()).ok
        assert await store.compact(100) == 0, "the head is never compacted past"


class TestRemembered:
    """Settings a store keeps beside its log."""

    async def test_remember_forget_and_keep_through_compaction(self, store: EventStore) -> None:
        """What is remembered comes back as JSON gives it, a later value replaces an
        earlier, None forgets; compaction keeps it, and it is no event."""
        assert await store.remembered() == {}
        await store.remember("provider:files", {"roots": ["/srv/a"]})
        await store.remember("provider:s3", {"endpointUrl": "http://x", "n": 5})
        await store.remember("count", 7)
        await store.remember("provider:files", {"roots": ["/srv/b", "/srv/c"]})
        assert await store.remembered() == {
            "count": 7,
            "provider:files": {"roots": ["/srv/b", "/srv/c"]},
            "provider:s3": {"endpointUrl": "http://x", "n": 5},
        }
        await store.remember("count", None)
        await store.write(KEY, put(), actor="t")
        await store.compact(await store.revision() + 1)
        assert await store.revision() == 1
        assert await store.remembered() == {
            "provider:files": {"roots": ["/srv/b", "/srv/c"]},
            "provider:s3": {"endpointUrl": "http://x", "n": 5},
        }
        report = await store.verify(deep=True)
        assert report.ok, report.differences

    async def test_read_only_reads_and_refuses(self, db_path: Path) -> None:
        """A store opened read-only reads what is remembered and refuses to remember."""
        async with SQLiteStore(db_path) as store:
            await store.remember("a", {"b": [1, 2]})
        async with SQLiteStore(db_path, read_only=True) as store:
            assert await store.remembered() == {"a": {"b": [1, 2]}}
            with pytest.raises(StoreError, match="read-only"):
                await store.remember("a", None)


class TestStoreLocation:
    """What can be known of a store without opening it (``reconcile version``, shell
    completion), through the URL that names it."""

    async def test_an_open_store_is_there_at_its_schema(self, store: EventStore) -> None:
        """The store's own URL locates it: it exists, at the schema this reconcile writes,
        and takes some bytes."""
        location = locate_store(store.url)
        assert location.exists()
        assert location.stored_schema() == location.schema_version >= 1
        assert location.size() > 0

    async def test_live_names(self, store: EventStore) -> None:
        """The live names of one kind in one namespace, in order, from a prefix taken
        literally (no wildcard), up to a limit; a deleted object's name is not one."""
        names = ["a_b", "a%c", "ab", "abc", "b", "gone"]
        for name in names:
            await store.write(key(name), put(name=name), actor="t")
        other = ObjectKey(KEY.api_group, KEY.kind, "other", "abd")
        await store.write(other, put(name="abd"), actor="t")
        await store.write(ObjectKey(KEY.api_group, "Gadget", "default", "abe"), put(name="abe"), actor="t")
        await store.write(key("gone"), lambda current: Remove(current.body if current else {}), actor="t")
        location = locate_store(store.url)
        group, kind = KEY.api_group, KEY.kind
        assert location.live_names(group, kind, "default") == ["a%c", "a_b", "ab", "abc", "b"]
        assert location.live_names(group, kind, "default", prefix="ab") == ["ab", "abc"]
        assert location.live_names(group, kind, "default", prefix="a_") == ["a_b"]
        assert location.live_names(group, kind, "default", prefix="a%") == ["a%c"]
        assert location.live_names(group, kind, "default", prefix="A") == []
        assert location.live_names(group, kind, "default", prefix="g") == []
        assert location.live_names(group, kind, "default", limit=2) == ["a%c", "a_b"]
        assert location.live_names(group, kind, "other", prefix="ab") == ["abd"]

    async def test_no_store_is_nothing_and_creates_nothing(self, tmp_path: Path) -> None:
        """A store that does not exist: not there, no names, no bytes; asking creates
        nothing."""
        location = locate_store(tmp_path / "missing.db")
        assert not location.exists()
        assert location.live_names(KEY.api_group, KEY.kind, "default") == []
        assert location.size() == 0
        assert list(tmp_path.iterdir()) == []

    async def test_not_a_store_is_a_store_error(self, tmp_path: Path) -> None:
        """What is not a reconcile store cannot be read as one: StoreError."""
        path = tmp_path / "notes.txt"
        path.write_text("not a database\n")
        location = locate_store(path)
        assert location.exists()
        with pytest.raises(StoreError):
            location.stored_schema()
        with pytest.raises(StoreError):
            location.live_names(KEY.api_group, KEY.kind, "default")

    def test_a_url_no_backend_takes_is_a_store_error(self) -> None:
        """A URL no backend takes is refused when located, as when opened."""
        with pytest.raises(StoreError, match="unsupported store URL scheme"):
            locate_store("nosuch://host/db")


def key(name: str) -> ObjectKey:
    """The key of the Widget ``name`` in the default namespace."""
    return ObjectKey(KEY.api_group, KEY.kind, KEY.namespace, name)


class TestSQLiteWriter:
    """The SQLite backend's writer task never leaves a write hanging."""

    async def test_dead_writer_fails_writes_loudly(self, tmp_path: Path) -> None:
        """If the writer task dies, queued and later writes fail with StoreError."""
        store = SQLiteStore(tmp_path / "w.db")
        await store.open()
        assert store._writer_task is not None
        store._writer_task.cancel()
        with pytest.raises(StoreError, match="writer stopped"):
            await asyncio.wait_for(store.write(KEY, put(), actor="t"), 5)
        with pytest.raises(StoreError, match="writer stopped"):
            await store.write(KEY, put(), actor="t")
        await store.close()
