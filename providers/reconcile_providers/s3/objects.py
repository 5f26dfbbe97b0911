"""The ``Object`` kind: one object of a bucket, its bytes and its headers.

Identity is ``(bucket, key)``, deterministic. An object reconcile wrote carries the user
metadata ``reconcile-owner: <uid>``; an object without it (or with another uid) is never
overwritten or deleted. Objects are compared by their MD5 ETag (single-part uploads), so
a no-change pass is one HeadObject and downloads nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
from collections.abc import Iterator, Sequence

import attrs

import reconcile
from reconcile import doc_field as _field
from reconcile.errors import FieldError, PermanentError
from reconcile_providers.files.kinds import resolve_source
from reconcile_providers.files.sourcing import SourceError, fingerprint, read_source
from reconcile_providers.s3.headers import header_value_errors, metadata_key_errors
from reconcile_providers.s3.kinds import API_VERSION
from reconcile_providers.s3.naming import bucket_name_errors

__all__ = [
    "DIGEST_METADATA",
    "KINDS",
    "OBJECT",
    "OWNER_METADATA",
    "ObjectSpec",
    "body_of",
    "content_type_of",
    "digest_of",
    "etag_of",
]

#: The user metadata (``x-amz-meta-reconcile-owner``) that marks an object as ours.
OWNER_METADATA = "reconcile-owner"
#: The SHA-256 of the bytes we uploaded, stored with them: compared instead of the ETag,
#: which is not an MD5 under SSE-KMS or SSE-C, nor for uploads in parts.
DIGEST_METADATA = "reconcile-sha256"
_MAX_KEY_BYTES = 1024
_MAX_METADATA_BYTES = 2048
_MAX_OBJECT_TAGS = 10


@attrs.frozen
class ObjectSpec:
    """An object in a bucket: exactly one of ``content``, ``contentBase64`` and ``source``."""

    bucket: str = _field("The bucket's name. Immutable.")
    key: str = _field("The object's key (1-1024 bytes of UTF-8). Immutable.")
    content: str | None = _field("The object's text (UTF-8).", default=None)
    content_base64: str | None = _field("The object's bytes, base64-encoded.", default=None)
    source: str | None = _field(
        "A local file whose bytes it holds (relative: to the manifest), confined to the source roots.",
        default=None,
    )
    content_type: str | None = _field("Content-Type (default: guessed from the key's suffix).", default=None)
    cache_control: str | None = _field("Cache-Control.", default=None)
    metadata: dict[str, str] = _field("User metadata (x-amz-meta-*).", default=attrs.Factory(dict))  # noqa: RUF009
    tags: dict[str, str] | None = _field(  # noqa: RUF009 - an attrs field
        "The object's tags (10 at most); absent: left as they are.", default=None
    )
    #: Drift is described by sizes and digests only, never by content; a source is
    #: fingerprinted by inode and time rather than by digest.
    sensitive: bool = _field("Keep the content out of drift messages.", default=False)
    #: Filled in at admission: the source root the source was read from, and what it held.
    source_root: str | None = _field("Filled in at admission: the source's root.", default=None)
    source_digest: str | None = _field("Filled in at admission: the source's fingerprint.", default=None)


def validate_object(spec: ObjectSpec) -> Iterator[FieldError]:
    """Checks that need only the spec."""
    yield from (FieldError("bucket", reason) for reason in bucket_name_errors(spec.bucket))
    size = len(spec.key.encode())
    if not 1 <= size <= _MAX_KEY_BYTES:
        yield FieldError("key", f"must be 1 to {_MAX_KEY_BYTES} bytes of UTF-8 (it is {size})")
    given = [value for value in (spec.content, spec.content_base64, spec.source) if value is not None]
    if len(given) != 1:
        yield FieldError("content", "give exactly one of content, contentBase64 and source")
    if spec.content_base64 is not None:
        try:
            base64.b64decode(spec.content_base64, validate=True)
        except (binascii.Error, ValueError):
            yield FieldError("contentBase64", "is not valid base64")
    for field, value in (("contentType", spec.content_type), ("cacheControl", spec.cache_control)):
        yield from (FieldError(field, reason) for reason in header_value_errors(value or ""))
    for name, value in spec.metadata.items():
        if not name or not name.isascii() or name.lower() != name or name.startswith("reconcile-"):
            yield FieldError(
                f"metadata[{name!r}]", "keys are lower-case ASCII (reconcile-* keys are reserved)"
            )
        else:
            yield from (FieldError(f"metadata[{name!r}]", reason) for reason in metadata_key_errors(name))
        yield from (
            FieldError(f"metadata[{name!r}]", f"the value {reason}") for reason in header_value_errors(value)
        )
    if spec.tags is not None and len(spec.tags) > _MAX_OBJECT_TAGS:
        yield FieldError("tags", f"at most {_MAX_OBJECT_TAGS} tags on an object (S3's limit)")
    for key, value in (spec.tags or {}).items():
        if not key or len(key) > 128 or len(value) > 256:  # noqa: PLR2004 - S3's tag limits
            yield FieldError(f"tags[{key!r}]", "a tag key is 1 to 128 characters, a value at most 256")
    if sum(len(k) + len(v) for k, v in spec.metadata.items()) > _MAX_METADATA_BYTES:
        yield FieldError("metadata", f"at most {_MAX_METADATA_BYTES} bytes of user metadata (S3's limit)")


def admit_object(spec: ObjectSpec, context: reconcile.AdmissionContext) -> ObjectSpec:
    """Confine, read and fingerprint the source (as the files provider does)."""
    if spec.source is None:
        return attrs.evolve(spec, source_root=None, source_digest=None)
    source, root, digest = resolve_source(spec.source, context, sensitive=spec.sensitive)
    return attrs.evolve(spec, source=source, source_root=root, source_digest=digest)


def body_of(spec: ObjectSpec) -> bytes:
    """The object's bytes; from a source, only while it still holds what was applied
    (PermanentError otherwise: apply again to publish an edited source)."""
    if spec.source is not None:
        assert spec.source_root is not None
        try:
            data, info = read_source(spec.source, spec.source_root)
        except SourceError as exc:
            raise PermanentError(f"source {spec.source}: {exc}") from exc
        if fingerprint(data, info, sensitive=spec.sensitive) != spec.source_digest:
            message = (
                f"source {spec.source} changed since it was applied: apply the manifest again to publish it"
            )
            raise PermanentError(message)
        return data
    if spec.content_base64 is not None:
        return base64.b64decode(spec.content_base64)
    return (spec.content or "").encode()


def digest_of(data: bytes) -> str:
    """What :data:`DIGEST_METADATA` holds for ``data``."""
    return hashlib.sha256(data).hexdigest()


def etag_of(data: bytes, part_size: int = 64 * 1024 * 1024) -> str:
    """The ETag S3 gives ``data`` as this provider uploads it: the MD5 of a single-part
    upload, or for one in parts of ``part_size`` the MD5 of the parts' MD5s with the
    number of parts (``"...-3"``). Computed from the declared bytes, so a multipart
    object is compared without a download and without a digest stored anywhere."""
    if len(data) <= part_size:
        return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
    digests = [
        hashlib.md5(data[start : start + part_size], usedforsecurity=False).digest()
        for start in range(0, len(data), part_size)
    ]
    return f'"{hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"'


def content_type_of(spec: ObjectSpec) -> str:
    """The declared Content-Type, or the one the key's suffix suggests."""
    if spec.content_type:
        return spec.content_type
    guessed, _ = mimetypes.guess_type(spec.key)
    return guessed or "binary/octet-stream"


OBJECT = reconcile.Kind(
    API_VERSION,
    "Object",
    ObjectSpec,
    reconcile.ManagedStatus,
    validate=validate_object,
    admit=admit_object,
    behaviour=reconcile.Behaviour.EXCLUSIVE_MARKED_ON_CREATE,
    immutable=("bucket", "key"),
    identity=("bucket", "key"),
    short_names=("obj",),
)
KINDS: Sequence[reconcile.Kind] = (OBJECT,)
