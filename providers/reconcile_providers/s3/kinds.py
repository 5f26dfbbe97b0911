"""The S3 kinds (``s3.reconcile.dev/v1``): ``Bucket`` so far.

A Bucket's identity is its name (``spec.bucket``, defaulting to ``metadata.name``), so it
is deterministic: a crash between CreateBucket and recording it is repaired by observing,
never by a second bucket. The name and the region are immutable (renaming would orphan
the old bucket).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

import reconcile
from reconcile import doc_field
from reconcile.errors import FieldError, NotOwnedError
from reconcile_providers.s3.naming import bucket_name_errors

__all__ = [
    "API_VERSION",
    "BUCKET",
    "OWNER_TAG",
    "VERSIONING_VALUES",
    "BucketSpec",
    "CorsRule",
    "Encryption",
    "LifecycleRule",
    "PublicAccessBlock",
    "ensure_ours",
]

API_VERSION = "s3.reconcile.dev/v1"
#: The tag that marks a bucket as made by (and belonging to) one resource: its uid.
OWNER_TAG = "reconcile.dev/owner"
VERSIONING_VALUES = ("Enabled", "Suspended")


def ensure_ours(
    resource: reconcile.Resource[Any, Any], owner: str | None, what: str, identity: str | None = None
) -> None:
    """NotOwnedError, saying whose ``what`` is, unless it is ``resource``'s by the
    engine's one rule (:func:`reconcile.ours`: its mark, or for an unmarked one the
    identity recorded at our last create or update)."""
    if not reconcile.ours(resource, owner, identity):
        whose = f"marked {owner}" if owner else "not marked by reconcile, and not the one we made"
        raise NotOwnedError(f"{what} exists and is not ours ({whose}); it is left alone")


#: S3's limits on a bucket's tag set.
MAX_TAGS, MAX_KEY, MAX_VALUE = 50, 128, 256
_REGION_PARTS = 3


ALGORITHMS = ("AES256", "aws:kms")


@attrs.frozen
class Encryption:
    """Default server-side encryption of new objects."""

    algorithm: str = doc_field("AES256 or aws:kms.", values=ALGORITHMS)
    kms_key_id: str | None = doc_field(
        "The KMS key (aws:kms only; default: the AWS managed key).", default=None
    )
    bucket_key: bool | None = doc_field(
        "Use an S3 Bucket Key (fewer KMS calls); absent: S3's default.", default=None
    )


@attrs.frozen
class PublicAccessBlock:
    """The bucket's four public-access switches (all on unless declared otherwise)."""

    block_public_acls: bool = doc_field("Refuse requests that grant public ACLs.", default=True)
    ignore_public_acls: bool = doc_field("Ignore public ACLs.", default=True)
    block_public_policy: bool = doc_field("Refuse bucket policies that grant public access.", default=True)
    restrict_public_buckets: bool = doc_field(
        "Restrict access to a bucket with a public policy.", default=True
    )


@attrs.frozen
class LifecycleRule:
    """One lifecycle rule: which objects (prefix and/or tags) and what happens to them."""

    id: str = doc_field("The rule's name (unique in the bucket).")
    enabled: bool = doc_field("Whether the rule applies.", default=True)
    prefix: str | None = doc_field("Objects whose key starts with this.", default=None)
    tags: dict[str, str] = doc_field("Objects with all these tags.", default=attrs.Factory(dict))  # noqa: RUF009
    expiration_days: int | None = doc_field("Delete current versions after this many days.", default=None)
    noncurrent_expiration_days: int | None = doc_field(
        "Delete noncurrent versions after this many days.", default=None
    )
    abort_incomplete_upload_days: int | None = doc_field(
        "Abort multipart uploads not finished after this many days.", default=None
    )


@attrs.frozen
class CorsRule:
    """One CORS rule."""

    allowed_methods: tuple[str, ...] = doc_field("GET, PUT, POST, DELETE, HEAD.")
    allowed_origins: tuple[str, ...] = doc_field('Origins allowed ("*" for any).')
    allowed_headers: tuple[str, ...] = doc_field("Request headers allowed.", default=())
    expose_headers: tuple[str, ...] = doc_field("Response headers the browser may read.", default=())
    max_age_seconds: int | None = doc_field(
        "How long a browser may cache the preflight answer.", default=None
    )


CORS_METHODS = ("GET", "PUT", "POST", "DELETE", "HEAD")


@attrs.frozen
class BucketSpec:
    """An S3 bucket and the settings reconcile keeps at their declared values."""

    bucket: str | None = doc_field("The bucket's name (default: metadata.name). Immutable.", default=None)
    region: str | None = doc_field(
        "Where it lives (default: the provider config's region). Immutable.", default=None
    )
    versioning: str | None = doc_field(
        "Enabled or Suspended; absent: left as it is (a versioned bucket never becomes unversioned).",
        default=None,
        values=VERSIONING_VALUES,
    )
    tags: dict[str, str] = doc_field(  # noqa: RUF009 - an attrs field, its default a Factory
        "The whole tag set, replaced together (50 tags at most).", default=attrs.Factory(dict)
    )
    encryption: Encryption | None = doc_field(  # noqa: RUF009 - an attrs field
        "Default encryption: {algorithm, kmsKeyId?, bucketKey?}; absent: left as it is.", default=None
    )
    public_access_block: PublicAccessBlock | None = doc_field(  # noqa: RUF009 - an attrs field
        "The four public-access switches; absent: left as they are.", default=None
    )
    policy: dict[str, Any] | None = doc_field(  # noqa: RUF009 - an attrs field
        "A bucket policy document (a mapping), compared semantically; absent: left as it is.", default=None
    )
    lifecycle_rules: tuple[LifecycleRule, ...] | None = doc_field(
        "Lifecycle rules ([] removes them); absent: left as they are.", default=None
    )
    cors_rules: tuple[CorsRule, ...] | None = doc_field(
        "CORS rules ([] removes them); absent: left as they are.", default=None
    )
    force_destroy: bool = doc_field(
        "Deleting the resource deletes every object version first; without it a non-empty bucket stays.",
        default=False,
    )


def validate_bucket(spec: BucketSpec) -> Iterator[FieldError]:
    """Checks that need only the spec."""
    if spec.bucket is not None:
        yield from (FieldError("bucket", reason) for reason in bucket_name_errors(spec.bucket))
    if spec.region is not None and not _plausible_region(spec.region):
        yield FieldError("region", f"{spec.region!r} is not a region name (like eu-west-1)")
    if spec.versioning is not None and spec.versioning not in VERSIONING_VALUES:
        allowed = ", ".join(VERSIONING_VALUES)
        yield FieldError("versioning", f"must be one of {allowed} (or absent), not {spec.versioning!r}")
    yield from _tag_errors(spec.tags)
    if spec.policy is not None:
        if "Statement" not in spec.policy:
            yield FieldError("policy", "a policy document needs a Statement")
        elif not isinstance(spec.policy["Statement"], list | dict):
            yield FieldError("policy.Statement", "expected a list of statements (or one statement)")
    yield from _lifecycle_errors(spec.lifecycle_rules or ())
    for index, cors in enumerate(spec.cors_rules or ()):
        if not cors.allowed_methods:
            yield FieldError(f"corsRules[{index}].allowedMethods", "at least one method")
        for method in cors.allowed_methods:
            if method not in CORS_METHODS:
                yield FieldError(
                    f"corsRules[{index}].allowedMethods",
                    f"{method!r} is not one of {', '.join(CORS_METHODS)}",
                )
        if not cors.allowed_origins:
            yield FieldError(f"corsRules[{index}].allowedOrigins", "at least one origin")
        if cors.max_age_seconds is not None and cors.max_age_seconds < 0:
            yield FieldError(f"corsRules[{index}].maxAgeSeconds", "must be >= 0")
    if spec.encryption is not None:
        if spec.encryption.algorithm not in ALGORITHMS:
            allowed = ", ".join(ALGORITHMS)
            yield FieldError(
                "encryption.algorithm", f"must be one of {allowed}, not {spec.encryption.algorithm!r}"
            )
        elif spec.encryption.kms_key_id is not None and spec.encryption.algorithm != "aws:kms":
            yield FieldError("encryption.kmsKeyId", "is for algorithm aws:kms only")


#: A lifecycle rule's actions, as a document spells them (in the order of ``actions`` below).
_ACTION_FIELDS = ("expirationDays", "noncurrentExpirationDays", "abortIncompleteUploadDays")


def _lifecycle_errors(rules: Sequence[LifecycleRule]) -> Iterator[FieldError]:
    seen: set[str] = set()
    for index, rule in enumerate(rules):
        where = f"lifecycleRules[{index}]"
        if not rule.id or len(rule.id) > 255:  # noqa: PLR2004 - S3's limit on a rule id
            yield FieldError(f"{where}.id", "a rule id is 1 to 255 characters")
        if rule.id in seen:
            yield FieldError(f"{where}.id", f"duplicate rule id {rule.id!r}")
        seen.add(rule.id)
        actions = (rule.expiration_days, rule.noncurrent_expiration_days, rule.abort_incomplete_upload_days)
        if all(days is None for days in actions):
            yield FieldError(
                where,
                "a rule needs an action: expirationDays, noncurrentExpirationDays "
                "or abortIncompleteUploadDays",
            )
        for name, days in zip(_ACTION_FIELDS, actions, strict=True):
            if days is not None and days < 1:
                yield FieldError(f"{where}.{name}", "must be >= 1")


def _plausible_region(region: str) -> bool:
    parts = region.split("-")
    return (
        len(parts) >= _REGION_PARTS
        and all(p.isascii() and p.isalnum() and p == p.lower() for p in parts)
        and parts[-1].isdigit()
    )


def _tag_errors(tags: Mapping[str, str]) -> Iterator[FieldError]:
    if len(tags) > MAX_TAGS - 1:  # one is ours: the owner tag
        yield FieldError("tags", f"at most {MAX_TAGS - 1} tags (S3 allows {MAX_TAGS}, one is the owner tag)")
    for key, value in tags.items():
        if not key or len(key) > MAX_KEY:
            yield FieldError(f"tags[{key!r}]", f"a tag key is 1 to {MAX_KEY} characters")
        if len(value) > MAX_VALUE:
            yield FieldError(f"tags[{key!r}]", f"a tag value is at most {MAX_VALUE} characters")
        if key == OWNER_TAG or key.startswith("aws:"):
            yield FieldError(f"tags[{key!r}]", "is reserved (reconcile's owner tag, or AWS's aws: prefix)")


def admit_bucket(spec: BucketSpec, context: reconcile.AdmissionContext) -> BucketSpec:
    """Default the name to ``metadata.name`` (and check it), the region to the config's."""
    errors: list[FieldError] = []
    if spec.bucket is None and context.name is not None:
        spec = attrs.evolve(spec, bucket=context.name)
        errors += [
            FieldError("bucket", f"metadata.name as a bucket name {r}")
            for r in bucket_name_errors(context.name)
        ]
    region = context.config.get("region")
    if spec.region is None and isinstance(region, str):
        spec = attrs.evolve(spec, region=region)
    if errors:
        raise reconcile.InvalidError(errors)
    return spec


BUCKET = reconcile.Kind(
    API_VERSION,
    "Bucket",
    BucketSpec,
    reconcile.ManagedStatus,
    validate=validate_bucket,
    admit=admit_bucket,
    behaviour=reconcile.Behaviour.EXCLUSIVE,
    immutable=("bucket", "region"),
    identity=("bucket",),
    short_names=("bkt",),
)
