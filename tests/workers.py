"""Processes the multi-process tests start: ``python tests/workers.py MODE DB [ARGS]``.

* ``stream DB`` -- apply widgets forever, 16 at a time, printing ``ack NAME`` after each
  write is acknowledged (durable), until killed.
* ``share DB PREFIX COUNT TOTAL`` -- watch the log from 0 while applying COUNT widgets
  named PREFIX-N, then wait until the watch has seen TOTAL creations (its own and
  another process's) and print ``saw TOTAL``.
* ``converge DB CLOUD`` -- run the Runtime over a file-backed MemoryCloud, printing
  ``created`` for each CreateSucceeded, until killed; ``converge DB CLOUD --until-ready``
  exits 0 (printing ``ready N``) once every Bucket is Ready.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from helpers import widget

from reconcile import Bookmark, Event, EventType, Runtime, connect
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


async def converge(db: str, cloud_path: str, until_ready: bool) -> None:
    """Reconcile buckets against a file-backed cloud."""
    cloud = MemoryCloud(path=cloud_path)
    async with Runtime(db, providers=[MemoryProvider(cloud)], poll_interval=3600) as runtime:
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


if __name__ == "__main__":
    mode, db, *rest = sys.argv[1:]
    if mode == "stream":
        asyncio.run(stream(db))
    elif mode == "share":
        asyncio.run(share(db, rest[0], int(rest[1]), int(rest[2])))
    else:
        asyncio.run(converge(db, rest[0], "--until-ready" in rest))
