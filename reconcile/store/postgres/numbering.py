"""Provisional revisions, and how they become real: pass 1 of a PostgreSQL commit
(:mod:`.committing`) runs the batch's mutations before the commit has its revisions,
numbering its events from a provisional base far above any real revision; the bodies
are serialized with those numbers, and pass 2's statement puts the real ones in their
text on the server by replacing the pair ``"resourceVersion":`` and the provisional
number, exactly as :func:`restamped` does here for the results and the in-memory window.

That replacement is only right if the pair appears once in the text: the base is
random (:func:`provisional_base`), so no body holds it by chance, and :func:`stamp`
refuses (:class:`Unstampable`) a body that holds it anyway; the commit then runs again
from another base.
"""

from __future__ import annotations

import secrets
from typing import Any

from reconcile.errors import FieldError, InvalidError
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import MAX_OBJECT_BYTES, Body, StoredObject, WriteResult
from reconcile.store.encoding import dumps

__all__ = [
    "PROVISIONAL",
    "Unstampable",
    "Written",
    "made_real",
    "provisional_base",
    "restamped",
    "stamp",
    "too_large",
]


#: Pass 1 numbers events from here (plus a random salt: :func:`provisional_base`): far
#: above any revision a store reaches, so a provisional number is never taken for a real one.
PROVISIONAL = 1 << 62


def _salt() -> int:
    """Where an attempt's provisional numbers start above :data:`PROVISIONAL`: at random,
    so that no body holds one by chance (the server finds it in the text to stamp the
    real revision: see :func:`stamp`)."""
    return secrets.randbits(32)


def provisional_base() -> int:
    """Where an attempt's provisional numbers start."""
    return PROVISIONAL + _salt()


class Unstampable(Exception):  # noqa: N818 - a signal to the commit, never escapes it
    """A body holds its provisional revision's pair more than once."""


#: A text of at most this many characters is within the limit, however it encodes (a
#: character takes at most 4 bytes of UTF-8): most are, measured without encoding them.
_SHORT = MAX_OBJECT_BYTES // 4


def too_large(text: str, metadata: dict[str, Any], allowance: int = 0) -> bool:
    """Whether a snapshot is over the limit (``allowance``: bytes its revision will take
    fewer than now). An object being deleted never is: deletion must always finish."""
    if len(text) - allowance <= _SHORT or metadata.get("deletionTimestamp") is not None:
        return False
    return len(text.encode("utf-8")) - allowance > MAX_OBJECT_BYTES


def stamp(body: Body, revision: int, real: int) -> str:
    """Stamp a provisional ``revision``, refusing a body too large once it carries its
    ``real`` revision (the expected one: digits are what matter). The server puts the
    real one in the text by replacing the pair ``"resourceVersion":`` and ``revision``:
    a body that holds that pair elsewhere too (the odds of a random base: nil, unless
    one was copied from a failed write's body) runs the batch again, from another base."""
    metadata = body.setdefault("metadata", {})
    metadata["resourceVersion"] = revision
    text = dumps(body)
    if text.count(f'"resourceVersion":{revision}') != 1:
        raise Unstampable
    if len(text) > _SHORT and too_large(text, metadata, len(str(revision)) - len(str(real))):
        metadata["resourceVersion"] = None
        reason = f"object is larger than {MAX_OBJECT_BYTES} bytes when serialized"
        raise InvalidError([FieldError("", reason)])
    return text


#: A write's result in pass 1, its revisions still provisional: the revision of its
#: last event, its key, the object's uid and revision and body after it (None: absent,
#: or only noted), and the object before it (what a write of notes returns). Made a
#: :class:`WriteResult` once, in pass 2 (:func:`made_real`): a tuple costs less than
#: results made twice.
Written = tuple[int, ObjectKey, str, int, Body | None, StoredObject | None]


def restamped(text: str, provisional: int, real: int) -> str:
    """Pass 1's ``text`` carrying its ``real`` revision: the provisional number's digits
    replaced where they follow ``"resourceVersion":``, as the server replaces them in
    the text it stores (:data:`~.statements.WRITE`)."""
    return text.replace(f'"resourceVersion":{provisional}', f'"resourceVersion":{real}')


def made_real(result: WriteResult | Written | BaseException, shift: int) -> WriteResult | BaseException:
    """A result of pass 1 with its provisional revisions made real."""
    if not isinstance(result, tuple):
        return result  # wrote nothing (no provisional revision), or failed
    last, key, uid, stamped, body, current = result
    if body is not None:
        real = stamped + shift
        body["metadata"]["resourceVersion"] = real
        return WriteResult(last + shift, StoredObject(key, uid, real, body), written=True)
    if current is not None and current.resource_version >= PROVISIONAL:
        real = current.resource_version + shift
        current.body.setdefault("metadata", {})["resourceVersion"] = real
        current = StoredObject(current.key, current.uid, real, current.body)
    return WriteResult(last + shift, current, written=True)
