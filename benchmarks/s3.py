"""The s3 provider against moto_server, beside a plain aiobotocore program doing the
same work with the same concurrency (the limit a careful hand-written script sets).

Phases, on N buckets each with versioning, tags and default encryption, and 5 small
objects in each:

1. create: apply N Buckets and 5N Objects, run the Runtime until every one is Ready; the
   plain script makes CreateBucket, PutBucketTagging, PutBucketVersioning,
   PutBucketEncryption, then 5 PutObject per bucket.
2. no change: a resync of everything; the plain script reads what it would compare
   (GetBucketTagging, GetBucketVersioning, GetBucketEncryption, and a HeadObject per
   object). Both count their calls: the engine's must all be reads.
3. repair: tags changed out of band on 10% of the buckets, then a resync; the plain
   script reads everything and puts the tags of the changed buckets back.
4. delete: delete every resource and run until they are gone; the plain script makes
   DeleteObject per object, then DeleteBucket.

    python benchmarks/s3.py [--size N] [--workers W] [--rounds R] [--json PATH]
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from s3_server import moto_server, reset  # noqa: E402

from benchmarks.phases import arguments, best_of, report  # noqa: E402
from reconcile import Runtime  # noqa: E402
from reconcile.controller import Priority  # noqa: E402
from reconcile_providers.s3 import S3Provider  # noqa: E402
from reconcile_providers.s3.client import S3Client  # noqa: E402

REGION = "eu-west-1"
TAGS = {"team": "web", "tier": "static"}
OBJECTS = 5
_READS = ("Head", "Get", "List")


class Calls:
    """S3 API calls made, by operation (botocore's before-call event)."""

    def __init__(self) -> None:
        self.count: collections.Counter[str] = collections.Counter()

    def attach(self, client: Any) -> None:
        """Count the calls ``client`` makes."""
        client.meta.events.register("before-call.s3", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.count[model.name] += 1

    def take(self) -> dict[str, int]:
        """The counts since the last take."""
        taken, self.count = dict(self.count), collections.Counter()
        return taken


def writes(calls: Mapping[str, int]) -> int:
    """How many of the calls change something."""
    return sum(n for name, n in calls.items() if not name.startswith(_READS))


def page(index: int, number: int) -> bytes:
    """Object ``number`` of bucket ``index``: a small page."""
    return f"<h1>bucket {index} page {number}</h1>\n".encode()


def object_manifest(index: int, number: int) -> dict[str, Any]:
    """Object ``number`` of bucket ``index``."""
    return {
        "apiVersion": "s3.reconcile.dev/v1",
        "kind": "Object",
        "metadata": {"name": f"bench-{index:05d}-{number}"},
        "spec": {
            "bucket": f"bench-{index:05d}",
            "key": f"page{number}.html",
            "content": page(index, number).decode(),
        },
    }


def manifest(index: int) -> dict[str, Any]:
    """Bucket ``index``."""
    return {
        "apiVersion": "s3.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": f"bench-{index:05d}"},
        "spec": {
            "versioning": "Enabled",
            "tags": TAGS,
            "encryption": {"algorithm": "AES256"},
            "forceDestroy": True,
        },
    }


async def _gather(workers: int, jobs: list[Any]) -> None:
    limit = asyncio.Semaphore(workers)

    async def one(job: Any) -> None:
        async with limit:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


async def plain(url: str, size: int, workers: int) -> dict[str, Any]:
    """The limit: the calls a careful hand-written program makes, ``workers`` at a time."""
    from aiobotocore.config import AioConfig  # noqa: PLC0415
    from aiobotocore.session import get_session  # noqa: PLC0415

    calls = Calls()
    config = AioConfig(s3={"addressing_style": "path"}, max_pool_connections=workers)
    async with get_session().create_client("s3", region_name=REGION, endpoint_url=url, config=config) as s3:
        calls.attach(s3)
        names = [f"plain-{i:05d}" for i in range(size)]
        tag_set = [{"Key": k, "Value": v} for k, v in sorted(TAGS.items())]
        encryption = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}

        def create(name: str) -> Any:
            async def job() -> None:
                await s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
                await s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tag_set})
                await s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
                await s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration=encryption)
                index = int(name.rsplit("-", 1)[1])
                for number in range(OBJECTS):
                    await s3.put_object(
                        Bucket=name,
                        Key=f"page{number}.html",
                        Body=page(index, number),
                        ContentType="text/html",
                    )

            return job

        def check(name: str, repair: bool) -> Any:
            async def job() -> None:
                # (GetBucketTagging says whether the bucket exists too: no HeadBucket.)
                found = (await s3.get_bucket_tagging(Bucket=name))["TagSet"]
                await s3.get_bucket_versioning(Bucket=name)
                await s3.get_bucket_encryption(Bucket=name)
                for number in range(OBJECTS):
                    await s3.head_object(Bucket=name, Key=f"page{number}.html")
                if repair and found != tag_set:
                    await s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tag_set})

            return job

        def delete(name: str) -> Any:
            async def job() -> None:
                for number in range(OBJECTS):
                    await s3.delete_object(Bucket=name, Key=f"page{number}.html")
                # Versioned: the versions and delete markers go too, as force_destroy does.
                listed = await s3.list_object_versions(Bucket=name)
                keys = [
                    {"Key": v["Key"], "VersionId": v["VersionId"]}
                    for v in (*listed.get("Versions", ()), *listed.get("DeleteMarkers", ()))
                ]
                if keys:
                    await s3.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
                await s3.delete_bucket(Bucket=name)

            return job

        result: dict[str, Any] = {}
        started = time.perf_counter()
        await _gather(workers, [create(n) for n in names])
        result["create_s"], result["create_calls"] = time.perf_counter() - started, calls.take()
        started = time.perf_counter()
        await _gather(workers, [check(n, repair=False) for n in names])
        result["noop_s"], result["noop_calls"] = time.perf_counter() - started, calls.take()
        changed = names[:: max(1, size // max(1, size // 10))][: max(1, size // 10)]
        for name in changed:
            await s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": "team", "Value": "ops"}]})
        calls.take()
        started = time.perf_counter()
        await _gather(workers, [check(n, repair=True) for n in names])
        result["repair_s"], result["repair_calls"] = time.perf_counter() - started, calls.take()
        started = time.perf_counter()
        await _gather(workers, [delete(n) for n in names])
        result["delete_s"], result["delete_calls"] = time.perf_counter() - started, calls.take()
    return result


class CountingS3Client(S3Client):
    """The provider's client, its calls counted."""

    calls = Calls()

    async def _client(self, region: str | None) -> Any:
        fresh = region not in self._clients if region else not self._clients
        client = await super()._client(region)
        if fresh:
            self.calls.attach(client)
        return client


class CountingProvider(S3Provider):
    """The s3 provider with counted calls."""

    async def connect(self, config: Mapping[str, Any]) -> Any:
        """A counting client."""
        return CountingS3Client(config)


async def ours(url: str, size: int, workers: int, db: Path) -> dict[str, Any]:
    """The engine: apply, converge, resync, repair, delete."""
    calls = CountingS3Client.calls
    calls.take()
    config = {"s3": {"endpoint_url": url, "addressing_style": "path", "max_pool_connections": workers}}
    runtime = Runtime(
        db,
        providers=[CountingProvider()],
        provider_config=config,
        workers=workers,
        resync_period=None,
        poll_interval=3600,
    )
    result: dict[str, Any] = {}
    async with runtime:
        await runtime.wait_synced()
        started = time.perf_counter()
        objects = [object_manifest(i, n) for i in range(size) for n in range(OBJECTS)]
        await runtime.apply_many([manifest(i) for i in range(size)] + objects)
        state = await runtime.wait_converged(timeout=600)
        assert state.converged, state.waiting[:3]
        result["create_s"], result["create_calls"] = time.perf_counter() - started, calls.take()
        controller = runtime.controllers["bucket.s3.reconcile.dev"]
        object_controller = runtime.controllers["object.s3.reconcile.dev"]

        async def resync() -> None:
            for each in (controller, object_controller):
                each.enqueue_many(each.informer.cached_keys(), Priority.RESYNC)
            await runtime.wait_converged(timeout=600)

        started = time.perf_counter()
        await resync()
        result["noop_s"], result["noop_calls"] = time.perf_counter() - started, calls.take()
        await _tamper(url, size)
        calls.take()
        started = time.perf_counter()
        await resync()
        result["repair_s"], result["repair_calls"] = time.perf_counter() - started, calls.take()
        started = time.perf_counter()
        # Objects first, then their buckets (a bucket holding objects is not deleted).
        names = [obj.metadata.name for obj in object_controller.informer.list()]
        await asyncio.gather(*(runtime.delete("object", name) for name in names))
        while object_controller.informer.cached_keys():  # the harness polling its own cache
            await asyncio.sleep(0.01)
        names = [obj.metadata.name for obj in controller.informer.list()]
        await asyncio.gather(*(runtime.delete("bucket", name) for name in names))
        while controller.informer.cached_keys():  # the harness polling its own cache
            await asyncio.sleep(0.01)
        result["delete_s"], result["delete_calls"] = time.perf_counter() - started, calls.take()
    return result


async def _tamper(url: str, size: int) -> None:
    """Change the tags of 10% of the engine's buckets by hand (the owner tag kept)."""
    from aiobotocore.session import get_session  # noqa: PLC0415

    async with get_session().create_client("s3", region_name=REGION, endpoint_url=url) as s3:
        for index in range(0, size, 10):
            name = f"bench-{index:05d}"
            tags = {t["Key"]: t["Value"] for t in (await s3.get_bucket_tagging(Bucket=name))["TagSet"]}
            tags["team"] = "ops"
            await s3.put_bucket_tagging(
                Bucket=name, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
            )


def main() -> None:
    """Run both, print the table, write the JSON."""
    args = arguments(__doc__, 50, "buckets")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    phases = ("create", "noop", "repair", "delete")
    limits: list[dict[str, Any]] = []
    engines: list[dict[str, Any]] = []
    with moto_server() as url, tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):  # taking turns, each from an empty server
            limits.append(asyncio.run(plain(url, args.size, args.workers)))
            reset(url)
            engines.append(
                asyncio.run(ours(url, args.size, args.workers, Path(folder) / f"state{round_}.db"))
            )
            reset(url)
    report(
        "s3",
        best_of(limits, phases),
        best_of(engines, phases),
        phases,
        columns=("plain calls", "our calls", "our writes"),
        cells=lambda row: (
            f"{sum(row['plain_calls'].values())}",
            f"{sum(row['our_calls'].values())}",
            f"{row['our_writes']}",
        ),
        extra=lambda calls: {"our_writes": writes(calls)},
        settings={"size": args.size, "workers": args.workers, "rounds": args.rounds},
        json_path=args.json,
    )


if __name__ == "__main__":
    main()
