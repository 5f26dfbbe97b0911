"""The s3 provider's clients: one per kind (:class:`BucketClient`, :class:`ObjectClient`)
over one connection (:class:`S3Client`, the :class:`reconcile.PerKind` the provider's
``connect`` returns): observe, create, update and delete through aiobotocore, one
aiobotocore client per region, reused across reconciles and closed on close()."""

from __future__ import annotations

import contextlib
import datetime
import json
from collections.abc import Mapping
from typing import Any

import attrs

import reconcile
from reconcile.annotations import ANNOTATION_CREATE_PENDING
from reconcile.errors import TransientError
from reconcile_providers.s3.config import S3Config
from reconcile_providers.s3.failing import code_of, s3_errors
from reconcile_providers.s3.kinds import BUCKET, OWNER_TAG, ensure_ours
from reconcile_providers.s3.objects import OBJECT
from reconcile_providers.s3.policies import same_policy
from reconcile_providers.s3.putting import (
    adopt_object,
    delete_object,
    observe_object,
    put_object,
    update_object,
)
from reconcile_providers.s3.rules import (
    normal_cors,
    normal_lifecycle,
)
from reconcile_providers.s3.subresources import (
    BLOCK_FIELDS,
    block_body,
    encryption_body,
    matches,
    read_cors,
    read_encryption,
    read_lifecycle,
    read_policy,
    read_public_access_block,
    settle_rules,
)

__all__ = ["BucketClient", "ObjectClient", "S3Client"]

_DEFAULT_REGION = "us-east-1"
#: delete_objects takes at most this many keys.
_DELETE_BATCH = 1000
#: How long a bucket that is not empty (and not force_destroy) waits at least before the
#: next try: the queue's backoff grows from there.
_NOT_EMPTY_RETRY = 5.0


class S3Client(reconcile.PerKind):
    """One S3-compatible endpoint: the connection (a session, an aiobotocore client per
    region) its Bucket and Object clients share, each call going to the client of the
    resource's kind."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = S3Config.from_mapping(config)
        self._stack = contextlib.AsyncExitStack()
        self._clients: dict[str, Any] = {}
        self._session: Any = None
        super().__init__({BUCKET: BucketClient(self), OBJECT: ObjectClient(self)})

    async def _client(self, region: str | None) -> Any:
        """The client of ``region`` (made on first use; the chain's region by default)."""
        from aiobotocore.config import AioConfig  # noqa: PLC0415 - loaded when first used
        from aiobotocore.session import get_session  # noqa: PLC0415

        if self._session is None:
            self._session = get_session()
            if self.config.profile is not None:
                self._session.set_config_variable("profile", self.config.profile)
        wanted = (
            region or self.config.region or self._session.get_config_variable("region") or _DEFAULT_REGION
        )
        client = self._clients.get(wanted)
        if client is None:
            settings = AioConfig(
                s3={"addressing_style": self.config.addressing_style},
                max_pool_connections=self.config.max_pool_connections,
                # One attempt: the engine retries, with backoff on its clock. botocore's
                # "max_attempts" counts retries, not attempts: 1 was a second attempt after
                # a real sleep of up to a second, which no deadline on the injected clock
                # could see (a provider call "did not answer within 60 s" of fake time).
                retries={"total_max_attempts": 1, "mode": "standard"},
            )
            maker = self._session.create_client(
                "s3", region_name=wanted, endpoint_url=self.config.endpoint_url, config=settings
            )
            client = await self._stack.enter_async_context(maker)
            self._clients[wanted] = client
        return client

    async def close(self) -> None:
        """Close every aiobotocore client."""
        await super().close()
        await self._stack.aclose()
        self._clients.clear()


class ObjectClient:
    """Objects (:mod:`reconcile_providers.s3.putting` does the work), over the endpoint's
    connection."""

    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    async def _client(self) -> Any:
        return await self._s3._client(None)  # noqa: SLF001 - the connection this client shares

    async def observe(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """HeadObject (and its tags when declared): read calls only."""
        return await observe_object(await self._client(), resource, self._s3.config.multipart_threshold)

    async def create(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Created:
        """PutObject, only if absent; returns the observation that holds after."""
        known = await put_object(
            await self._client(), resource, create=True, part_size=self._s3.config.multipart_threshold
        )
        return reconcile.Created(observation=known)

    async def update(
        self, resource: reconcile.Resource[Any, Any], observation: reconcile.Observation
    ) -> reconcile.Observation:
        """Bring the bytes and headers to the spec; returns the observation that holds after."""
        return await update_object(
            await self._client(), resource, observation, self._s3.config.multipart_threshold
        )

    async def delete(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """A conditional DeleteObject; returns "gone" (S3's deletes are read-after-write)."""
        await delete_object(await self._client(), resource)
        return reconcile.Observation(exists=False)

    async def adopt(self, resource: reconcile.Resource[Any, Any]) -> None:
        """Our owner mark added to the object's metadata (see :func:`adopt_object`)."""
        await adopt_object(await self._client(), resource)

    async def close(self) -> None:
        """Nothing of its own: the connection is the S3Client's."""


class BucketClient:
    """Buckets, over the endpoint's connection."""

    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    async def _client(self, region: str | None) -> Any:
        return await self._s3._client(region)  # noqa: SLF001 - the connection this client shares

    @staticmethod
    def _region(resource: reconcile.Resource[Any, Any]) -> str | None:
        region: str | None = resource.spec.region
        return region

    async def close(self) -> None:
        """Nothing of its own: the connection is the S3Client's."""

    # -- the four calls --------------------------------------------------------------------

    async def observe(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """HeadBucket, then its tags and versioning: read calls only."""
        spec, name = resource.spec, resource.spec.bucket
        client = await self._client(self._region(resource))
        tags = await self._tags(client, name)
        if tags is None:
            return reconcile.Observation(exists=False)
        owner, identity = await self._whose(client, resource, tags)
        tags.pop(OWNER_TAG, None)
        if resource.metadata.deletion_timestamp is not None:
            # Being deleted: whether it exists and whose it is is all the engine asks;
            # the settings are not read (two calls fewer per bucket deleted).
            return reconcile.Observation(
                exists=True, owner=owner, observed={"bucket": name}, identity=identity
            )
        with s3_errors("GetBucketVersioning", name):
            versioning = (await client.get_bucket_versioning(Bucket=name)).get("Status")
        differences: list[str] = []
        extra: dict[str, Any] = {}
        if spec.encryption is not None:
            found = await read_encryption(client, name)
            extra["encryption"] = found
            wanted = encryption_body(spec.encryption)
            if not matches(found, wanted):
                differences.append(f"encryption: {found or 'none'} -> {wanted}")
        if spec.public_access_block is not None:
            found_block = await read_public_access_block(client, name)
            extra["publicAccessBlock"] = found_block
            wanted_block = block_body(spec.public_access_block)
            if found_block != wanted_block:
                differences.append(f"publicAccessBlock: {found_block or 'none'} -> {wanted_block}")
        if spec.policy is not None:
            found_policy = await read_policy(client, name)
            extra["policy"] = found_policy
            if found_policy is None or not same_policy(found_policy, spec.policy):
                differences.append(
                    "policy: differs from the declared document" if found_policy else "policy: none"
                )
        if spec.lifecycle_rules is not None:
            found_rules = await read_lifecycle(client, name)
            extra["lifecycleRules"] = found_rules
            if found_rules != normal_lifecycle(spec.lifecycle_rules):
                differences.append("lifecycleRules: differ from the declared rules")
        if spec.cors_rules is not None:
            found_cors = await read_cors(client, name)
            extra["corsRules"] = found_cors
            if found_cors != normal_cors(spec.cors_rules):
                differences.append("corsRules: differ from the declared rules")
        observed = {
            "bucket": name,
            "region": self._region(resource) or client.meta.region_name,
            "arn": f"arn:aws:s3:::{name}",
            "versioning": versioning or "Unversioned",
            "tags": dict(sorted(tags.items())),
            **extra,
        }
        if tags != dict(spec.tags):
            differences.append(f"tags: {_tag_diff(spec.tags, tags)}")
        if owner is None:
            # Ours only by the identity recorded (the engine's rule): the tag is put back.
            differences.append(f"tags: +{OWNER_TAG} (the owner tag is missing)")
        if spec.versioning is not None and versioning != spec.versioning:
            differences.append(f"versioning: {versioning or 'Unversioned'} -> {spec.versioning}")
        return reconcile.Observation.present(differences, observed=observed, owner=owner, identity=identity)

    async def create(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Created:
        """CreateBucket (LocationConstraint outside us-east-1), then the owner tag and the
        settings. A bucket of ours that exists already (an interrupted create) is fine;
        one of anybody else is NotOwned, and nothing is written to it (S3 answers
        BucketAlreadyOwnedByYou or BucketAlreadyExists; in us-east-1, which answers 200
        for a bucket the account owns, its tags are read first). Returns the observation
        that holds after: the settings just put."""
        name = resource.spec.bucket
        client = await self._client(self._region(resource))
        region = client.meta.region_name
        arguments: dict[str, Any] = {"Bucket": name}
        if region != _DEFAULT_REGION:
            arguments["CreateBucketConfiguration"] = {"LocationConstraint": region}
        else:
            tags = await self._tags(client, name)
            if tags is not None:
                await self._ensure_ours(client, resource, tags)
        with s3_errors("CreateBucket", name):
            try:
                await client.create_bucket(**arguments)
            except Exception as exc:
                if code_of(exc) != "BucketAlreadyOwnedByYou":
                    raise
                await self._ensure_ours(client, resource, await self._tags(client, name) or {})
        await self._settle(client, resource, None)
        after = self._after(resource, region, None)
        # The bucket's creation date: what tells it from a bucket of the same name made
        # after it, should our owner tag ever be missing (see _whose).
        identity = await self._creation_date(client, name)
        return reconcile.Created(observation=attrs.evolve(after, identity=identity))

    async def update(
        self, resource: reconcile.Resource[Any, Any], observation: reconcile.Observation
    ) -> reconcile.Observation:
        """Bring the settings to the spec; returns the observation that holds after."""
        client = await self._client(self._region(resource))
        await self._settle(client, resource, observation)
        return self._after(resource, client.meta.region_name, observation)

    async def delete(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """DeleteBucket of a bucket that is ours (its owner tag, read first: NotOwned
        otherwise, untouched); with force_destroy, every object version and delete marker
        first. A bucket that is not empty otherwise stays, and the engine retries with
        backoff. Returns "gone" (S3's deletes are read-after-write)."""
        gone = reconcile.Observation(exists=False)
        name = resource.spec.bucket
        client = await self._client(self._region(resource))
        tags = await self._tags(client, name)
        if tags is None:
            return gone
        await self._ensure_ours(client, resource, tags)
        if resource.spec.force_destroy:
            await self._empty(client, name)
        with s3_errors("DeleteBucket", name):
            try:
                await client.delete_bucket(Bucket=name)
            except Exception as exc:
                code = code_of(exc)
                if code in ("NoSuchBucket", "404"):
                    return gone
                if code == "BucketNotEmpty":
                    message = (
                        f"bucket {name!r} is not empty: delete its objects, or set spec.forceDestroy: true "
                        "to delete every object version with it"
                    )
                    raise TransientError(message, retry_after=_NOT_EMPTY_RETRY) from exc
                raise
        return gone

    async def adopt(self, resource: reconcile.Resource[Any, Any]) -> None:
        """Take over an existing bucket (``reconcile.dev/adopt``): add our owner tag to its
        tags; change nothing else (the next reconcile brings it to the spec)."""
        name = resource.spec.bucket
        client = await self._client(self._region(resource))
        tags = {**(await self._tags(client, name) or {}), OWNER_TAG: resource.metadata.uid}
        tag_set = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        with s3_errors("PutBucketTagging", name):
            await client.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tag_set})

    # -- helpers ---------------------------------------------------------------------------

    async def _tags(self, client: Any, name: str) -> dict[str, str] | None:
        """The bucket's tags, owner tag included; None when there is no such bucket (one
        call says both: existence and whose it is)."""
        with s3_errors("GetBucketTagging", name):
            try:
                answer = await client.get_bucket_tagging(Bucket=name)
            except Exception as exc:
                code = code_of(exc)
                if code in ("NoSuchTagSet", "NoSuchTagSetError"):
                    return {}
                if code in ("NoSuchBucket", "404", "NotFound"):
                    return None
                raise
        return {tag["Key"]: tag["Value"] for tag in answer.get("TagSet", ())}

    async def _whose(
        self, client: Any, resource: reconcile.Resource[Any, Any], tags: Mapping[str, str]
    ) -> tuple[str | None, str | None]:
        """Whose the bucket is (its owner tag) and its identity (its creation date), which
        the engine's rule compares with the one recorded at our create
        (:func:`reconcile.ours`): a bucket deleted and made again by somebody else is not
        ours, whatever tags it carries (S3 drops them; some S3-compatible servers keep
        them, and a tag set can be copied). An untagged bucket created after the engine's
        create-pending marker is ours (a create of ours cut short between CreateBucket and
        its tags)."""
        owner = tags.get(OWNER_TAG)
        identity = await self._creation_date(client, resource.spec.bucket)
        pending = resource.metadata.annotations.get(ANNOTATION_CREATE_PENDING)
        if owner is None and identity is not None and pending is not None:
            begun = datetime.datetime.fromisoformat(pending)
            # S3 gives creation times to the second: a create begun in the same second counts.
            if datetime.datetime.fromisoformat(identity) >= begun.replace(microsecond=0):
                return resource.metadata.uid, identity
        return owner, identity

    @staticmethod
    async def _creation_date(client: Any, name: str) -> str | None:
        """When the bucket ``name`` was created (ISO 8601, as S3 gives it: to the second),
        from ListBuckets; None when it is not listed."""
        with s3_errors("ListBuckets", name):
            answer = await client.list_buckets(Prefix=name)
        created = next((b.get("CreationDate") for b in answer.get("Buckets", ()) if b["Name"] == name), None)
        return None if created is None else created.isoformat()

    async def _ensure_ours(
        self, client: Any, resource: reconcile.Resource[Any, Any], tags: Mapping[str, str]
    ) -> None:
        """NotOwnedError unless the existing bucket is ``resource``'s."""
        owner, identity = await self._whose(client, resource, tags)
        ensure_ours(resource, owner, f"bucket {resource.spec.bucket!r}", identity)

    def _after(
        self, resource: reconcile.Resource[Any, Any], region: str, before: reconcile.Observation | None
    ) -> reconcile.Observation:
        """What observe reports once create or update has put the settings: the spec's,
        and for an undeclared versioning what was there before (a new bucket's:
        unversioned)."""
        spec, name = resource.spec, resource.spec.bucket
        versioning = spec.versioning or (before.observed.get("versioning") if before else None)
        observed: dict[str, Any] = {
            "bucket": name,
            "region": spec.region or region,
            "arn": f"arn:aws:s3:::{name}",
            "versioning": versioning or "Unversioned",
            "tags": dict(sorted(spec.tags.items())),
        }
        if spec.encryption is not None:
            observed["encryption"] = encryption_body(spec.encryption)
        if spec.public_access_block is not None:
            observed["publicAccessBlock"] = block_body(spec.public_access_block)
        if spec.policy is not None:
            observed["policy"] = spec.policy
        if spec.lifecycle_rules is not None:
            observed["lifecycleRules"] = normal_lifecycle(spec.lifecycle_rules)
        if spec.cors_rules is not None:
            observed["corsRules"] = normal_cors(spec.cors_rules)
        return reconcile.Observation(exists=True, observed=observed, owner=resource.metadata.uid)

    async def _settle(
        self, client: Any, resource: reconcile.Resource[Any, Any], observation: reconcile.Observation | None
    ) -> None:
        spec, name = resource.spec, resource.spec.bucket
        observed = {} if observation is None else dict(observation.observed)
        wanted = {**spec.tags, OWNER_TAG: resource.metadata.uid}
        if (
            observation is None
            or observed.get("tags") != dict(sorted(spec.tags.items()))
            or observation.owner is None
        ):
            tag_set = [{"Key": k, "Value": v} for k, v in sorted(wanted.items())]
            with s3_errors("PutBucketTagging", name):
                await client.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tag_set})
        if spec.encryption is not None and not matches(
            observed.get("encryption"), encryption_body(spec.encryption)
        ):
            default: dict[str, Any] = {"SSEAlgorithm": spec.encryption.algorithm}
            if spec.encryption.kms_key_id is not None:
                default["KMSMasterKeyID"] = spec.encryption.kms_key_id
            rule: dict[str, Any] = {"ApplyServerSideEncryptionByDefault": default}
            if spec.encryption.bucket_key is not None:
                rule["BucketKeyEnabled"] = spec.encryption.bucket_key
            with s3_errors("PutBucketEncryption", name):
                await client.put_bucket_encryption(
                    Bucket=name, ServerSideEncryptionConfiguration={"Rules": [rule]}
                )
        block = spec.public_access_block
        if block is not None and observed.get("publicAccessBlock") != block_body(block):
            configuration = {aws: getattr(block, attribute) for attribute, _, aws in BLOCK_FIELDS}
            with s3_errors("PutPublicAccessBlock", name):
                await client.put_public_access_block(
                    Bucket=name, PublicAccessBlockConfiguration=configuration
                )
        if spec.policy is not None and (
            observed.get("policy") is None or not same_policy(observed.get("policy"), spec.policy)
        ):
            with s3_errors("PutBucketPolicy", name):
                await client.put_bucket_policy(Bucket=name, Policy=json.dumps(spec.policy))
        await settle_rules(client, spec, observed, name)
        current = observed.get("versioning")
        if spec.versioning is not None and current != spec.versioning:
            with s3_errors("PutBucketVersioning", name):
                await client.put_bucket_versioning(
                    Bucket=name, VersioningConfiguration={"Status": spec.versioning}
                )

    async def _empty(self, client: Any, name: str) -> None:
        """Delete every object version and delete marker of ``name``."""
        paginator = client.get_paginator("list_object_versions")
        with s3_errors("ListObjectVersions", name):
            try:
                pages = [page async for page in paginator.paginate(Bucket=name)]
            except Exception as exc:
                if code_of(exc) in ("NoSuchBucket", "404"):
                    return
                raise
        keys = [
            {"Key": item["Key"], "VersionId": item["VersionId"]}
            for page in pages
            for item in (*page.get("Versions", ()), *page.get("DeleteMarkers", ()))
        ]
        for first in range(0, len(keys), _DELETE_BATCH):
            with s3_errors("DeleteObjects", name):
                await client.delete_objects(
                    Bucket=name, Delete={"Objects": keys[first : first + _DELETE_BATCH], "Quiet": True}
                )


def _tag_diff(wanted: Mapping[str, str], found: Mapping[str, str]) -> str:
    parts = [
        f"{k}={found[k]!r} -> {wanted[k]!r}" for k in sorted(wanted) if k in found and found[k] != wanted[k]
    ]
    parts += [f"+{k}={wanted[k]!r}" for k in sorted(wanted) if k not in found]
    parts += [f"-{k}" for k in sorted(found) if k not in wanted]
    return ", ".join(parts)
