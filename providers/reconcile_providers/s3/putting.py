"""Observe, write and delete one ``Object`` (see :mod:`reconcile_providers.s3.objects`)."""

from __future__ import annotations

import contextlib
import urllib.parse
from typing import Any

import reconcile
from reconcile.annotations import ANNOTATION_EXTERNAL_IDENTITY
from reconcile.errors import TransientError
from reconcile_providers.s3.failing import code_of, read_or_none, s3_errors
from reconcile_providers.s3.kinds import ensure_ours
from reconcile_providers.s3.objects import (
    DIGEST_METADATA,
    OWNER_METADATA,
    body_of,
    content_type_of,
    digest_of,
    etag_of,
)

__all__ = ["adopt_object", "delete_object", "identity_of", "observe_object", "put_object", "update_object"]

_MISSING = ("404", "NoSuchKey", "NotFound")


def _where(resource: reconcile.Resource[Any, Any]) -> str:
    return f"{resource.spec.bucket}/{resource.spec.key}"


def _no_bucket(exc: BaseException, resource: reconcile.Resource[Any, Any]) -> TransientError | None:
    if code_of(exc) == "NoSuchBucket":
        return TransientError(f"bucket {resource.spec.bucket!r} does not exist (yet); retrying with backoff")
    return None


def identity_of(answer: dict[str, Any]) -> str | None:
    """An object's identity from a HeadObject or PutObject answer: its ETag, and its
    version id in a versioned bucket (``"<etag> <version>"``); what tells the object we
    wrote from one somebody else put at the same key after it (which drops our metadata,
    mark included). None without an ETag."""
    etag = answer.get("ETag")
    if etag is None:
        return None
    version = answer.get("VersionId")
    return f"{etag} {version}" if version and version != "null" else str(etag)


def _etag_in(identity: str | None) -> str | None:
    """The ETag part of an identity (see :func:`identity_of`)."""
    return None if identity is None else identity.split(" ", 1)[0]


async def _head(client: Any, spec: Any) -> dict[str, Any] | None:
    """HeadObject; None when there is no such object."""
    head: dict[str, Any] | None = await read_or_none(
        "HeadObject", spec.bucket, lambda: client.head_object(Bucket=spec.bucket, Key=spec.key), _MISSING
    )
    return head


async def observe_object(
    client: Any, resource: reconcile.Resource[Any, Any], part_size: int
) -> reconcile.Observation:
    """HeadObject: existence, owner, ETag and headers; no download."""
    spec = resource.spec
    head = await _head(client, spec)
    if head is None:
        # (A missing bucket answers 404 too; the PutObject that follows says
        # NoSuchBucket, and the condition says the bucket does not exist yet.)
        return reconcile.Observation(exists=False)
    metadata = dict(head.get("Metadata") or {})
    owner = metadata.pop(OWNER_METADATA, None)
    stored_digest = metadata.pop(DIGEST_METADATA, None)
    data = body_of(spec)
    found: dict[str, Any] = {
        "etag": head.get("ETag"),
        "size": head.get("ContentLength"),
        "contentType": head.get("ContentType"),
        "cacheControl": head.get("CacheControl"),
        "metadata": dict(sorted(metadata.items())),
        "versionId": head.get("VersionId"),
    }
    differences = []
    same = (
        stored_digest == digest_of(data)
        if stored_digest is not None
        else head.get("ETag") == etag_of(data, part_size)  # an object from before the digest
    )
    if not same:
        differences.append(
            f"content: {head.get('ContentLength')} bytes -> {len(data)} bytes (digest differs)"
        )
    if head.get("ContentType") != content_type_of(spec):
        differences.append(f"contentType: {head.get('ContentType')!r} -> {content_type_of(spec)!r}")
    if (head.get("CacheControl") or None) != spec.cache_control:
        differences.append(f"cacheControl: {head.get('CacheControl')!r} -> {spec.cache_control!r}")
    if metadata != dict(spec.metadata):
        differences.append("metadata differs")
    if owner is None:
        # Ours only by the identity recorded (the engine's rule): the mark is put back.
        differences.append("owner mark: missing")
    content_differs = bool(differences)
    if spec.tags is not None:
        with s3_errors("GetObjectTagging", spec.bucket):
            answer = await client.get_object_tagging(Bucket=spec.bucket, Key=spec.key)
        tags = {tag["Key"]: tag["Value"] for tag in answer.get("TagSet", [])}
        found["tags"] = dict(sorted(tags.items()))
        if tags != spec.tags:
            differences.append("tags differ")
    found["contentDiffers"] = content_differs
    return reconcile.Observation.present(
        differences,
        observed=found,
        owner=owner,
        # (Every write changes it: for a marked object only the mark says whose it is.)
        identity=identity_of(head) if owner is None else None,
    )


async def update_object(
    client: Any, resource: reconcile.Resource[Any, Any], observation: reconcile.Observation, part_size: int
) -> reconcile.Observation:
    """Upload again when the bytes or headers differ; when only the tags do, put the tags.
    Returns the observation that holds after."""
    spec = resource.spec
    if observation.observed.get("contentDiffers", True):
        return await put_object(client, resource, create=False, part_size=part_size)
    tag_set = [{"Key": k, "Value": v} for k, v in sorted((spec.tags or {}).items())]
    with s3_errors("PutObjectTagging", spec.bucket):
        await client.put_object_tagging(Bucket=spec.bucket, Key=spec.key, Tagging={"TagSet": tag_set})
    found = {**observation.observed, "tags": dict(sorted((spec.tags or {}).items()))}
    return reconcile.Observation(exists=True, observed=found, owner=resource.metadata.uid)


async def put_object(
    client: Any, resource: reconcile.Resource[Any, Any], *, create: bool, part_size: int
) -> reconcile.Observation:
    """PutObject with the bytes, the headers and the owner mark; returns the observation
    that holds after (from PutObject's answer: its ETag and version). A create is
    conditional (``If-None-Match: *``): when an object is there already it looks, and one
    that is not ours is NotOwned, untouched; one of ours (an interrupted create) is
    written again."""
    spec = resource.spec
    data = body_of(spec)
    arguments: dict[str, Any] = {
        "Bucket": spec.bucket,
        "Key": spec.key,
        "Body": data,
        "ContentType": content_type_of(spec),
        "Metadata": {
            **spec.metadata,
            OWNER_METADATA: resource.metadata.uid,
            DIGEST_METADATA: digest_of(data),
        },
    }
    if spec.cache_control is not None:
        arguments["CacheControl"] = spec.cache_control
    if spec.tags:
        arguments["Tagging"] = urllib.parse.urlencode(sorted(spec.tags.items()))
    try:
        answer = await _put(client, resource, arguments, part_size, only_if_absent=create)
    except _ThereAlreadyError:
        head = await _head(client, spec)
        if head is not None:
            _ensure_ours(resource, head)
        answer = await _put(client, resource, arguments, part_size, only_if_absent=False)
    found: dict[str, Any] = {
        "etag": answer.get("ETag"),
        "size": len(data),
        "contentType": arguments["ContentType"],
        "cacheControl": spec.cache_control,
        "metadata": dict(sorted(spec.metadata.items())),
        "versionId": answer.get("VersionId"),
    }
    if spec.tags is not None:
        found["tags"] = dict(sorted(spec.tags.items()))
    found["contentDiffers"] = False
    return reconcile.Observation(
        exists=True,
        up_to_date=True,
        observed=found,
        owner=resource.metadata.uid,
        identity=identity_of(answer),
    )


def _ensure_ours(resource: reconcile.Resource[Any, Any], head: dict[str, Any]) -> None:
    """NotOwnedError unless the object HeadObject answered about is ``resource``'s."""
    owner = (head.get("Metadata") or {}).get(OWNER_METADATA)
    identity = identity_of(head) if owner is None else None  # (see observe_object)
    ensure_ours(resource, owner, f"object {_where(resource)}", identity)


class _ThereAlreadyError(Exception):
    """A conditional create found an object at the key."""


async def _put(
    client: Any,
    resource: reconcile.Resource[Any, Any],
    arguments: dict[str, Any],
    part_size: int,
    *,
    only_if_absent: bool,
) -> dict[str, Any]:
    """One PutObject (or multipart upload) of ``arguments``; its answer."""
    spec = resource.spec
    condition = {"IfNoneMatch": "*"} if only_if_absent else {}
    with s3_errors("PutObject", spec.bucket):
        try:
            if len(arguments["Body"]) > part_size:
                answer = await _upload_in_parts(client, dict(arguments), part_size, condition)
            else:
                answer = await client.put_object(**arguments, **condition)
        except Exception as exc:
            if only_if_absent and code_of(exc) in ("PreconditionFailed", "412"):
                raise _ThereAlreadyError from exc
            missing = _no_bucket(exc, resource)
            if missing is not None:
                raise missing from exc
            raise
        return answer


async def _upload_in_parts(
    client: Any, arguments: dict[str, Any], part_size: int, condition: dict[str, str]
) -> dict[str, Any]:
    """A multipart upload of ``arguments["Body"]`` in parts of ``part_size`` (aborted on
    failure, so no incomplete upload is left to bill)."""
    data = arguments.pop("Body")
    bucket, key = arguments["Bucket"], arguments["Key"]
    upload = await client.create_multipart_upload(**arguments)
    upload_id = upload["UploadId"]
    try:
        parts = []
        for number, start in enumerate(range(0, len(data), part_size), start=1):
            uploaded = await client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=data[start : start + part_size],
            )
            parts.append({"ETag": uploaded["ETag"], "PartNumber": number})
        answer: dict[str, Any] = await client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **condition
        )
    except BaseException:
        with contextlib.suppress(Exception):
            await client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        raise
    return answer


async def delete_object(client: Any, resource: reconcile.Resource[Any, Any]) -> None:
    """DeleteObject of an object that is ours, and only then: conditional (``If-Match``) on
    the ETag our own last write left (the identity the engine recorded), so an object
    replaced since fails with 412 ("changed since"): then it is looked at again
    (HeadObject), and deleted only if that look proves it ours (our mark, or the identity
    recorded), conditional on what the look saw; anything else is NotOwned, untouched. The
    ETag in ``status.atProvider`` is never used: a poll that found somebody else's object
    records theirs there. A versioned bucket keeps the older versions, as S3 does."""
    spec = resource.spec
    etag = _etag_in(resource.metadata.annotations.get(ANNOTATION_EXTERNAL_IDENTITY))
    for _ in range(2):
        if etag is None:
            head = await _head(client, spec)
            if head is None:
                return
            _ensure_ours(resource, head)
            etag = head.get("ETag")
        with s3_errors("DeleteObject", spec.bucket):
            try:
                await client.delete_object(Bucket=spec.bucket, Key=spec.key, IfMatch=etag)
            except Exception as exc:
                code = code_of(exc)
                if code in ("NoSuchBucket", *_MISSING):
                    return
                if code not in ("PreconditionFailed", "412"):
                    raise
            else:
                return
        etag = None  # changed since it was last seen: look at it again
    message = f"object {_where(resource)} changed while it was being deleted; retrying"
    raise TransientError(message)


async def adopt_object(client: Any, resource: reconcile.Resource[Any, Any]) -> None:
    """Take over an existing object (``reconcile.dev/adopt``): our owner mark added to its
    metadata by a copy onto itself (S3 cannot change an object's metadata in place), its
    bytes, headers, other metadata and tags kept; the next reconcile brings it to the
    spec. Conditional on the ETag just seen, so an object replaced meanwhile is not the
    one marked (the engine tries again)."""
    spec = resource.spec
    head = await _head(client, spec)
    if head is None:
        message = f"object {_where(resource)} to adopt does not exist (any more); retrying"
        raise TransientError(message)
    metadata = {**(head.get("Metadata") or {}), OWNER_METADATA: resource.metadata.uid}
    metadata.pop(DIGEST_METADATA, None)  # (a digest of somebody else's: compare by ETag until our upload)
    headers: dict[str, Any] = {}
    for name in ("ContentType", "CacheControl", "ContentEncoding", "ContentDisposition", "ContentLanguage"):
        if head.get(name):
            headers[name] = head[name]
    with s3_errors("CopyObject", spec.bucket):
        await client.copy_object(
            Bucket=spec.bucket,
            Key=spec.key,
            CopySource={"Bucket": spec.bucket, "Key": spec.key},
            CopySourceIfMatch=head["ETag"],
            MetadataDirective="REPLACE",
            Metadata=metadata,
            **headers,
        )
