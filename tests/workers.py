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

from reconcile import Bookmark, Event, EventType, ExternalClient, Runtime, connect
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


async def converge(db: str, cloud_path: str, until_ready: bool, knowing: bool) -> None:
    """Reconcile buckets against a file-backed cloud."""
    cloud = MemoryCloud(path=cloud_path)
    provider = MemoryProvider(cloud, knowing=knowing)
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
    else:
        asyncio.run(converge(db, rest[0], "--until-ready" in rest, "--knowing" in rest))
