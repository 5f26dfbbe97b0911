r"""Just enough of Kubernetes' protobuf encoding to read the self-reviews kubectl sends.

client-go sends the built-in types (``SelfSubjectAccessReview`` and friends) as
``application/vnd.kubernetes.protobuf`` and does not fall back to JSON on a 415; it accepts
a JSON answer. So the reviews' bodies are read here: the ``k8s\0`` envelope (a
``runtime.Unknown`` whose field 2 holds the object's bytes), then the object's fields by
number, as the review module asks for them (:func:`message_fields`). Only length-delimited
and varint fields are read; fixed-size ones are skipped by their size; any other wire
type (the deprecated groups) is a 400, as is a field running past the end of its message
or a varint longer than ten bytes. The reader never recurses and copies no more than the
body holds; the review module bounds the body (:data:`MAX_REVIEW_BYTES`).
"""

from __future__ import annotations

from reconcile.http.errors import ApiError

__all__ = ["MAX_REVIEW_BYTES", "PROTOBUF", "message_fields", "unwrap"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
#: The largest body of a review (kubectl's are a few hundred bytes): reading 3 MiB of
#: tiny fields would hold the event loop for seconds.
MAX_REVIEW_BYTES = 64 * 1024
_MAGIC = b"k8s\x00"
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if shift > 63:  # noqa: PLR2004 - a varint has at most 10 bytes
            raise ApiError(400, "the protobuf body has a varint longer than 10 bytes")
        if at >= len(data):
            raise ApiError(400, "the protobuf body is truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def message_fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of one message, by number (the last of a repeated one)."""
    fields: dict[int, bytes] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, at = _varint(data, at)
        elif wire == _LENGTH:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ApiError(400, "the protobuf body is truncated")
            fields[number] = data[at : at + size]
            at += size
        elif wire in {_FIXED64, _FIXED32}:
            at += 8 if wire == _FIXED64 else 4
            if at > len(data):
                raise ApiError(400, "the protobuf body is truncated")
        else:
            raise ApiError(400, f"the protobuf body has a field of unknown wire type {wire}")
    return fields


def unwrap(body: bytes) -> bytes:
    """The object's own bytes inside Kubernetes' protobuf envelope."""
    if not body.startswith(_MAGIC):
        raise ApiError(400, "the protobuf body lacks Kubernetes' k8s\\0 prefix")
    return message_fields(body[len(_MAGIC) :]).get(2, b"")
