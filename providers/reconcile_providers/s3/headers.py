"""What an HTTP header can carry to S3, checked at admission.

An Object's ``contentType``, ``cacheControl`` and user ``metadata`` travel as request
headers (``Content-Type``, ``Cache-Control``, ``x-amz-meta-<key>: <value>``). A value
that cannot be sent is refused when it is applied, with the field path, rather than
failing at every reconcile:

* a control character (CR, LF, NUL, DEL...) is refused by the HTTP client before
  anything is sent ("header injection"); a CR/LF would otherwise end the header;
* a character outside ASCII is refused by botocore in metadata ("S3 metadata can only
  contain ASCII characters"), and HTTP gives it no meaning in any header (RFC 9110's
  obsolete text: Latin-1 bytes at best, not the declared string);
* blanks at either end are trimmed by every HTTP hop, so S3 stores a value other than
  the declared one (drift on every poll);
* a metadata key is part of a header name: an RFC 9110 token (letters, digits and
  ``!#$%&'*+-.^_`|~``); a space or a colon would change the request's meaning (a ``:``
  starts the value, a space breaks the signature).
"""

from __future__ import annotations

import string
from collections.abc import Iterator

__all__ = ["header_value_errors", "metadata_key_errors"]

_VISIBLE = frozenset(string.printable) - frozenset("\t\n\r\x0b\x0c")
_TOKEN = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")


def _describe(character: str) -> str:
    return f"{character!r} (U+{ord(character):04X})"


def header_value_errors(value: str) -> Iterator[str]:
    """Why ``value`` cannot travel as an HTTP header value to S3 (nothing when it can):
    printable ASCII only, no blank at either end."""
    bad = next((c for c in value if c not in _VISIBLE), None)
    if bad is not None:
        what = "a control character" if bad.isascii() else "a character outside ASCII"
        yield (
            f"holds {what}, {_describe(bad)}: an HTTP header value is printable ASCII "
            "(encode other text, e.g. RFC 2047 or percent-encoding)"
        )
    elif value != value.strip(" "):
        yield "begins or ends with a blank, which HTTP trims (S3 would store another value)"


def metadata_key_errors(key: str) -> Iterator[str]:
    """Why ``key`` cannot name user metadata (``x-amz-meta-<key>``), nothing when it can."""
    bad = next((c for c in key if c not in _TOKEN), None)
    if bad is not None:
        yield (
            f"holds {_describe(bad)}: a metadata key is part of a header name, "
            "letters, digits and !#$%&'*+-.^_`|~ only"
        )
