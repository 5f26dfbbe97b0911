"""A bucket's subresources (its default encryption, public-access block, policy, and
lifecycle and CORS rules): read from S3 into the form ``status.atProvider`` reports, the
declared ones in that form, and the rules put back to the spec."""

from __future__ import annotations

import json
from typing import Any

from reconcile_providers.s3.failing import read_or_none, s3_errors
from reconcile_providers.s3.rules import (
    cors_from_s3,
    cors_to_s3,
    lifecycle_from_s3,
    lifecycle_to_s3,
    normal_cors,
    normal_lifecycle,
)

__all__ = [
    "BLOCK_FIELDS",
    "block_body",
    "encryption_body",
    "matches",
    "read_cors",
    "read_encryption",
    "read_lifecycle",
    "read_policy",
    "read_public_access_block",
    "settle_rules",
]


#: The public-access switches: the spec's attribute, the document's key (what
#: ``status.atProvider`` reports) and S3's name.
BLOCK_FIELDS = (
    ("block_public_acls", "blockPublicAcls", "BlockPublicAcls"),
    ("ignore_public_acls", "ignorePublicAcls", "IgnorePublicAcls"),
    ("block_public_policy", "blockPublicPolicy", "BlockPublicPolicy"),
    ("restrict_public_buckets", "restrictPublicBuckets", "RestrictPublicBuckets"),
)


def encryption_body(encryption: Any) -> dict[str, Any]:
    """What observe reports for a declared encryption (only the keys declared)."""
    body: dict[str, Any] = {"algorithm": encryption.algorithm}
    if encryption.kms_key_id is not None:
        body["kmsKeyId"] = encryption.kms_key_id
    if encryption.bucket_key is not None:
        body["bucketKey"] = encryption.bucket_key
    return body


def block_body(block: Any) -> dict[str, bool]:
    """What observe reports for a declared public-access block."""
    return {key: bool(getattr(block, attribute)) for attribute, key, _ in BLOCK_FIELDS}


def matches(found: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    """Whether the declared keys have their declared values (undeclared ones are S3's)."""
    return found is not None and all(found.get(key) == value for key, value in wanted.items())


async def read_encryption(client: Any, name: str) -> dict[str, Any] | None:
    """The bucket's default encryption as observe reports it; None when it has none."""
    answer = await read_or_none(
        "GetBucketEncryption",
        name,
        lambda: client.get_bucket_encryption(Bucket=name),
        ("ServerSideEncryptionConfigurationNotFoundError",),
    )
    if answer is None:
        return None
    rules = answer.get("ServerSideEncryptionConfiguration", {}).get("Rules", [])
    if not rules:
        return None
    default = rules[0].get("ApplyServerSideEncryptionByDefault", {})
    found: dict[str, Any] = {"algorithm": default.get("SSEAlgorithm")}
    if default.get("KMSMasterKeyID"):
        found["kmsKeyId"] = default["KMSMasterKeyID"]
    if "BucketKeyEnabled" in rules[0]:
        found["bucketKey"] = bool(rules[0]["BucketKeyEnabled"])
    return found


async def read_lifecycle(client: Any, name: str) -> list[dict[str, Any]]:
    """The bucket's lifecycle rules in the spec's form; [] when it has none."""
    answer = await read_or_none(
        "GetBucketLifecycleConfiguration",
        name,
        lambda: client.get_bucket_lifecycle_configuration(Bucket=name),
        ("NoSuchLifecycleConfiguration",),
    )
    if answer is None:
        return []
    return lifecycle_from_s3(answer.get("Rules", []))


async def read_cors(client: Any, name: str) -> list[dict[str, Any]]:
    """The bucket's CORS rules in the spec's form; [] when it has none."""
    answer = await read_or_none(
        "GetBucketCors", name, lambda: client.get_bucket_cors(Bucket=name), ("NoSuchCORSConfiguration",)
    )
    if answer is None:
        return []
    return cors_from_s3(answer.get("CORSRules", []))


async def read_policy(client: Any, name: str) -> dict[str, Any] | None:
    """The bucket's policy document; None when it has none (or it is not a JSON object)."""
    answer = await read_or_none(
        "GetBucketPolicy", name, lambda: client.get_bucket_policy(Bucket=name), ("NoSuchBucketPolicy",)
    )
    if answer is None:
        return None
    try:
        document = json.loads(answer.get("Policy") or "null")
    except ValueError:
        return None  # not JSON: differs from any declared document
    return document if isinstance(document, dict) else None


async def read_public_access_block(client: Any, name: str) -> dict[str, bool] | None:
    """The bucket's public-access block as observe reports it; None when it has none."""
    answer = await read_or_none(
        "GetPublicAccessBlock",
        name,
        lambda: client.get_public_access_block(Bucket=name),
        ("NoSuchPublicAccessBlockConfiguration",),
    )
    if answer is None:
        return None
    found = answer.get("PublicAccessBlockConfiguration", {})
    return {key: bool(found.get(aws, False)) for _, key, aws in BLOCK_FIELDS}


async def settle_rules(client: Any, spec: Any, observed: dict[str, Any], name: str) -> None:
    """Lifecycle and CORS rules to the spec ([] removes them)."""
    rules = spec.lifecycle_rules
    if rules is not None and observed.get("lifecycleRules") != normal_lifecycle(rules):
        with s3_errors("PutBucketLifecycleConfiguration", name):
            if rules:
                await client.put_bucket_lifecycle_configuration(
                    Bucket=name, LifecycleConfiguration={"Rules": lifecycle_to_s3(rules)}
                )
            else:
                await client.delete_bucket_lifecycle(Bucket=name)
    cors = spec.cors_rules
    if cors is not None and observed.get("corsRules") != normal_cors(cors):
        with s3_errors("PutBucketCors", name):
            if cors:
                await client.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": cors_to_s3(cors)})
            else:
                await client.delete_bucket_cors(Bucket=name)
