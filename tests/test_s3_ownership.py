"""Never touch what is not ours, even when somebody replaces it (against moto_server).

S3 drops every tag and metadata when a bucket is made again or an object is put again,
so somebody else's replacement of ours is unmarked: it is ours only when its identity
(a bucket's creation date, an object's ETag and version) is the one our own last create
or update recorded. These are the takeover scenarios a hostile pass found, exactly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from test_files_provider import until_async

# ruff: noqa: F811 - the fixtures imported from test_s3 are requested by name
from test_s3 import (  # noqa: F401 - fixtures, used by name
    _cli,
    _ready,
    _synced_says,
    bucket,
    raw,
    running,
    s3,
    s3_object,
    s3_url,
    tags_of,
)

from reconcile import Runtime
from reconcile.annotations import ANNOTATION_CREATE_PENDING, ANNOTATION_EXTERNAL_IDENTITY
from reconcile.testing import FakeClock

REGION = {"LocationConstraint": "eu-west-1"}


async def next_second() -> None:
    """Wait into the next second of the clock S3 dates bucket creations by (to the
    second): two buckets of one name made in one second cannot be told apart."""
    await asyncio.sleep(1.01 - time.time() % 1)


async def body_of(raw: Any, name: str, key: str) -> bytes:
    """An object's bytes, as S3 has them."""
    body: bytes = await (await raw.get_object(Bucket=name, Key=key))["Body"].read()
    return body


def types_of(history: list[Any]) -> list[str]:
    """The event types of a history, in order."""
    return [event.type for event in history]


class TestReplacedBuckets:
    """A bucket of ours deleted and made again by somebody else is theirs."""

    def test_delete_leaves_their_recreated_bucket_and_objects(self, s3: str, tmp_path: Path) -> None:
        """Through the CLI, exactly as found: our bucket (forceDestroy) deleted and made
        again out of band with three objects in it; ``delete bucket X`` then ``run
        --once``: DeleteSkipped, their bucket and all three objects stay."""
        import boto3  # noqa: PLC0415

        config = tmp_path / "providers.yaml"
        config.write_text(f"s3: {{endpoint_url: '{s3}', addressing_style: path}}\n")
        manifest = tmp_path / "bucket.yaml"
        manifest.write_text(
            "apiVersion: s3.reconcile.dev/v1\nkind: Bucket\nmetadata: {name: shared-name}\n"
            "spec: {forceDestroy: true}\n"
        )
        db = tmp_path / "state.db"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                _cli(db, config, *args), env=env, capture_output=True, text=True, check=False
            )

        assert cli("apply", "-f", str(manifest)).returncode == 0
        first = cli("run", "--once", "--timeout", "60")
        assert first.returncode == 0, first.stderr
        client = boto3.client("s3", region_name="eu-west-1", endpoint_url=s3)
        try:
            client.delete_bucket(Bucket="shared-name")
            asyncio.run(next_second())
            client.create_bucket(Bucket="shared-name", CreateBucketConfiguration=REGION)
            for key in ("a.txt", "b.txt", "c.txt"):
                client.put_object(Bucket="shared-name", Key=key, Body=b"theirs")
            deleted = cli("delete", "bucket", "shared-name")
            assert deleted.returncode == 0, deleted.stderr
            second = cli("run", "--once", "--timeout", "60")
            assert "Traceback" not in second.stderr
            listed = client.list_objects_v2(Bucket="shared-name").get("Contents", [])
            assert sorted(item["Key"] for item in listed) == ["a.txt", "b.txt", "c.txt"]
        finally:
            client.close()
        history = cli("history", "bucket", "shared-name")
        assert "DeleteSucceeded" not in history.stdout, history.stdout
        assert "DeleteSkipped" in history.stdout, history.stdout

    async def test_a_recreated_bucket_is_not_ours_even_with_our_tags(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """Made again by somebody else with our tag set copied onto it (some S3-compatible
        servers keep a deleted bucket's tags): its creation date says it is not the one
        we made: NotOwned, its tags untouched."""
        await running.apply(bucket("copied-tags", tags={"team": "web"}))
        await until_async(clock, _ready(running, "bucket", "copied-tags"))
        tags = await tags_of(raw, "copied-tags")
        await raw.delete_bucket(Bucket="copied-tags")
        await next_second()
        await raw.create_bucket(Bucket="copied-tags", CreateBucketConfiguration=REGION)
        theirs = {**tags, "team": "theirs"}
        tag_set = [{"Key": k, "Value": v} for k, v in theirs.items()]
        await raw.put_bucket_tagging(Bucket="copied-tags", Tagging={"TagSet": tag_set})
        clock.advance(70)
        await until_async(clock, _synced_says(running, "bucket", "copied-tags", "not created by this object"))
        assert await tags_of(raw, "copied-tags") == theirs
        history = types_of(await running.client.history("bucket", "copied-tags"))
        assert "DriftDetected" not in history

    async def test_our_bucket_with_its_tag_removed_by_hand_is_still_ours(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """The very bucket we made (same creation date), its owner tag removed by hand:
        ours by the identity recorded at create; its tags are put back."""
        await running.apply(bucket("untagged", tags={"team": "web"}))
        await until_async(clock, _ready(running, "bucket", "untagged"))
        obj = await running.client.get("bucket", "untagged")
        assert obj.metadata.annotations[ANNOTATION_EXTERNAL_IDENTITY]
        await raw.delete_bucket_tagging(Bucket="untagged")

        async def tagged_again() -> bool:
            return (await tags_of(raw, "untagged")).get("reconcile.dev/owner") == obj.metadata.uid

        clock.advance(70)
        await until_async(clock, tagged_again)


class TestReplacedObjects:
    """An object of ours put again by somebody else is theirs."""

    async def _ours(self, running: Runtime, clock: FakeClock, name: str, **bucket_spec: Any) -> None:
        await running.apply(bucket(name, **bucket_spec))
        await until_async(clock, _ready(running, "bucket", name))
        await running.apply(s3_object("page", name, "index.html", content="<h1>ours</h1>\n"))
        await until_async(clock, _ready(running, "object", "page"))

    async def test_a_poll_never_overwrites_their_object(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """Our object put again by somebody else: the next poll says NotOwned (no
        DriftDetected, no upload) and their bytes stay, in an unversioned bucket too."""
        await self._ours(running, clock, "reput-site")
        await raw.put_object(Bucket="reput-site", Key="index.html", Body=b"their data")
        clock.advance(70)
        await until_async(clock, _synced_says(running, "object", "page", "not created by this object"))
        assert await body_of(raw, "reput-site", "index.html") == b"their data"
        history = types_of(await running.client.history("object", "page"))
        assert "DriftDetected" not in history
        assert history.count("UpdateRequested") == 0

    async def test_delete_never_deletes_their_object(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """Deleting our object after somebody else put theirs at its key: the conditional
        DELETE on our ETag fails (412), the look that follows does not prove the new one
        ours: DeleteSkipped, their object stays."""
        await self._ours(running, clock, "replaced-site")
        await raw.put_object(Bucket="replaced-site", Key="index.html", Body=b"their data")
        await running.client.delete("object", "page")

        async def gone() -> bool:
            return not [o for o in (await running.client.list("object")).items if o.metadata.name == "page"]

        await until_async(clock, gone)
        assert await body_of(raw, "replaced-site", "index.html") == b"their data"
        history = types_of(await running.client.history("object", "page"))
        assert "DeleteSkipped" in history
        assert "DeleteSucceeded" not in history

    async def test_versioned_replacement_is_not_ours(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """In a versioned bucket, somebody else's version of the same bytes is still not
        ours (the version id differs): NotOwned, nothing written."""
        await self._ours(running, clock, "versioned-site", versioning="Enabled")
        await raw.put_object(Bucket="versioned-site", Key="index.html", Body=b"<h1>ours</h1>\n")
        versions = await raw.list_object_versions(Bucket="versioned-site")
        clock.advance(70)
        await until_async(clock, _synced_says(running, "object", "page", "not created by this object"))
        assert len((await raw.list_object_versions(Bucket="versioned-site"))["Versions"]) == len(
            versions["Versions"]
        )

    async def test_our_object_with_its_mark_removed_by_hand_is_still_ours(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """The very object we wrote (same ETag), its metadata replaced in place by hand:
        ours by the identity recorded at its upload; the mark is put back."""
        await self._ours(running, clock, "copied-site")
        await raw.copy_object(
            Bucket="copied-site",
            Key="index.html",
            CopySource={"Bucket": "copied-site", "Key": "index.html"},
            Metadata={},
            MetadataDirective="REPLACE",
            ContentType="text/html",
        )
        obj = await running.client.get("object", "page")

        async def marked_again() -> bool:
            head = await raw.head_object(Bucket="copied-site", Key="index.html")
            return (head.get("Metadata") or {}).get("reconcile-owner") == obj.metadata.uid

        clock.advance(70)
        await until_async(clock, marked_again)


class TestTheirsBeforeUs:
    """A bucket that somebody else made before the object was applied."""

    async def test_a_refused_create_is_recorded_as_failed(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """The create the engine requested is refused (the bucket exists, not ours):
        NotOwned, and the history answers its CreateRequested with CreateFailed (it showed
        a create requested and never answered, for a bucket never created), never
        CreateSucceeded."""
        await raw.create_bucket(Bucket="theirs-first", CreateBucketConfiguration=REGION)
        await running.apply(bucket("theirs-first"))
        await until_async(
            clock, _synced_says(running, "bucket", "theirs-first", "not created by this object")
        )
        history = await running.client.history("bucket", "theirs-first")
        taken = {"CreateRequested", "CreateSucceeded", "CreateFailed", "NotOwned"}
        actions = [t for t in types_of(history) if t in taken]
        assert actions == ["CreateRequested", "CreateFailed", "NotOwned"], types_of(history)
        assert "refused" in next(e.data["message"] for e in history if e.type == "CreateFailed" and e.data)
        obj = await running.client.get("bucket", "theirs-first")
        assert ANNOTATION_CREATE_PENDING not in obj.metadata.annotations


class TestAdoptingObjects:
    """``reconcile adopt object/NAME`` takes over the object, and only the object."""

    async def test_adopt_marks_the_object_not_its_bucket(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """An object somebody else put, adopted: the object carries our mark, then our
        bytes; the bucket's tags are untouched (adopt tagged the bucket with the object's
        uid, which made the bucket's own resource NotOwned)."""
        await running.apply(bucket("adopt-site"))
        await until_async(clock, _ready(running, "bucket", "adopt-site"))
        bucket_tags = await tags_of(raw, "adopt-site")
        await raw.put_object(Bucket="adopt-site", Key="legacy.html", Body=b"old", ContentType="text/html")
        manifest = s3_object("legacy", "adopt-site", "legacy.html", content="<p>new</p>\n")
        manifest["metadata"]["annotations"] = {"reconcile.dev/adopt": "true"}
        await running.apply(manifest)
        await until_async(clock, _ready(running, "object", "legacy"))
        obj = await running.client.get("object", "legacy")
        head = await raw.head_object(Bucket="adopt-site", Key="legacy.html")
        assert head["Metadata"]["reconcile-owner"] == obj.metadata.uid
        assert await body_of(raw, "adopt-site", "legacy.html") == b"<p>new</p>\n"
        assert await tags_of(raw, "adopt-site") == bucket_tags
        history = types_of(await running.client.history("object", "legacy"))
        assert "Adopted" in history
        bucket_obj = await running.client.get("bucket", "adopt-site")
        synced = bucket_obj.status.condition("Synced")
        assert synced is not None
        assert synced.reason != "NotOwned"
