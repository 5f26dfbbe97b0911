"""AWS's rules for general-purpose bucket names, checked before anything is sent: the
servers reconcile is tested against (moto, MinIO) do not enforce all of them, and a
bucket created under a name AWS refuses could never be moved there.

The reserved prefixes and suffixes are those of AWS's "General purpose bucket naming
rules" page (``sthree-configurator`` is covered by ``sthree-``), with ``--table-s3``, the
suffix AWS reserves for S3 Tables' table buckets as ``--x-s3`` is for directory buckets.
"Formatted as an IP
address" means four dot-separated groups of digits, whatever their values: AWS refuses
``999.999.999.999`` and ``01.2.3.4`` as well, which no IP parser accepts."""

from __future__ import annotations

import re

__all__ = ["bucket_name_errors"]

_CHARACTERS = re.compile(r"[a-z0-9.-]+")
_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_IP_SHAPED = re.compile(r"[0-9]+(?:\.[0-9]+){3}")
_MIN, _MAX = 3, 63


def bucket_name_errors(name: str) -> list[str]:
    """Every rule ``name`` breaks, in words (empty when it is a valid bucket name)."""
    reasons = []
    if not _MIN <= len(name) <= _MAX:
        reasons.append(f"must be 3 to 63 characters long (it is {len(name)})")
    if not _CHARACTERS.fullmatch(name):
        reasons.append("may hold only lowercase letters, digits, dots and hyphens")
    if name and not (name[0].isalnum() and name[0].isascii() and name[-1].isalnum() and name[-1].isascii()):
        reasons.append("must begin and end with a letter or a digit")
    if ".." in name:
        reasons.append('must not hold two dots in a row ("..")')
    if _IP_SHAPED.fullmatch(name):
        reasons.append("must not be formatted as an IP address")
    reasons.extend(f'must not begin with "{p}" (reserved by AWS)' for p in _PREFIXES if name.startswith(p))
    reasons.extend(f'must not end with "{s}" (reserved by AWS)' for s in _SUFFIXES if name.endswith(s))
    return reasons
