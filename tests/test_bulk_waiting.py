"""How a run of a bulk apply waits for its writes: on the first one not done, then taking
every one done, in the documents' order whatever order the store finishes them in; a
write's own error in its own result; a cancelled apply cancels the writes not begun.

The store's queue is held here (its ``submit_many`` hands back futures the test resolves)
so each order of events is made on purpose, not hoped for."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from helpers import settle, widget

from reconcile import Client, ConflictError
from reconcile.api import bulk
from reconcile.api.bulk import Applied
from reconcile.model.meta import ObjectKey
from reconcile.store import EventStore, Mutation, Put, StoredObject, WriteResult
from reconcile.testing import let_run


class HeldStore:
    """The client's store with its queue held: each run's writes wait for the test."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        #: Each run queued: its writes and their futures.
        self.runs: list[tuple[list[tuple[ObjectKey, Mutation]], list[asyncio.Future[WriteResult]]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def submit_many(
        self,
        writes: Sequence[tuple[ObjectKey, Mutation]],
        actor: str,  # noqa: ARG002 - the store's signature
        user: str | None = None,  # noqa: ARG002
    ) -> list[asyncio.Future[WriteResult]]:
        """Futures the test resolves (nothing reaches the store)."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[WriteResult]] = [loop.create_future() for _ in writes]
        self.runs.append((list(writes), futures))
        return futures


class HeldWriter:
    """The client's engine, writing into a :class:`HeldStore`."""

    def __init__(self, client: Client) -> None:
        self._engine = client.engine
        self.store = HeldStore(client.store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def created(write: tuple[ObjectKey, Mutation], revision: int) -> WriteResult:
    """What the store would return for the create ``write`` makes, at ``revision``."""
    key, mutation = write
    change = mutation(None)
    assert isinstance(change, Put)
    return WriteResult(revision, StoredObject(key, "uid", revision, change.body), written=True)


async def first_run(writer: HeldWriter) -> tuple[list[Any], list[asyncio.Future[WriteResult]]]:
    """The first run the apply queued, once it has."""
    await settle(lambda: bool(writer.store.runs))
    return writer.store.runs[0]


class TestWaiting:
    """One run of three documents, its writes finished by the test."""

    async def test_results_follow_the_documents_whatever_order_the_writes_end_in(
        self, client: Client
    ) -> None:
        """Writes finished last-first: every result, and every on_applied call, is in the
        documents' order, each heard once its own write and those before it are done."""
        writer = HeldWriter(client)
        heard: list[str | None] = []
        documents = [widget("a"), widget("b"), widget("c")]
        task = asyncio.create_task(
            bulk.apply_many(
                writer, documents, manager="m", on_applied=lambda a: heard.append(a.key and a.key.name)
            )
        )
        writes, futures = await first_run(writer)
        futures[2].set_result(created(writes[2], 3))
        futures[1].set_result(created(writes[1], 2))
        for turn in range(3):  # the turns a wake-up by those writes would take
            await let_run(turn)
        assert heard == []  # the first document's write is not done: nothing is taken yet
        futures[0].set_result(created(writes[0], 1))
        results: list[Applied] = await task
        assert heard == ["a", "b", "c"]
        assert [r.outcome for r in results] == ["created"] * 3
        assert [r.object.metadata.name for r in results if r.object is not None] == ["a", "b", "c"]

    async def test_a_write_refused_by_the_store_is_refused_alone(self, client: Client) -> None:
        """A write that fails (a conflict found in the store's transaction) is that
        document's result, refused with the error; the others are created."""
        writer = HeldWriter(client)
        task = asyncio.create_task(
            bulk.apply_many(writer, [widget("a"), widget("b"), widget("c")], manager="m")
        )
        writes, futures = await first_run(writer)
        refusal = ConflictError("b was modified")
        futures[1].set_exception(refusal)
        futures[0].set_result(created(writes[0], 1))
        futures[2].set_result(created(writes[2], 2))
        results = await task
        assert [r.outcome for r in results] == ["created", "refused", "created"]
        assert results[1].error is refusal

    async def test_a_cancelled_apply_cancels_the_writes_not_done(self, client: Client) -> None:
        """Cancelled while its run is in flight, the apply ends cancelled and the writes
        not done are cancelled (a store does not begin a cancelled write), the done one
        left as it is; no later run is queued."""
        writer = HeldWriter(client)
        heard: list[str | None] = []
        documents = [widget("a"), widget("b"), widget("c"), widget("d")]
        task = asyncio.create_task(
            bulk.apply_many(
                writer,
                documents,
                manager="m",
                batch=3,
                on_applied=lambda a: heard.append(a.key and a.key.name),
            )
        )
        writes, futures = await first_run(writer)
        futures[0].set_result(created(writes[0], 1))
        await settle(lambda: heard == ["a"])
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [f.cancelled() for f in futures] == [False, True, True]
        assert len(writer.store.runs) == 1


@pytest.mark.parametrize("atomic", [False, True])
async def test_a_failing_on_applied_is_logged_and_the_apply_goes_on(
    client: Client, atomic: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """``on_applied`` raising for one document (a cache's hook that breaks): every other
    document is still applied, heard and given its result; the failure is logged, naming
    the object, as a failed callback is."""
    heard: list[str] = []

    def hook(applied: Applied) -> None:
        assert applied.key is not None
        heard.append(applied.key.name)
        if applied.key.name == "b":
            raise RuntimeError("the hook broke")

    documents = [widget(name) for name in "abcde"]
    with caplog.at_level("ERROR", logger="asyncio"):
        results = await client.apply_many(documents, on_applied=hook, atomic=atomic)
    assert [r.outcome for r in results] == ["created"] * 5
    assert heard == list("abcde")
    assert "on_applied failed for" in caplog.text
    assert "the hook broke" in caplog.text
