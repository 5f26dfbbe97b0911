"""The s3 provider against a real S3 server (moto_server, spoken to through aiobotocore
with ``endpoint_url``, exactly as real S3): buckets created with their settings, drift
repaired, what is not ours left alone, deletion with and without ``forceDestroy``,
bad input refused at admission, and no credential anywhere it should not be."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import run_benchmark
from s3_server import moto_server, reset
from test_files_provider import until, until_async

from reconcile import InvalidError, KindRegistry, NotFoundError, ObjectKey, Resource, Runtime, connect
from reconcile.testing import FakeClock
from reconcile.testing.conformance import CHECKS, Harness
from reconcile_providers.s3 import BUCKET, S3Provider
from reconcile_providers.s3.objects import OWNER_METADATA

SECRET = "s3cr3t-never-in-the-log-9f2c"  # noqa: S105 - a fake key, to grep for
DEADLINE = 30.0


@pytest.fixture(scope="session")
def s3_url() -> Iterator[str]:
    """One moto_server for the session."""
    with moto_server() as url:
        yield url


@pytest.fixture
def s3(s3_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A clean server and the AWS chain's variables pointing at test credentials."""
    reset(s3_url)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    return s3_url


def bucket(name: str, **spec: Any) -> dict[str, Any]:
    """A Bucket manifest."""
    return {"apiVersion": BUCKET.api_version, "kind": "Bucket", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
async def raw(s3: str) -> AsyncIterator[Any]:
    """A plain aiobotocore client: what a person with the AWS CLI would do by hand."""
    from aiobotocore.session import get_session  # noqa: PLC0415

    async with get_session().create_client("s3", region_name="eu-west-1", endpoint_url=s3) as client:
        yield client


@pytest.fixture
async def running(s3: str, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Runtime]:
    """A Runtime with the s3 provider on the moto endpoint, on the fake clock."""
    runtime = Runtime(
        tmp_path / "state.db",
        providers=[S3Provider()],
        provider_config={"s3": {"endpoint_url": s3, "addressing_style": "path"}},
        clock=clock,
        wall_clock=clock,
        poll_interval=60,
        resync_period=None,
        # The tests advance the fake clock while real requests are in flight: a deadline on
        # it would cut a slow answer short after a few real milliseconds.
        provider_timeout=None,
    )
    async with runtime:
        await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
        yield runtime


async def tags_of(raw: Any, name: str) -> dict[str, str]:
    """A bucket's tags, as S3 has them (none: S3 answers NoSuchTagSet)."""
    from botocore.exceptions import ClientError  # noqa: PLC0415

    try:
        answer = await raw.get_bucket_tagging(Bucket=name)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchTagSet":
            return {}
        raise
    return {t["Key"]: t["Value"] for t in answer["TagSet"]}


class TestAdmission:
    """Bad input: refused with the field path, nothing stored (no server needed)."""

    @pytest.mark.parametrize(
        ("manifest", "message"),
        [
            (bucket("ab"), "spec.bucket: metadata.name as a bucket name must be 3 to 63"),
            (bucket("b", bucket="x" * 64), "spec.bucket: must be 3 to 63 characters"),
            (bucket("b", bucket="My_Bucket"), "spec.bucket: may hold only lowercase letters"),
            (bucket("b", bucket="-bucket"), "spec.bucket: must begin and end with a letter or a digit"),
            (bucket("b", bucket="my..bucket"), 'spec.bucket: must not hold two dots in a row ("..")'),
            (bucket("b", bucket="192.168.5.4"), "spec.bucket: must not be formatted as an IP address"),
            (bucket("b", bucket="01.2.3.4"), "spec.bucket: must not be formatted as an IP address"),
            (bucket("b", bucket="999.999.999.999"), "spec.bucket: must not be formatted as an IP address"),
            (bucket("b", bucket="xn--bucket"), 'spec.bucket: must not begin with "xn--"'),
            (bucket("b", bucket="sthree-bucket"), 'spec.bucket: must not begin with "sthree-"'),
            (bucket("b", bucket="sthree-configurator"), 'spec.bucket: must not begin with "sthree-"'),
            (bucket("b", bucket="amzn-s3-demo-x"), 'spec.bucket: must not begin with "amzn-s3-demo-"'),
            (bucket("b", bucket="bucket-s3alias"), 'spec.bucket: must not end with "-s3alias"'),
            (bucket("b", bucket="bucket--ol-s3"), 'spec.bucket: must not end with "--ol-s3"'),
            (bucket("b", bucket="bucket.mrap"), 'spec.bucket: must not end with ".mrap"'),
            (bucket("b", bucket="bucket--x-s3"), 'spec.bucket: must not end with "--x-s3"'),
            (bucket("b", bucket="bucket--table-s3"), 'spec.bucket: must not end with "--table-s3"'),
            (bucket("bkt", region="mars"), "spec.region: 'mars' is not a region name"),
            (bucket("bkt", versioning="Disabled"), "spec.versioning: must be one of Enabled, Suspended"),
            (bucket("bkt", tags={f"k{i}": "v" for i in range(50)}), "spec.tags: at most 49 tags"),
            (bucket("bkt", tags={"k" * 129: "v"}), "a tag key is 1 to 128 characters"),
            (bucket("bkt", tags={"k": "v" * 257}), "a tag value is at most 256 characters"),
            (bucket("bkt", tags={"reconcile.dev/owner": "x"}), "is reserved"),
            (
                bucket("bkt", encryption={"algorithm": "DES"}),
                "spec.encryption.algorithm: must be one of AES256",
            ),
            (
                bucket("bkt", encryption={"algorithm": "AES256", "kmsKeyId": "k"}),
                "spec.encryption.kmsKeyId: is for algorithm aws:kms only",
            ),
            (bucket("bkt", encryption={}), "spec.encryption.algorithm: required field missing"),
            (bucket("bkt", publicAccessBlock={"blockPublicAcls": "yes"}), "expected boolean"),
            (bucket("bkt", policy="{}"), "spec.policy: expected a mapping"),
            (bucket("bkt", lifecycleRules=[{"id": "r"}]), "spec.lifecycleRules[0]: a rule needs an action"),
            (
                bucket(
                    "bkt",
                    lifecycleRules=[{"id": "r", "expirationDays": 1}, {"id": "r", "expirationDays": 2}],
                ),
                "spec.lifecycleRules[1].id: duplicate rule id 'r'",
            ),
            (
                bucket("bkt", lifecycleRules=[{"id": "r", "expirationDays": 0}]),
                "spec.lifecycleRules[0].expirationDays: must be >= 1",
            ),
            (
                bucket("bkt", corsRules=[{"allowedMethods": ["FETCH"], "allowedOrigins": ["*"]}]),
                "spec.corsRules[0].allowedMethods: 'FETCH' is not one of",
            ),
            (
                bucket("bkt", corsRules=[{"allowedMethods": ["GET"], "allowedOrigins": []}]),
                "spec.corsRules[0].allowedOrigins: at least one origin",
            ),
            (
                bucket("bkt", policy={"Version": "2012-10-17"}),
                "spec.policy: a policy document needs a Statement",
            ),
        ],
    )
    async def test_refused(self, tmp_path: Path, manifest: dict[str, Any], message: str) -> None:
        """Each rule: InvalidError naming the field, and the log stays empty."""
        async with connect(tmp_path / "a.db", kinds=KindRegistry([BUCKET])) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(manifest)
            assert message in str(caught.value)
            assert await client.revision() == 0

    @pytest.mark.parametrize(
        "name",
        ["1.2.3.4.5", "bucket.1.2.3", "v1.2.3.4x", "sthree", "bucket-table-s3", "my-s3alias-logs"],
    )
    def test_names_near_a_rule_are_accepted(self, name: str) -> None:
        """A name that only looks like a reserved one (five numbers, one hyphen short) is valid."""
        from reconcile_providers.s3.naming import bucket_name_errors  # noqa: PLC0415

        assert bucket_name_errors(name) == []

    async def test_name_and_region_default_and_are_immutable(self, tmp_path: Path) -> None:
        """bucket defaults to metadata.name, region to the config's; neither may change."""
        registry = KindRegistry()
        registry.register(BUCKET, provider="s3")
        config = {"s3": {"region": "eu-central-1"}}
        async with connect(tmp_path / "b.db", kinds=registry, provider_config=config) as client:
            created = await client.apply(bucket("photos"))
            assert (created.spec.bucket, created.spec.region) == ("photos", "eu-central-1")
            with pytest.raises(InvalidError, match=r"spec\.region: is immutable"):
                await client.apply(bucket("photos", region="eu-west-1"))

    def test_credentials_in_the_provider_config_are_refused(self) -> None:
        """A secret in a shared config file is an error naming the key, not echoing it."""
        from reconcile_providers.s3.config import S3Config  # noqa: PLC0415

        with pytest.raises(InvalidError) as caught:
            S3Config.from_mapping({"aws_secret_access_key": SECRET, "colour": "red"})
        text = str(caught.value)
        assert "s3.aws_secret_access_key: credentials do not go in the provider config" in text
        assert "s3.colour: unknown setting" in text
        assert SECRET not in text


class TestConverging:
    """Against moto_server."""

    async def test_create_with_settings(self, running: Runtime, raw: Any) -> None:
        """A versioned, tagged bucket is created with the owner tag and becomes Ready."""
        await running.apply(bucket("site-assets", versioning="Enabled", tags={"team": "web"}))
        ready = await asyncio.wait_for(running.wait_ready("bucket", "site-assets"), DEADLINE)
        assert (await raw.get_bucket_versioning(Bucket="site-assets"))["Status"] == "Enabled"
        assert await tags_of(raw, "site-assets") == {"team": "web", "reconcile.dev/owner": ready.metadata.uid}
        assert ready.status.at_provider["arn"] == "arn:aws:s3:::site-assets"
        assert ready.status.at_provider["region"] == "eu-west-1"

    async def test_encryption_and_public_access_block(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """Declared encryption and public-access switches are set at create, reported in
        status, and put back when changed by hand."""
        await running.apply(
            bucket(
                "locked",
                encryption={"algorithm": "AES256", "bucketKey": True},
                publicAccessBlock={"blockPublicAcls": True, "restrictPublicBuckets": False},
            )
        )
        ready = await asyncio.wait_for(running.wait_ready("bucket", "locked"), DEADLINE)
        rule = (await raw.get_bucket_encryption(Bucket="locked"))["ServerSideEncryptionConfiguration"][
            "Rules"
        ][0]
        assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
        block = (await raw.get_public_access_block(Bucket="locked"))["PublicAccessBlockConfiguration"]
        assert (block["BlockPublicAcls"], block["RestrictPublicBuckets"]) == (True, False)
        assert ready.status.at_provider["publicAccessBlock"]["restrictPublicBuckets"] is False
        assert ready.status.at_provider["encryption"]["bucketKey"] is True
        await raw.put_public_access_block(
            Bucket="locked",
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": False,
                "IgnorePublicAcls": False,
                "BlockPublicPolicy": False,
                "RestrictPublicBuckets": False,
            },
        )

        async def repaired() -> bool:
            found = (await raw.get_public_access_block(Bucket="locked"))["PublicAccessBlockConfiguration"]
            history = await running.client.history("bucket", "locked")
            # Set back, and the repair recorded (with its outcome, after it).
            return bool(found["BlockPublicAcls"]) and any(e.type == "UpdateSucceeded" for e in history)

        clock.advance(70)
        await until_async(clock, repaired)
        drift = [e for e in await running.client.history("bucket", "locked") if e.type == "DriftDetected"]
        assert "publicAccessBlock" in drift[-1].data["message"]

    async def test_policy_is_compared_by_meaning(self, running: Runtime, raw: Any, clock: FakeClock) -> None:
        """A policy S3 returns reordered, with one-element lists as values, is no drift;
        one replaced by hand is put back."""
        statement = {
            "Sid": "Read",
            "Effect": "Allow",
            "Principal": "*",
            "Action": ["s3:GetObject"],
            "Resource": ["arn:aws:s3:::public-site/*"],
        }
        policy = {"Version": "2012-10-17", "Statement": [statement]}
        await running.apply(bucket("public-site", policy=policy))
        await asyncio.wait_for(running.wait_ready("bucket", "public-site"), DEADLINE)
        respelled = {
            "Statement": {**statement, "Action": "s3:GetObject", "Resource": "arn:aws:s3:::public-site/*"},
            "Version": "2012-10-17",
        }
        await raw.put_bucket_policy(Bucket="public-site", Policy=json.dumps(respelled))
        polls: list[str] = []
        running.controllers["bucket.s3.reconcile.dev"].add_listener(
            lambda key, _outcome: polls.append(key.name)
        )
        clock.advance(70)
        await until(clock, lambda: "public-site" in polls)  # the poll after the respelling
        history = await running.client.history("bucket", "public-site")
        assert not [e for e in history if e.type == "DriftDetected"]
        assert json.loads((await raw.get_bucket_policy(Bucket="public-site"))["Policy"]) == respelled
        other = {"Version": "2012-10-17", "Statement": [{**statement, "Effect": "Deny"}]}
        await raw.put_bucket_policy(Bucket="public-site", Policy=json.dumps(other))

        async def restored() -> bool:
            found = json.loads((await raw.get_bucket_policy(Bucket="public-site"))["Policy"])
            return bool(found["Statement"][0]["Effect"] == "Allow")

        clock.advance(70)
        await until_async(clock, restored)

    async def test_lifecycle_and_cors_rules(self, running: Runtime, raw: Any, clock: FakeClock) -> None:
        """Lifecycle and CORS rules are set, read back as no drift, repaired when removed
        by hand, and removed when the spec declares [] for them."""
        rules = [
            {"id": "logs", "prefix": "logs/", "expirationDays": 30},
            {"id": "old", "tags": {"tier": "cold"}, "noncurrentExpirationDays": 7},
            {"id": "uploads", "abortIncompleteUploadDays": 2, "enabled": False},
        ]
        cors = [
            {
                "allowedMethods": ["GET", "HEAD"],
                "allowedOrigins": ["https://example.test"],
                "maxAgeSeconds": 600,
            }
        ]
        await running.apply(bucket("ruled", versioning="Enabled", lifecycleRules=rules, corsRules=cors))
        ready = await asyncio.wait_for(running.wait_ready("bucket", "ruled"), DEADLINE)
        # (status.atProvider is spelled as the document is.)
        assert ready.status.at_provider["lifecycleRules"][0]["expirationDays"] == 30
        assert ready.status.at_provider["corsRules"][0]["maxAgeSeconds"] == 600
        found = (await raw.get_bucket_lifecycle_configuration(Bucket="ruled"))["Rules"]
        assert sorted(r["ID"] for r in found) == ["logs", "old", "uploads"]
        assert (await raw.get_bucket_cors(Bucket="ruled"))["CORSRules"][0]["MaxAgeSeconds"] == 600
        polls: list[str] = []
        running.controllers["bucket.s3.reconcile.dev"].add_listener(
            lambda key, _outcome: polls.append(key.name)
        )
        clock.advance(70)
        await until(clock, lambda: "ruled" in polls)
        history = await running.client.history("bucket", "ruled")
        assert not [e for e in history if e.type == "DriftDetected"], "S3's own spelling is no drift"
        await raw.delete_bucket_lifecycle(Bucket="ruled")
        await raw.delete_bucket_cors(Bucket="ruled")

        async def restored() -> bool:
            try:
                await raw.get_bucket_cors(Bucket="ruled")
                rules_now = (await raw.get_bucket_lifecycle_configuration(Bucket="ruled"))["Rules"]
            except Exception:  # noqa: BLE001 - not there yet
                return False
            return len(rules_now) == 3

        clock.advance(70)
        await until_async(clock, restored)
        await running.client.patch("bucket", "ruled", {"spec": {"lifecycleRules": [], "corsRules": []}})

        async def removed() -> bool:
            try:
                await raw.get_bucket_cors(Bucket="ruled")
            except Exception:  # noqa: BLE001 - NoSuchCORSConfiguration: removed
                return True
            return False

        await until_async(clock, removed)

    async def test_drift_is_repaired_and_recorded(self, running: Runtime, raw: Any, clock: FakeClock) -> None:
        """Tags and versioning changed by hand: the next poll puts them back and records
        DriftDetected with what differed."""
        await running.apply(bucket("drifting", versioning="Enabled", tags={"team": "web"}))
        obj = await asyncio.wait_for(running.wait_ready("bucket", "drifting"), DEADLINE)
        owner = {"reconcile.dev/owner": obj.metadata.uid}
        await raw.put_bucket_tagging(
            Bucket="drifting", Tagging={"TagSet": [{"Key": "team", "Value": "ops"}, *_tag_set(owner)]}
        )
        await raw.put_bucket_versioning(Bucket="drifting", VersioningConfiguration={"Status": "Suspended"})

        async def repaired() -> bool:
            history = await running.client.history("bucket", "drifting")
            return any(e.type == "DriftDetected" for e in history) and await tags_of(raw, "drifting") == {
                "team": "web",
                **owner,
            }

        clock.advance(70)
        await until_async(clock, repaired)
        drift = [e for e in await running.client.history("bucket", "drifting") if e.type == "DriftDetected"]
        assert "team='ops' -> 'web'" in drift[-1].data["message"]
        assert "versioning: Suspended -> Enabled" in drift[-1].data["message"]
        assert (await raw.get_bucket_versioning(Bucket="drifting"))["Status"] == "Enabled"

    async def test_a_bucket_not_ours_is_left_alone(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """A bucket that exists and carries no owner tag of ours: NotOwned in status, its
        tags and objects untouched, and deleting the resource leaves it."""
        await raw.create_bucket(
            Bucket="theirs", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        await raw.put_bucket_tagging(Bucket="theirs", Tagging={"TagSet": [{"Key": "owner", "Value": "them"}]})
        await raw.put_object(Bucket="theirs", Key="keep.txt", Body=b"theirs")
        await running.apply(bucket("theirs", tags={"team": "web"}))

        async def refused() -> bool:
            obj = await running.client.get("bucket", "theirs")
            synced = obj.status.condition("Synced")
            return synced is not None and synced.reason == "NotOwned"

        await until_async(clock, refused)
        await running.client.delete("bucket", "theirs")

        async def gone() -> bool:
            try:
                await running.client.get("bucket", "theirs")
            except NotFoundError:
                return True
            return False

        await until_async(clock, gone)
        assert await tags_of(raw, "theirs") == {"owner": "them"}
        assert await (await raw.get_object(Bucket="theirs", Key="keep.txt"))["Body"].read() == b"theirs"

    async def test_a_bucket_not_ours_in_us_east_1_is_left_alone(
        self, running: Runtime, s3: str, clock: FakeClock
    ) -> None:
        """us-east-1 answers a CreateBucket of a bucket the account owns with 200, not
        BucketAlreadyOwnedByYou: the create, made without observing first, looks before it
        creates there, so an untagged bucket of the same account is NotOwned, its tags
        untouched."""
        from aiobotocore.session import get_session  # noqa: PLC0415

        async with get_session().create_client("s3", region_name="us-east-1", endpoint_url=s3) as east:
            await east.create_bucket(Bucket="east-theirs")
            await running.apply(bucket("east-theirs", region="us-east-1", tags={"team": "web"}))

            async def refused() -> bool:
                obj = await running.client.get("bucket", "east-theirs")
                synced = obj.status.condition("Synced")
                return synced is not None and synced.reason == "NotOwned"

            await until_async(clock, refused)
            assert await tags_of(east, "east-theirs") == {}
            history = [e.type for e in await running.client.history("bucket", "east-theirs")]
            assert "CreateSucceeded" not in history

    async def test_an_interrupted_create_is_told_from_somebody_elses_bucket(
        self, running: Runtime, raw: Any, s3: str
    ) -> None:
        """An untagged bucket is ours only when our create-pending marker was written
        before S3 created it (the crash came between CreateBucket and its tags); one made
        before the marker is somebody else's, whatever the marker says."""
        import datetime  # noqa: PLC0415

        def at(moment: datetime.datetime) -> str:
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

        before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=5)
        for name in ("ours-cut-short", "theirs-older"):
            await raw.create_bucket(
                Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
            )
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=5)
        client = S3Provider()
        external = await client.connect({"endpoint_url": s3, "addressing_style": "path"})
        try:
            for name, pending, whose in (("ours-cut-short", before, "ours"), ("theirs-older", later, None)):
                manifest = bucket(name)
                manifest["metadata"]["annotations"] = {
                    "reconcile.dev/paused": "true",
                    "reconcile.dev/external-create-pending": at(pending),
                }
                obj = await running.apply(manifest)
                observation = await external.observe(obj)
                assert observation.owner == (obj.metadata.uid if whose else None), name
        finally:
            await external.close()

    async def test_adopting_a_bucket_on_request(self, running: Runtime, raw: Any, clock: FakeClock) -> None:
        """With the adopt annotation, an existing bucket gets our owner tag, Adopted is
        recorded, and the next reconcile brings it to the spec; its objects stay."""
        await raw.create_bucket(
            Bucket="legacy", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        await raw.put_object(Bucket="legacy", Key="keep.txt", Body=b"old")
        manifest = bucket("legacy", tags={"team": "web"})
        manifest["metadata"]["annotations"] = {"reconcile.dev/adopt": "true"}
        await running.apply(manifest)
        ready_now: list[Any] = []

        async def ready() -> bool:
            obj = await running.client.get("bucket", "legacy")
            condition = obj.status.condition("Ready")
            if condition is not None and condition.status.value == "True":
                ready_now.append(obj)
            return bool(ready_now)

        await until_async(clock, ready)  # the requeue after Adopted waits out its backoff on the clock
        ready = ready_now[-1]
        assert await tags_of(raw, "legacy") == {"team": "web", "reconcile.dev/owner": ready.metadata.uid}
        history = await running.client.history("bucket", "legacy")
        assert [e.data["message"] for e in history if e.type == "Adopted"] == [
            "took over the existing external resource (unmarked)"
        ]
        assert await (await raw.get_object(Bucket="legacy", Key="keep.txt"))["Body"].read() == b"old"

    async def test_deleting_a_bucket_with_objects(self, running: Runtime, raw: Any, clock: FakeClock) -> None:
        """Without forceDestroy a bucket holding objects stays, with a condition saying
        why; with it, every object version and delete marker goes, then the bucket."""
        await running.apply(bucket("full", versioning="Enabled"))
        await asyncio.wait_for(running.wait_ready("bucket", "full"), DEADLINE)
        for body in (b"one", b"two"):
            await raw.put_object(Bucket="full", Key="a.txt", Body=body)
        await raw.delete_object(Bucket="full", Key="a.txt")  # a delete marker too
        await running.client.delete("bucket", "full")

        await until_async(clock, _synced_says(running, "bucket", "full", "is not empty"))
        assert "full" in [b["Name"] for b in (await raw.list_buckets())["Buckets"]]
        await running.client.patch("bucket", "full", {"spec": {"forceDestroy": True}})

        async def gone() -> bool:
            return "full" not in [b["Name"] for b in (await raw.list_buckets())["Buckets"]]

        await until_async(clock, gone)

    async def test_no_credential_reaches_the_log_or_the_logs(
        self, running: Runtime, raw: Any, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The secret key is in the environment only: not in the database file, not in any
        log record, not in any status."""
        caplog.set_level(logging.DEBUG)
        await running.apply(bucket("secretive", tags={"a": "b"}))
        await asyncio.wait_for(running.wait_ready("bucket", "secretive"), DEADLINE)
        await raw.put_bucket_tagging(Bucket="secretive", Tagging={"TagSet": []})
        clock.advance(70)

        async def repaired() -> bool:
            return (await tags_of(raw, "secretive")).get("a") == "b"

        await until_async(clock, repaired)
        data = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
        assert SECRET.encode() not in data
        assert SECRET not in caplog.text


def _tag_set(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


class S3Outside:
    """Reaches the buckets directly, with a plain client of its own."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def _call(self, operation: str, **arguments: Any) -> Any:
        from aiobotocore.session import get_session  # noqa: PLC0415

        async with get_session().create_client(
            "s3", region_name="eu-west-1", endpoint_url=self.url
        ) as client:
            return await getattr(client, operation)(**arguments)

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the bucket is there."""
        names = [b["Name"] for b in (await self._call("list_buckets"))["Buckets"]]
        return resource.spec.bucket in names

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """Delete the (empty) bucket by hand."""
        await self._call("delete_bucket", Bucket=resource.spec.bucket)

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """Change its tags by hand, keeping the owner tag."""
        tags = [
            {"Key": "team", "Value": "changed"},
            {"Key": "reconcile.dev/owner", "Value": resource.metadata.uid},
        ]
        await self._call("put_bucket_tagging", Bucket=resource.spec.bucket, Tagging={"TagSet": tags})

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """A bucket at the manifest's name, made by somebody else, in a later second than
        any bucket of that name made before (S3 dates a bucket's creation to the second:
        two made in one second cannot be told apart, see the s3 reference)."""
        name = manifest["spec"].get("bucket") or manifest["metadata"]["name"]
        # The only thing to wait for is the clock S3 dates creations by: into the next second.
        await asyncio.sleep(1.01 - time.time() % 1)
        await self._call(
            "create_bucket", Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )

    async def count(self) -> int:
        """How many buckets exist."""
        return len((await self._call("list_buckets"))["Buckets"])


def conformance_bucket(name: str) -> dict[str, Any]:
    """The kit's manifest: a tagged bucket."""
    return bucket(name, tags={"team": "web"})


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_bucket_conformance(check: Any, s3: str, tmp_path: Path) -> None:
    """Bucket passes every conformance check against moto_server."""
    config = {"endpoint_url": s3, "addressing_style": "path"}
    await check(Harness(S3Provider(), S3Outside(s3), conformance_bucket, tmp_path / "state.db", config))


def test_apply_refuses_a_bad_bucket_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """From the command line: one line naming the file, the field and the rule; exit 2;
    not even a database file is made."""
    from reconcile.cli import main  # noqa: PLC0415

    manifest = tmp_path / "bucket.yaml"
    manifest.write_text(
        "apiVersion: s3.reconcile.dev/v1\nkind: Bucket\nmetadata: {name: ok-name}\nspec: {bucket: Bad_Name}\n"
    )
    db = tmp_path / "state.db"
    assert main(["--db", str(db), "apply", "-f", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert "bucket.yaml" in err
    assert "spec.bucket: may hold only lowercase letters" in err
    assert "Traceback" not in err
    assert not db.exists()


def _cli(db: Path, config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reconcile", "--db", str(db), "--provider-config", str(config), *args]


def test_end_to_end_and_sigkill_mid_convergence(s3: str, tmp_path: Path) -> None:
    """Through the CLI: 200 buckets applied, ``reconcile run`` SIGKILLed while it creates
    them, then ``run --once``: every bucket exists once, tagged as its resource's, and
    nothing else was made."""
    config = tmp_path / "providers.yaml"
    config.write_text(f"s3: {{endpoint_url: '{s3}', addressing_style: path}}\n")
    manifests = tmp_path / "buckets.yaml"
    count = 200
    manifests.write_text(
        "---\n".join(
            f"apiVersion: s3.reconcile.dev/v1\nkind: Bucket\nmetadata: {{name: b{i:03d}-reconcile}}\n"
            "spec: {versioning: Enabled, tags: {team: web}}\n"
            for i in range(count)
        )
    )
    db = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    applied = subprocess.run(
        _cli(db, config, "apply", "-f", str(manifests)), env=env, capture_output=True, check=False
    )
    assert applied.returncode == 0, applied.stderr
    runner = subprocess.Popen(
        _cli(db, config, "run"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while _bucket_count(s3) < count // 4:  # progress on the server, with a deadline
            assert time.monotonic() < deadline, "fewer than 50 buckets in 120 s"
            assert runner.poll() is None, "reconcile run exited on its own"
            time.sleep(0.01)
    finally:
        runner.kill()
        runner.wait(timeout=60)
    once = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120"), env=env, capture_output=True, check=False
    )
    assert once.returncode == 0, once.stderr.decode(errors="replace")[-3000:]
    names = _bucket_names(s3)
    assert sorted(names) == [f"b{i:03d}-reconcile" for i in range(count)]  # each once, nothing more


def _bucket_names(url: str) -> list[str]:
    """Bucket names, asked with plain boto3 (the test's credentials are in the environment)."""
    import boto3  # noqa: PLC0415

    client = boto3.client("s3", region_name="eu-west-1", endpoint_url=url)
    try:
        return [b["Name"] for b in client.list_buckets()["Buckets"]]
    finally:
        client.close()


def _bucket_count(url: str) -> int:
    return len(_bucket_names(url))


class TestFailures:
    """What the AWS side can do wrong: each is a clear condition, retried with backoff."""

    async def _synced_message(self, runtime: Runtime, clock: FakeClock, name: str, text: str) -> str:
        await until_async(clock, _synced_says(runtime, "bucket", name, text))
        synced = (await runtime.client.get("bucket", name)).status.condition("Synced")
        assert synced is not None
        return str(synced.message)

    async def test_missing_credentials(
        self, s3: str, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No credentials anywhere in the chain: Synced=False names the chain; no bucket."""
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        config = {"s3": {"endpoint_url": s3, "addressing_style": "path"}}
        runtime = Runtime(
            tmp_path / "c.db",
            providers=[S3Provider()],
            provider_config=config,
            clock=clock,
            wall_clock=clock,
            provider_timeout=None,  # (real requests, fake clock: see the running fixture)
        )
        async with runtime:
            await runtime.apply(bucket("no-creds"))
            message = await self._synced_message(runtime, clock, "no-creds", "no AWS credentials found")
        assert "AWS_ACCESS_KEY_ID" in message
        assert "~/.aws/credentials" in message
        assert SECRET not in message

    @pytest.mark.usefixtures("s3")
    async def test_unreachable_endpoint(self, tmp_path: Path, clock: FakeClock) -> None:
        """An endpoint nobody listens on: the condition says so, and the retries back off."""
        from servers import free_port  # noqa: PLC0415

        config = {"s3": {"endpoint_url": f"http://127.0.0.1:{free_port()}", "addressing_style": "path"}}
        # One attempt per reconcile: no retry sleeping on the fake clock when the runtime
        # closes (the backoff across reconciles is what this test looks at). No deadline
        # on the fake clock around real requests (see the running fixture): the first
        # request builds aiobotocore's TLS contexts on a thread, tens of real
        # milliseconds in which until_async moves the clock past 60 s, so every attempt
        # "did not answer", the backoff grew to 1000 fake seconds and the real deadline
        # ran out (5 of 30 runs).
        runtime = Runtime(
            tmp_path / "u.db",
            providers=[S3Provider()],
            provider_config=config,
            clock=clock,
            wall_clock=clock,
            provider_attempts=1,
            provider_timeout=None,
        )
        async with runtime:
            await runtime.apply(bucket("far-away"))
            await self._synced_message(runtime, clock, "far-away", "the endpoint is unreachable")
            queue = runtime.controllers["bucket.s3.reconcile.dev"].queue
            key = ObjectKey("s3.reconcile.dev", "Bucket", "default", "far-away")
            # The managed reconciler writes Synced=False before its error reaches the
            # queue: the retry is counted a few turns of the loop later.
            await until(clock, lambda: queue.num_requeues(key) >= 1)

    @pytest.mark.usefixtures("s3")
    async def test_one_attempt_per_call(self, tmp_path: Path, clock: FakeClock) -> None:
        """An endpoint that answers every request 500: one request per reconcile, since
        the engine retries on its clock (botocore retried once more on its own, after a
        real sleep of up to a second that no deadline on the clock could see)."""
        requests = 0

        async def fail(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal requests
            requests += 1
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(fail, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        config = {"s3": {"endpoint_url": f"http://127.0.0.1:{port}", "addressing_style": "path"}}
        runtime = Runtime(
            tmp_path / "o.db",
            providers=[S3Provider()],
            provider_config=config,
            clock=clock,
            wall_clock=clock,
            provider_attempts=1,
            provider_timeout=None,  # (real requests, fake clock: see the running fixture)
        )
        errors: list[str] = []
        async with server, runtime:
            controller = runtime.controllers["bucket.s3.reconcile.dev"]
            controller.add_listener(
                lambda _key, outcome: errors.append(outcome) if outcome == "error" else None
            )
            await runtime.apply(bucket("failing"))

            async def three_failed() -> bool:
                return len(errors) >= 3

            await until_async(clock, three_failed)
            assert len(errors) <= requests <= len(errors) + 1  # (one may be in flight)

    async def test_slow_down_is_retried_without_a_duplicate(
        self, s3: str, tmp_path: Path, clock: FakeClock, raw: Any
    ) -> None:
        """CreateBucket answered SlowDown (503) once: retried, one bucket, Ready."""
        from botocore.exceptions import ClientError  # noqa: PLC0415

        from reconcile_providers.s3.client import S3Client  # noqa: PLC0415

        answered: list[str] = []

        class SlowDownOnce:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

            async def create_bucket(self, **arguments: Any) -> Any:
                if not answered:
                    answered.append("SlowDown")
                    error = {"Code": "SlowDown", "Message": "Please reduce your request rate."}
                    raise ClientError(
                        {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 503}}, "CreateBucket"
                    )
                return await self.inner.create_bucket(**arguments)

        class Throttled(S3Client):
            async def _client(self, region: str | None) -> Any:
                return SlowDownOnce(await super()._client(region))

        class ThrottledProvider(S3Provider):
            async def connect(self, config: Mapping[str, Any]) -> Any:
                return Throttled(config)

        config = {"s3": {"endpoint_url": s3, "addressing_style": "path"}}
        runtime = Runtime(
            tmp_path / "t.db",
            providers=[ThrottledProvider()],
            provider_config=config,
            clock=clock,
            wall_clock=clock,
            provider_timeout=None,  # (real requests, fake clock: see the running fixture)
        )
        async with runtime:
            await runtime.apply(bucket("throttled"))

            await until_async(clock, _ready(runtime, "bucket", "throttled"))
        assert answered == ["SlowDown"]
        assert [b["Name"] for b in (await raw.list_buckets())["Buckets"]] == ["throttled"]


def test_s3_benchmark_smoke(tmp_path: Path) -> None:
    """benchmarks/s3.py at a tiny size: every phase measured beside the plain script,
    and the no-change pass makes read calls only."""
    rows, printed = run_benchmark("s3", 4, tmp_path)
    assert set(rows) == {"create", "noop", "repair", "delete"}
    assert rows["noop"]["our_writes"] == 0
    assert sum(rows["noop"]["our_calls"].values()) > 0
    assert rows["repair"]["our_writes"] >= 1
    assert "x plain" in printed


def s3_object(name: str, bucket_name: str, key: str, **spec: Any) -> dict[str, Any]:
    """An Object manifest."""
    return {
        "apiVersion": "s3.reconcile.dev/v1",
        "kind": "Object",
        "metadata": {"name": name},
        "spec": {"bucket": bucket_name, "key": key, **spec},
    }


class TestObjects:
    """The Object kind against moto_server."""

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ({"content": "a", "contentBase64": "YQ=="}, "spec.content: give exactly one of content"),
            ({}, "spec.content: give exactly one of content, contentBase64 and source"),
            ({"content": "a", "source": "page.html"}, "spec.content: give exactly one of content"),
            ({"source": "/etc/passwd"}, "spec.source: /etc/passwd is outside the source roots"),
            ({"contentBase64": "not base64!"}, "spec.contentBase64: is not valid base64"),
            ({"content": "a", "key": "k" * 1025}, "spec.key: must be 1 to 1024 bytes"),
            ({"content": "a", "bucket": "Bad_Bucket"}, "spec.bucket: may hold only lowercase letters"),
            ({"content": "a", "metadata": {"Upper": "x"}}, "keys are lower-case ASCII"),
            ({"content": "a", "tags": {f"k{i}": "v" for i in range(11)}}, "spec.tags: at most 10 tags"),
            ({"content": "a", "metadata": {"reconcile-owner": "x"}}, "keys are lower-case ASCII"),
        ],
    )
    async def test_refused(self, tmp_path: Path, spec: dict[str, Any], message: str) -> None:
        """Each bad Object: InvalidError with the field path, nothing stored."""
        from reconcile_providers.s3 import OBJECT  # noqa: PLC0415

        manifest = s3_object("o", "site", "index.html")
        manifest["spec"] = {**manifest["spec"], **spec}
        async with connect(tmp_path / "o.db", kinds=KindRegistry([OBJECT])) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(manifest, origin=tmp_path / "m.yaml")
            assert message in str(caught.value)
            assert await client.revision() == 0

    async def test_objects_uploaded_repaired_and_left_alone(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """An object is uploaded with its headers (Content-Type guessed from the key),
        compared by its digest, re-uploaded when changed (keeping our mark) or deleted by
        hand; an object that is not ours is never overwritten."""
        await running.apply(bucket("web-site"))
        await running.apply(s3_object("index", "web-site", "index.html", content="<h1>hi</h1>\n"))
        await running.apply(s3_object("logo", "web-site", "img/logo.png", contentBase64="iVBORw0KGgo="))
        await raw.create_bucket(Bucket="other", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        await raw.put_object(Bucket="other", Key="theirs.txt", Body=b"theirs")
        await running.apply(s3_object("theirs", "other", "theirs.txt", content="mine"))
        for name in ("index", "logo"):  # an object may meet its bucket not made yet: backoff
            await until_async(clock, _ready(running, "object", name))
        head = await raw.head_object(Bucket="web-site", Key="index.html")
        assert head["ContentType"] == "text/html"
        observed = (await running.client.get("object", "index")).status.at_provider
        assert (observed["contentType"], observed["contentDiffers"]) == ("text/html", False)
        assert (await raw.head_object(Bucket="web-site", Key="img/logo.png"))["ContentType"] == "image/png"
        # (Changed with our mark kept, as a tool that copies it would: still ours.)
        mark = {key: value for key, value in head["Metadata"].items() if key == OWNER_METADATA}
        await raw.put_object(
            Bucket="web-site", Key="index.html", Body=b"defaced", Metadata=mark, ContentType="text/html"
        )
        await raw.delete_object(Bucket="web-site", Key="img/logo.png")

        async def repaired() -> bool:
            try:
                body = await (await raw.get_object(Bucket="web-site", Key="index.html"))["Body"].read()
                await raw.head_object(Bucket="web-site", Key="img/logo.png")
            except Exception:  # noqa: BLE001 - not back yet
                return False
            history = await running.client.history("object", "index")
            return bool(body == b"<h1>hi</h1>\n") and any(e.type == "UpdateSucceeded" for e in history)

        clock.advance(70)
        await until_async(clock, repaired)
        drift = [e for e in await running.client.history("object", "index") if e.type == "DriftDetected"]
        assert "digest differs" in drift[-1].data["message"]
        theirs = await running.client.get("object", "theirs")
        synced = theirs.status.condition("Synced")
        assert synced is not None
        assert synced.reason == "NotOwned"
        assert await (await raw.get_object(Bucket="other", Key="theirs.txt"))["Body"].read() == b"theirs"

    async def test_an_object_is_compared_by_its_stored_digest_not_its_etag(
        self, running: Runtime, s3: str, clock: FakeClock
    ) -> None:
        """Under SSE-KMS (and SSE-C) S3's ETag is not the MD5 of the bytes: the SHA-256
        stored with the upload is what observe compares, so such an object is up to date,
        and one whose bytes differ is not."""
        from reconcile_providers.s3.client import S3Client  # noqa: PLC0415

        await running.apply(bucket("kms-site"))
        await running.apply(s3_object("page", "kms-site", "index.html", content="<h1>hi</h1>\n"))
        await until_async(clock, _ready(running, "object", "page"))

        class KmsEtags:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

            async def head_object(self, **arguments: Any) -> Any:
                return {**await self.inner.head_object(**arguments), "ETag": '"0c6a6f1e-not-an-md5"'}

        class Kms(S3Client):
            async def _client(self, region: str | None) -> Any:
                return KmsEtags(await super()._client(region))

        external = Kms({"endpoint_url": s3, "addressing_style": "path"})
        try:
            obj = await running.client.get("object", "page")
            assert (await external.observe(obj)).up_to_date
            # Other bytes declared, compared before the runner could upload them (an
            # apply would race it: the running runtime converges the object at once).
            changed = attrs.evolve(obj, spec=attrs.evolve(obj.spec, content="<h1>bye</h1>\n"))
            observation = await external.observe(changed)
            assert not observation.up_to_date
            assert "digest differs" in observation.diff
        finally:
            await external.close()

    async def test_an_object_from_a_source_file(
        self, running: Runtime, raw: Any, clock: FakeClock, tmp_path: Path
    ) -> None:
        """A source next to the manifest is uploaded; edited after apply, the runner
        refuses it (apply again publishes it)."""
        pages = tmp_path / "pages"
        pages.mkdir()
        (pages / "about.html").write_bytes(b"<p>about</p>\n")
        await running.apply(bucket("sourced"))
        manifest = s3_object("about", "sourced", "about.html", source="pages/about.html")
        await running.apply(manifest, origin=tmp_path / "site.yaml")
        await until_async(clock, _ready(running, "object", "about"))  # its bucket may come second
        body = await (await raw.get_object(Bucket="sourced", Key="about.html"))["Body"].read()
        assert body == b"<p>about</p>\n"
        (pages / "about.html").write_bytes(b"<p>edited, not applied</p>\n")
        mark = (await raw.head_object(Bucket="sourced", Key="about.html"))["Metadata"][OWNER_METADATA]
        await raw.put_object(
            Bucket="sourced", Key="about.html", Body=b"drift", Metadata={OWNER_METADATA: mark}
        )

        clock.advance(70)
        await until_async(clock, _synced_says(running, "object", "about", "changed since it was applied"))
        await running.apply(manifest, origin=tmp_path / "site.yaml")

        async def published() -> bool:
            found = await (await raw.get_object(Bucket="sourced", Key="about.html"))["Body"].read()
            return bool(found == b"<p>edited, not applied</p>\n")

        await until_async(clock, published)

    async def test_object_tags_are_kept_without_uploading_again(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """Declared tags are set with the upload; changed by hand, only the tags are put
        back (the object's version stays the same)."""
        await running.apply(bucket("tagged-objects", versioning="Enabled"))
        await until_async(clock, _ready(running, "bucket", "tagged-objects"))  # versioned before the upload
        await running.apply(
            s3_object("doc", "tagged-objects", "doc.txt", content="doc", tags={"class": "public"})
        )
        await until_async(clock, _ready(running, "object", "doc"))
        version = (await raw.head_object(Bucket="tagged-objects", Key="doc.txt"))["VersionId"]
        await raw.put_object_tagging(
            Bucket="tagged-objects", Key="doc.txt", Tagging={"TagSet": [{"Key": "class", "Value": "secret"}]}
        )

        async def restored() -> bool:
            tags = (await raw.get_object_tagging(Bucket="tagged-objects", Key="doc.txt"))["TagSet"]
            return tags == [{"Key": "class", "Value": "public"}]

        clock.advance(70)
        await until_async(clock, restored)
        assert (await raw.head_object(Bucket="tagged-objects", Key="doc.txt"))["VersionId"] == version

    async def test_a_large_source_is_uploaded_in_parts(
        self, s3: str, raw: Any, tmp_path: Path, clock: FakeClock
    ) -> None:
        """A source past the multipart threshold (5 MiB here) goes up in parts; its ETag
        (the parts' digest) is computed from the file, so the next poll finds it up to
        date without a download, and a hand edit is put back."""
        big = tmp_path / "big.bin"
        big.write_bytes(bytes(range(256)) * (11 * 1024 * 1024 // 256))  # 11 MiB: three parts
        config = {
            "s3": {"endpoint_url": s3, "addressing_style": "path", "multipart_threshold": 5 * 1024 * 1024}
        }
        # No provider-call deadline: the fake clock runs fast while the real upload runs.
        runtime = Runtime(
            tmp_path / "m.db",
            providers=[S3Provider()],
            provider_config=config,
            clock=clock,
            wall_clock=clock,
            provider_timeout=None,
        )
        async with runtime:
            await runtime.apply(bucket("large"))
            await runtime.apply(
                s3_object("big", "large", "big.bin", source="big.bin"), origin=tmp_path / "m.yaml"
            )
            await until_async(clock, _ready(runtime, "object", "big"))
            head = await raw.head_object(Bucket="large", Key="big.bin")
            assert head["ETag"].endswith('-3"')
            assert head["ContentLength"] == big.stat().st_size
            polls: list[str] = []
            runtime.controllers["object.s3.reconcile.dev"].add_listener(
                lambda key, _o: polls.append(key.name)
            )
            clock.advance(70)
            await until(clock, lambda: "big" in polls)
            history = await runtime.client.history("object", "big")
            assert not [e for e in history if e.type == "DriftDetected"], "a multipart ETag is no drift"
            await raw.put_object(
                Bucket="large",
                Key="big.bin",
                Body=b"small now",
                Metadata={"reconcile-owner": head["Metadata"]["reconcile-owner"]},
            )

            async def restored() -> bool:
                found = await raw.head_object(Bucket="large", Key="big.bin")
                return bool(found["ContentLength"] == big.stat().st_size)

            clock.advance(70)
            await until_async(clock, restored)

    async def test_an_object_waits_for_its_bucket(self, running: Runtime, clock: FakeClock) -> None:
        """An object whose bucket does not exist yet says so and is retried; once the
        bucket is declared, both converge."""
        await running.apply(s3_object("early", "later-bucket", "a.txt", content="a"))

        await until_async(clock, _synced_says(running, "object", "early", "does not exist (yet)"))
        await running.apply(bucket("later-bucket"))

        await until_async(clock, _ready(running, "object", "early"))


def _ready(runtime: Runtime, kind: str, name: str) -> Any:
    """A predicate for until_async: the object is Ready (time moves on the fake clock
    meanwhile, so a retry's backoff passes)."""

    async def ready() -> bool:
        obj = await runtime.client.get(kind, name)
        condition = obj.status.condition("Ready")
        return condition is not None and condition.status.value == "True"

    return ready


def test_the_s3_example_converges(s3: str, tmp_path: Path) -> None:
    """examples/s3/site.yaml through the CLI against moto_server: the website bucket and
    its pages (two read from examples/files/pages) converge in one run --once."""
    import boto3  # noqa: PLC0415

    root = Path(__file__).parents[1]
    config = tmp_path / "providers.yaml"
    pages = root / "examples" / "files" / "pages"
    config.write_text(f"s3: {{endpoint_url: '{s3}', addressing_style: path, source_roots: ['{pages}']}}\n")
    db = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": str(root)}
    site = str(root / "examples" / "s3" / "site.yaml")
    applied = subprocess.run(
        _cli(db, config, "apply", "-f", site), env=env, capture_output=True, text=True, check=False
    )
    assert applied.returncode == 0, applied.stderr
    once = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120", "-q"),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert once.returncode == 0, once.stderr
    client = boto3.client("s3", region_name="eu-west-1", endpoint_url=s3)
    try:
        body = client.get_object(Bucket="example-site", Key="index.html")["Body"].read()
        assert body == (pages / "index.html").read_bytes()
        assert client.get_bucket_versioning(Bucket="example-site")["Status"] == "Enabled"
    finally:
        client.close()


class S3ObjectOutside(S3Outside):
    """Reaches the objects (in one bucket made beforehand) directly."""

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the object is there."""
        listed = await self._call("list_objects_v2", Bucket=resource.spec.bucket)
        return resource.spec.key in [item["Key"] for item in listed.get("Contents", [])]

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """Delete it by hand."""
        await self._call("delete_object", Bucket=resource.spec.bucket, Key=resource.spec.key)

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """Overwrite it by hand, keeping the owner mark."""
        metadata = {"reconcile-owner": resource.metadata.uid}
        await self._call(
            "put_object",
            Bucket=resource.spec.bucket,
            Key=resource.spec.key,
            Body=b"edited",
            Metadata=metadata,
        )

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """An object at the manifest's key, written by somebody else."""
        await self._call(
            "put_object", Bucket=manifest["spec"]["bucket"], Key=manifest["spec"]["key"], Body=b"x"
        )

    async def count(self) -> int:
        """How many objects the bucket holds."""
        listed = await self._call("list_objects_v2", Bucket="conformance")
        return len(listed.get("Contents", []))


def conformance_object(name: str) -> dict[str, Any]:
    """The kit's manifest: a small text object in the bucket ``conformance``."""
    return s3_object(name, "conformance", f"{name}.txt", content=f"{name}\\n")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_object_conformance(check: Any, s3: str, tmp_path: Path) -> None:
    """Object passes every conformance check against moto_server."""
    outside = S3ObjectOutside(s3)
    await outside._call(
        "create_bucket", Bucket="conformance", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    config = {"endpoint_url": s3, "addressing_style": "path"}
    await check(Harness(S3Provider(), outside, conformance_object, tmp_path / "state.db", config))


def test_out_of_band_changes_repaired_through_the_cli(s3: str, tmp_path: Path) -> None:
    """Through the CLI: a versioned, tagged, encrypted bucket with a lifecycle rule and
    three objects converges; tags and versioning changed and an object deleted with plain
    boto3 are repaired by the next ``run --once``, and ``history`` shows DriftDetected."""
    import boto3  # noqa: PLC0415

    config = tmp_path / "providers.yaml"
    config.write_text(f"s3: {{endpoint_url: '{s3}', addressing_style: path}}\n")
    manifests = tmp_path / "site.yaml"
    bucket_document = (
        "apiVersion: s3.reconcile.dev/v1\nkind: Bucket\nmetadata: {name: cli-site}\n"
        "spec: {versioning: Enabled, tags: {team: web}, encryption: {algorithm: AES256},"
        " lifecycleRules: [{id: old, noncurrentExpirationDays: 30}]}\n"
    )
    documents = [
        bucket_document,
        *(
            f"apiVersion: s3.reconcile.dev/v1\nkind: Object\nmetadata: {{name: page{i}}}\n"
            f"spec: {{bucket: cli-site, key: page{i}.html, content: '<p>{i}</p>'}}\n"
            for i in range(3)
        ),
    ]
    manifests.write_text("---\n".join(documents))
    db = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(_cli(db, config, *args), env=env, capture_output=True, text=True, check=False)

    assert cli("apply", "-f", str(manifests)).returncode == 0
    first = cli("run", "--once", "--timeout", "120", "-q")
    assert first.returncode == 0, first.stderr
    client = boto3.client("s3", region_name="eu-west-1", endpoint_url=s3)
    try:
        tags = client.get_bucket_tagging(Bucket="cli-site")["TagSet"]
        owner = next(t for t in tags if t["Key"] == "reconcile.dev/owner")
        client.put_bucket_tagging(
            Bucket="cli-site", Tagging={"TagSet": [{"Key": "team", "Value": "ops"}, owner]}
        )
        client.put_bucket_versioning(Bucket="cli-site", VersioningConfiguration={"Status": "Suspended"})
        client.delete_object(Bucket="cli-site", Key="page1.html")
        again = cli("run", "--once", "--timeout", "120", "-q")
        assert again.returncode == 0, again.stderr
        tags = {t["Key"]: t["Value"] for t in client.get_bucket_tagging(Bucket="cli-site")["TagSet"]}
        assert tags["team"] == "web"
        assert client.get_bucket_versioning(Bucket="cli-site")["Status"] == "Enabled"
        assert client.get_object(Bucket="cli-site", Key="page1.html")["Body"].read() == b"<p>1</p>"
    finally:
        client.close()
    history = cli("history", "bucket", "cli-site")
    assert history.returncode == 0, history.stderr
    assert "DriftDetected" in history.stdout


def _synced_says(runtime: Runtime, kind: str, name: str, text: str) -> Any:
    """A predicate for until_async: the object's Synced message holds ``text``."""

    async def says() -> bool:
        synced = (await runtime.client.get(kind, name)).status.condition("Synced")
        return synced is not None and text in synced.message

    return says
