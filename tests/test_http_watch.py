"""The HTTP API's watches: events as client-go and kubectl read them, bookmarks, timeouts,
410 after compaction, selections that objects enter and leave, and the limits that keep
the server up (a cap on watchers, a slow watcher cut off, disconnects, shutdown)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from watch_helpers import FILES, app_over, eventually, manifest, remove, request, types, watch

from reconcile.http.backlog import Backlog
from reconcile.http.watchers import WatchLimits, close_watches, watchers_of
from reconcile.http.watching import Watch
from reconcile.model.meta import ObjectKey
from reconcile.store import RawEvent


class TestEvents:
    """What a watch sends."""

    async def test_a_watch_from_nothing_lists_then_follows(self, tmp_path: Path) -> None:
        """No resourceVersion: the current objects as ADDED, then MODIFIED, ADDED, DELETED."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            await client.apply(manifest("about"), origin=tmp_path / "a.yaml")
            stream = await watch(app)
            assert stream.status == 200
            assert stream.headers["content-type"] == "application/json"
            await stream.wait_events(2)
            await client.apply(manifest("index", content="changed\n"), origin=tmp_path / "a.yaml")
            await client.apply(manifest("contact"), origin=tmp_path / "a.yaml")
            await remove(client, "about")
            events = await stream.wait_events(6)
            stream.disconnect()
            await stream.wait_ended()
        assert types(events) == [
            ("ADDED", "about"),
            ("ADDED", "index"),
            ("MODIFIED", "index"),
            ("ADDED", "contact"),
            ("MODIFIED", "about"),  # (its deletionTimestamp set: it holds a finalizer)
            ("DELETED", "about"),
        ]
        modified = events[2]["object"]
        assert modified["spec"]["content"] == "changed\n"
        assert isinstance(modified["metadata"]["resourceVersion"], str)
        assert modified["metadata"]["managedFields"][0]["manager"] == "reconcile"  # the wire form
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[2:]]
        assert versions == sorted(versions)

    async def test_each_store_backs_a_watch(self, tmp_path: Path, store_url: str) -> None:
        """SQLite and PostgreSQL alike: the list, a change, a deletion, and 410 after compaction."""
        async with app_over(tmp_path, store=store_url) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            stream = await watch(app)
            await stream.wait_events(1)
            await client.apply(manifest("index", content="changed\n"), origin=tmp_path / "a.yaml")
            await remove(client, "index")
            events = await stream.wait_events(4)
            stream.disconnect()
            await stream.wait_ended()
            await client.compact(await client.revision())
            expired = await watch(app, resourceVersion="1")
            await expired.wait_ended()
        assert types(events) == [
            ("ADDED", "index"),
            ("MODIFIED", "index"),
            ("MODIFIED", "index"),
            ("DELETED", "index"),
        ]
        [error] = expired.events
        assert (error["type"], error["object"]["code"]) == ("ERROR", 410)

    async def test_a_watch_from_a_resource_version_sends_only_later_changes(self, tmp_path: Path) -> None:
        """resourceVersion N: the events after N, nothing listed."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            listed = (await request(app, FILES)).json()
            await client.apply(manifest("about"), origin=tmp_path / "a.yaml")
            stream = await watch(app, resourceVersion=listed["metadata"]["resourceVersion"])
            events = await stream.wait_events(1)
            stream.disconnect()
            await stream.wait_ended()
        assert types(events) == [("ADDED", "about")]

    async def test_bookmarks_come_at_the_configured_period(self, tmp_path: Path) -> None:
        """allowWatchBookmarks: BOOKMARKs naming the latest revision, with only the
        apiVersion, kind and resourceVersion."""
        async with app_over(tmp_path, watch_limits=WatchLimits(bookmark_interval=0.05)) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            head = await client.revision()
            stream = await watch(app, resourceVersion=str(head), allowWatchBookmarks="true")
            [bookmark] = await stream.wait_events(1)
            without = await watch(app, resourceVersion=str(head))
            await client.apply(manifest("about"), origin=tmp_path / "a.yaml")
            await without.wait_events(1)
            for one in (stream, without):
                one.disconnect()
                await one.wait_ended()
        assert bookmark == {
            "type": "BOOKMARK",
            "object": {
                "kind": "File",
                "apiVersion": "files.reconcile.dev/v1",
                "metadata": {"resourceVersion": str(head)},
            },
        }
        assert [e["type"] for e in without.events] == ["ADDED"]  # no bookmark unasked

    async def test_timeout_seconds_ends_the_stream_cleanly(self, tmp_path: Path) -> None:
        """timeoutSeconds: the response finishes (a last empty chunk) and frees its place."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            stream = await watch(app, timeoutSeconds="1")
            await stream.wait_ended(within=30)
            assert stream.ended
            assert watchers_of(app).count == 0
        assert types(stream.events) == [("ADDED", "index")]

    async def test_a_compacted_resource_version_gets_a_410_error_event(self, tmp_path: Path) -> None:
        """A watch from before the compaction horizon: an ERROR event with a 410 Expired
        Status, then the end of the stream (client-go relists)."""
        async with app_over(tmp_path) as (client, app):
            for content in ("a", "b", "c", "d"):
                await client.apply(manifest("index", content=content), origin=tmp_path / "a.yaml")
            await client.compact(await client.revision())
            stream = await watch(app, resourceVersion="1")
            await stream.wait_ended()
        [error] = stream.events
        assert error["type"] == "ERROR"
        status = error["object"]
        assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
        assert "too old resource version" in status["message"]
        assert stream.ended

    async def test_send_initial_events_ends_them_with_an_annotated_bookmark(self, tmp_path: Path) -> None:
        """sendInitialEvents=true: ADDED events, then a BOOKMARK marked as their end."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            head = await client.revision()
            stream = await watch(
                app,
                sendInitialEvents="true",
                resourceVersionMatch="NotOlderThan",
                allowWatchBookmarks="true",
            )
            events = await stream.wait_events(2)
            stream.disconnect()
            await stream.wait_ended()
        assert types(events) == [("ADDED", "index"), ("BOOKMARK", str(head))]
        assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


class TestSelections:
    """Selectors filter a watch; objects enter and leave the selection."""

    async def _relabel(self, tmp_path: Path, **params: str) -> list[tuple[str, str]]:
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index", app="site"), origin=tmp_path / "a.yaml")
            await client.apply(manifest("about", app="blog"), origin=tmp_path / "a.yaml")
            if params.pop("from_head", None):
                params["resourceVersion"] = str(await client.revision())
            stream = await watch(app, labelSelector="app=site", **params)
            origin = tmp_path / "a.yaml"
            await client.apply(manifest("index", app="blog"), origin=origin)  # leaves
            await client.apply(manifest("about", app="blog", content="x"), origin=origin)  # never in
            await client.apply(manifest("about", app="site"), origin=origin)  # enters
            await client.apply(manifest("about", app="site", content="y"), origin=origin)  # stays
            await remove(client, "about")  # gone while in
            await client.apply(manifest("index", app="site", content="z"), origin=origin)  # back
            expected = 6 if "resourceVersion" in params else 7
            events = await stream.wait_events(expected)
            stream.disconnect()
            await stream.wait_ended()
            return types(events)

    async def test_label_selected_watch_from_the_list(self, tmp_path: Path) -> None:
        """Listed first: leaving is DELETED, entering ADDED, staying MODIFIED."""
        assert await self._relabel(tmp_path) == [
            ("ADDED", "index"),
            ("DELETED", "index"),
            ("ADDED", "about"),
            ("MODIFIED", "about"),
            ("MODIFIED", "about"),
            ("DELETED", "about"),
            ("ADDED", "index"),
        ]

    async def test_label_selected_watch_from_a_resource_version(self, tmp_path: Path) -> None:
        """From a resourceVersion, an object's earlier state is looked up in its history."""
        assert await self._relabel(tmp_path, from_head="yes") == [
            ("DELETED", "index"),
            ("ADDED", "about"),
            ("MODIFIED", "about"),
            ("MODIFIED", "about"),
            ("DELETED", "about"),
            ("ADDED", "index"),
        ]

    @pytest.mark.parametrize("from_head", [False, True], ids=["listed", "from-resource-version"])
    async def test_leaving_carries_the_state_it_had_in_the_selection(
        self, tmp_path: Path, *, from_head: bool
    ) -> None:
        """An object whose labels stop matching is DELETED with its previous state (the
        labels that matched) and the leaving change's resourceVersion, as the apiserver
        sends it; a deletion carries the object as deleted."""
        async with app_over(tmp_path) as (client, app):
            origin = tmp_path / "a.yaml"
            await client.apply(manifest("index", app="site", content="old"), origin=origin)
            params = {"resourceVersion": str(await client.revision())} if from_head else {}
            stream = await watch(app, labelSelector="app=site", **params)
            await client.apply(manifest("index", app="blog", content="new"), origin=origin)  # leaves
            left = await client.revision()
            await client.apply(manifest("gone", app="site"), origin=origin)
            await remove(client, "gone")
            events = await stream.wait_events(4 if from_head else 5)
            stream.disconnect()
            await stream.wait_ended()
        deleted = [e for e in events if e["type"] == "DELETED"]
        assert [e["object"]["metadata"]["name"] for e in deleted] == ["index", "gone"]
        leaving = deleted[0]["object"]
        assert leaving["metadata"]["labels"] == {"app": "site"}
        assert leaving["spec"]["content"] == "old"
        assert leaving["metadata"]["resourceVersion"] == str(left)
        assert deleted[1]["object"]["metadata"]["deletionTimestamp"]

    async def test_changes_while_a_watch_reads_an_object_history_are_not_skipped(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A label-selected watch from a resourceVersion reads an object's history the
        first time it meets it: what is committed meanwhile still comes, in order. Its
        store watch once skipped those commits: a loaded full run lost an ADDED."""
        async with app_over(tmp_path) as (client, app):
            origin = tmp_path / "a.yaml"
            await client.apply(manifest("index", app="site"), origin=origin)
            await client.apply(manifest("about", app="blog"), origin=origin)
            reading, release = asyncio.Event(), asyncio.Event()
            history = client.store.events

            async def held(key: ObjectKey) -> list[RawEvent]:
                if key.name == "index":
                    reading.set()
                    await release.wait()
                return await history(key)

            monkeypatch.setattr(client.store, "events", held)
            stream = await watch(app, labelSelector="app=site", resourceVersion=str(await client.revision()))
            await client.apply(manifest("index", app="blog"), origin=origin)  # leaves
            await eventually(reading.is_set, lambda: "the watch reading index's history")
            await client.apply(manifest("about", app="blog", content="x"), origin=origin)  # never in
            await client.apply(manifest("about", app="site"), origin=origin)  # enters
            release.set()
            await client.apply(manifest("about", app="site", content="y"), origin=origin)  # stays
            await eventually(  # (the last change's event, whatever came before it)
                lambda: any(e["object"]["spec"]["content"] == "y" for e in stream.events),
                lambda: f"about's last change: {types(stream.events)}",
            )
            stream.disconnect()
            await stream.wait_ended()
        assert types(stream.events) == [("DELETED", "index"), ("ADDED", "about"), ("MODIFIED", "about")]

    async def test_field_selector_filters_a_watch(self, tmp_path: Path) -> None:
        """metadata.name: only that object's events; across namespaces, metadata.namespace."""
        async with app_over(tmp_path) as (client, app):
            origin = tmp_path / "a.yaml"
            await client.apply(manifest("index"), origin=origin)
            by_name = await watch(app, fieldSelector="metadata.name=about")
            by_namespace = await watch(
                app, "/apis/files.reconcile.dev/v1/files", fieldSelector="metadata.namespace=other"
            )
            await client.apply(manifest("index", content="x"), origin=origin)
            await client.apply(manifest("about"), origin=origin)
            await client.apply(manifest("elsewhere", namespace="other"), origin=origin)
            [named] = await by_name.wait_events(1)
            [spaced] = await by_namespace.wait_events(1)
            for one in (by_name, by_namespace):
                one.disconnect()
                await one.wait_ended()
        assert types([named]) == [("ADDED", "about")]
        assert types([spaced]) == [("ADDED", "elsewhere")]
        assert len(by_name.events) == 1


class TestLimits:
    """What keeps the server up under many, slow or vanishing watchers."""

    async def test_the_watcher_cap_answers_429_with_retry_after(self, tmp_path: Path) -> None:
        """Beyond max_watchers: a TooManyRequests Status; a freed place is taken again."""
        async with app_over(tmp_path, watch_limits=WatchLimits(max_watchers=2, retry_after=3)) as (_, app):
            first, second = await watch(app), await watch(app)
            refused = await watch(app)
            await refused.wait_ended()
            first.disconnect()
            await first.wait_ended()
            again = await watch(app)
            assert again.status == 200
            for one in (second, again):
                one.disconnect()
                await one.wait_ended()
        assert refused.status == 429
        assert refused.headers["retry-after"] == "3"
        status = refused.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "TooManyRequests", 429)

    async def test_a_watcher_that_never_reads_is_cut_off(self, tmp_path: Path) -> None:
        """A client that stops reading: its backlog stays within the bound, it is cut off
        with a 410 ERROR event (once it reads again), and the other watcher gets every change."""
        limits = WatchLimits(max_backlog_events=5, grace=30)
        async with app_over(tmp_path, watch_limits=limits) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            head = str(await client.revision())
            slow = await watch(app, resourceVersion=head)
            fast = await watch(app, resourceVersion=head)
            slow.stop_reading()
            watches = [w for w in watchers_of(app).watches if isinstance(w, Watch)]
            assert len(watches) == 2
            largest = 0
            for n in range(20):
                await client.apply(manifest("index", content=f"v{n}"), origin=tmp_path / "a.yaml")
                largest = max(largest, *(w.backlog.lines for w in watches))
            await fast.wait_events(20)
            # The cut-off watch cancelled its blocked send and tries to send the ERROR.
            await eventually(lambda: slow.attempts >= 2, lambda: "the ERROR send after the cut")
            slow.read_again()
            await slow.wait_ended()
            fast.disconnect()
            await fast.wait_ended()
            assert watchers_of(app).count == 0
        assert largest <= limits.max_backlog_events + 1
        last = slow.events[-1]
        assert last["type"] == "ERROR"
        assert (last["object"]["code"], last["object"]["reason"]) == (410, "Expired")
        assert slow.ended
        assert [e["type"] for e in fast.events] == ["MODIFIED"] * 20

    async def test_a_disconnect_frees_everything(self, tmp_path: Path) -> None:
        """A client that goes: the request returns, its place is free, no task is left."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            before = len(asyncio.all_tasks())
            streams = [await watch(app, allowWatchBookmarks="true") for _ in range(5)]
            await asyncio.gather(*(s.wait_events(1) for s in streams))
            assert watchers_of(app).count == 5
            for stream in streams:
                stream.disconnect()
            for stream in streams:
                await stream.wait_ended()
            assert watchers_of(app).count == 0
            await eventually(lambda: len(asyncio.all_tasks()) <= before, lambda: "every watch task gone")

    async def test_close_watches_ends_every_stream_cleanly(self, tmp_path: Path) -> None:
        """close_watches(app) (for a server's shutdown): every stream finishes, new ones get 503."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            streams = [await watch(app) for _ in range(3)]
            await asyncio.gather(*(s.wait_events(1) for s in streams))
            assert await close_watches(app, within=30) == 3
            for stream in streams:
                await stream.wait_ended()
                assert stream.ended
            late = await watch(app)
            await late.wait_ended()
        assert late.status == 503

    async def test_the_shutdown_hook_ends_every_stream(self, tmp_path: Path) -> None:
        """The hook the app registers among its shutdown hooks ends the open watches."""
        async with app_over(tmp_path) as (client, app):
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            stream = await watch(app)
            await stream.wait_events(1)
            for hook in app.state.reconcile.extras["shutdown_hooks"]:
                await hook()
            await stream.wait_ended()
        assert stream.ended
        assert watchers_of(app).count == 0


class TestBacklog:
    """The bounded queue between a watch's reader and its sender."""

    async def test_marks_merge_and_name_the_revision_reached(self) -> None:
        """Consecutive marks are one; take() gives the lines and the latest revision."""
        backlog = Backlog(max_events=10, max_bytes=1000)
        backlog.put(b"a\n", 0)  # (a listed object: no revision reached yet)
        assert backlog.take() == ([b"a\n"], 0)
        backlog.mark(3)
        backlog.mark(5)
        backlog.put(b"b\n", 6)
        backlog.mark(7)
        assert backlog.lines == 1
        assert backlog.take() == ([b"b\n"], 7)
        assert backlog.empty

    async def test_put_says_when_the_bound_is_passed(self) -> None:
        """Beyond the events or the bytes: False; a lone line larger than the bytes fits."""
        by_events = Backlog(max_events=2, max_bytes=1000)
        assert by_events.put(b"1\n", 1)
        assert by_events.put(b"2\n", 2)
        assert not by_events.put(b"3\n", 3)
        by_bytes = Backlog(max_events=100, max_bytes=10)
        assert by_bytes.put(b"x" * 50, 1)  # (one event always fits)
        assert not by_bytes.put(b"y", 2)

    async def test_put_waiting_waits_for_room(self) -> None:
        """The initial events wait until the sender takes what is queued."""
        backlog = Backlog(max_events=1, max_bytes=1000)
        await backlog.put_waiting(b"1\n", 0)
        second = asyncio.ensure_future(backlog.put_waiting(b"2\n", 0))
        await asyncio.sleep(0)
        assert not second.done()
        assert backlog.take() == ([b"1\n"], 0)
        await asyncio.wait_for(second, 5)
        assert backlog.take() == ([b"2\n"], 0)
