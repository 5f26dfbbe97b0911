"""Processes the multi-process tests start: ``python tests/workers.py MODE DB [ARGS]``.

* ``stream DB`` -- apply widgets forever, 16 at a time, printing ``ack NAME`` after each
  write is acknowledged (durable), until killed.
* ``share DB PREFIX COUNT TOTAL`` -- watch the log from 0 while applying COUNT widgets
  named PREFIX-N, then wait until the watch has seen TOTAL creations (its own and
  another process's) and print ``saw TOTAL``.
* ``converge DB CLOUD`` -- run the Runtime over a file-backed MemoryCloud, printing
  ``created`` for each CreateSucceeded, until killed; ``converge DB CLOUD --until-ready``
  exits 0 (printing ``ready N``) once every Bucket is Ready; ``--knowing`` uses the
  provider's knowing mode (exclusive, atomic create).
* ``crash DB CLOUD [--knowing]`` -- apply Bucket ``b`` and run, SIGKILLing this process
  the moment the provider's create has returned: the create happened, its record did not.
* ``landing DB CLOUD JOURNAL COUNT`` -- apply COUNT Buckets and run with two workers, the
  engine's outcome writes of every fourth bucket held before they reach the store (left
  landing); once the others are Ready and those writes wait, change the held buckets'
  spec, let the loop run, print ``landing N`` and SIGKILL this process.
* With ``--journal PATH`` (``converge``) or JOURNAL (``landing``), each provider create,
  update and delete that returned is appended to PATH as ``OPERATION NAME``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from helpers import widget

from reconcile import Bookmark, Event, EventType, ExternalClient, ObjectKey, Runtime, connect
from reconcile.controller import InformerEvent
from reconcile.testing import MemoryCloud, MemoryProvider, example_kinds


async def stream(db: str) -> None:
    """Write until killed, acknowledging each durable write on stdout."""
    async with connect(db, kinds=example_kinds()) as client:
        counter = iter(range(10**9))

        async def writer() -> None:
            while True:
                name = f"w{next(counter)}"
                await client.apply(widget(name, 1))
                sys.stdout.write(f"ack {name}\n")
                sys.stdout.flush()

        await asyncio.gather(*(writer() for _ in range(16)))


async def share(db: str, prefix: str, count: int, total: int) -> None:
    """Write COUNT objects while watching for TOTAL creations from any process."""
    async with connect(db, kinds=example_kinds()) as client:
        seen: set[str] = set()
        revisions: list[int] = []
        done = asyncio.Event()

        async def watch() -> None:
            async for event in client.watch("widget"):
                if isinstance(event, Event):
                    revisions.append(event.revision)
                if isinstance(event, Event) and event.type == EventType.CREATED:
                    seen.add(event.key.name)
                    if len(seen) == total:
                        done.set()
                        return

        watcher = asyncio.create_task(watch())
        queue = iter(range(count))

        async def writer() -> None:
            for i in queue:
                await client.apply(widget(f"{prefix}-{i}", i))

        await asyncio.gather(*(writer() for _ in range(8)))
        await asyncio.wait_for(done.wait(), timeout=60)
        await watcher
        # Every revision once, in order, none skipped: both processes' writes interleave,
        # and this watch is served partly from memory, partly from the database.
        if revisions != list(range(1, len(revisions) + 1)):
            sys.stdout.write(f"gap or disorder in {revisions[:20]}...\n")
        sys.stdout.write(f"saw {len(seen)}\n")


async def converge(
    db: str, cloud_path: str, until_ready: bool, knowing: bool, journal: str | None = None
) -> None:
    """Reconcile buckets against a file-backed cloud."""
    cloud = MemoryCloud(path=cloud_path)
    provider = MemoryProvider(cloud, knowing=knowing) if journal is None else _Journaled(journal, cloud)
    async with Runtime(db, providers=[provider], poll_interval=3600) as runtime:
        async for item in runtime.client.watch("bucket", bookmarks=True):
            if isinstance(item, Event) and item.type == "CreateSucceeded":
                sys.stdout.write("created\n")
                sys.stdout.flush()
            if until_ready and isinstance(item, Bookmark):
                buckets = (await runtime.client.list("bucket")).items
                ready = [
                    b for b in buckets if (c := b.status.condition("Ready")) and c.status.value == "True"
                ]
                if len(ready) == len(buckets):
                    sys.stdout.write(f"ready {len(ready)}\n")
                    return


class _KilledAfterCreate(MemoryProvider):
    """Its client's create, once it has returned, SIGKILLs the process."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:
        client = await super().connect(config)
        create = client.create

        async def create_then_die(resource: Any) -> Any:
            await create(resource)
            os.kill(os.getpid(), signal.SIGKILL)

        client.create = create_then_die  # type: ignore[method-assign]
        return client


class _Journaled(MemoryProvider):
    """Its client appends each create, update and delete that returned to a journal."""

    def __init__(self, journal: str, cloud: MemoryCloud) -> None:
        super().__init__(cloud)
        self.journal = Path(journal)

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:
        client = await super().connect(config)
        for operation in ("create", "update", "delete"):
            setattr(client, operation, self._journaled(operation, getattr(client, operation)))
        return client

    def _journaled(self, operation: str, call: Any) -> Any:
        async def journaled(resource: Any, *args: Any) -> Any:
            result = await call(resource, *args)
            with self.journal.open("a") as journal:
                journal.write(f"{operation} {resource.metadata.name}\n")
            return result

        return journaled


def _bucket(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "memory.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"name": name, "value": value},
    }


async def landing(db: str, cloud_path: str, journal: str, count: int) -> None:
    """Converge with outcome writes left landing, then die (see the module docstring)."""
    names = [f"b{i:03d}" for i in range(count)]
    held = set(names[::4])
    waiting: set[str] = set()
    all_waiting = asyncio.Event()
    provider = _Journaled(journal, MemoryCloud(path=cloud_path))
    async with Runtime(db, providers=[provider], poll_interval=3600, workers=2) as runtime:
        store = runtime.client.store
        write = store.write
        engine_writes: dict[str, int] = {}

        async def holding(key: ObjectKey, mutation: Any, *, actor: str, user: str | None = None) -> Any:
            if key.name in held and actor == "reconcile-engine":
                engine_writes[key.name] = engine_writes.get(key.name, 0) + 1
                if engine_writes[key.name] > 1:  # its pending marker went; its outcome waits
                    waiting.add(key.name)
                    if waiting == held:
                        all_waiting.set()
                    await asyncio.Event().wait()  # forever: the process is killed first
            return await write(key, mutation, actor=actor, user=user)

        store.write = holding  # type: ignore[method-assign]
        await runtime.apply_many([_bucket(name, "v") for name in names])
        for name in names:
            if name not in held:
                await runtime.wait_ready("bucket", name)
        await all_waiting.wait()
        changed: set[str] = set()
        heard = asyncio.Event()

        def hear(event: InformerEvent) -> None:
            if event.new is not None and event.key.name in held and event.new.metadata.generation > 1:
                changed.add(event.key.name)
                if changed == held:
                    heard.set()

        runtime.cache.informer("bucket").add_handler(hear)
        await runtime.apply_many([_bucket(name, "changed") for name in sorted(held)])
        await heard.wait()  # the controller heard of every change (and queued the keys)
        for _ in range(200):
            await asyncio.sleep(0)  # a held key, were it handed out again, would act now
        sys.stdout.write(f"landing {len(waiting)}\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


async def crash(db: str, cloud_path: str, knowing: bool) -> None:
    """Apply one bucket; die right after its create."""
    provider = _KilledAfterCreate(MemoryCloud(path=cloud_path), knowing=knowing)
    async with Runtime(db, providers=[provider], poll_interval=3600) as runtime:
        await runtime.apply(
            {
                "apiVersion": "memory.reconcile.dev/v1",
                "kind": "Bucket",
                "metadata": {"name": "b"},
                "spec": {"name": "b", "value": "v"},
            }
        )
        await runtime.wait_ready("bucket", "b")  # never: the create kills the process
        sys.stdout.write("not killed\n")


if __name__ == "__main__":
    mode, db, *rest = sys.argv[1:]
    if mode == "stream":
        asyncio.run(stream(db))
    elif mode == "share":
        asyncio.run(share(db, rest[0], int(rest[1]), int(rest[2])))
    elif mode == "crash":
        asyncio.run(crash(db, rest[0], "--knowing" in rest))
    elif mode == "landing":
        asyncio.run(landing(db, rest[0], rest[1], int(rest[2])))
    else:
        journal = rest[rest.index("--journal") + 1] if "--journal" in rest else None
        asyncio.run(converge(db, rest[0], "--until-ready" in rest, "--knowing" in rest, journal))
