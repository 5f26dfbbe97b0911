"""Ownership marks: the TXT records that say which record sets are ours, signed so that
only this store can make one.

A record set's mark lives at ``<owner_prefix>.<name>`` (``_reconcile.www.example.test.``),
except a delegation's: an NS record set below the zone's apex is a zone cut, and
everything below the cut is the child zone's (occluded: the server answers a query for
it with a referral, and never the TXT), so its mark lives at
``<first label>.<owner_prefix>.<rest of the name>`` (``sub._reconcile.example.test.``
for ``sub.example.test.``), beside the cut rather than under it (:func:`mark_name_of`,
the one place that says where). One string per record set of ours at that name,
``heritage=reconcile,owner=<store identity>,type=<TYPE>,uid=<uid>,mac=<32 hex digits>``.
The text alone proves nothing: the store's identity is in every mark anybody can read,
and a uid is in every status. ``mac`` is an HMAC-SHA256, truncated to 128 bits, of the
zone, the name, the type, the uid and the owner under the store's secret (made once with
the store, kept only in it, handed over by ``bind_store``): a mark copied from elsewhere,
moved to another name or typed by somebody who knows the rest is not this store's, and a
record set that carries only such a mark is not ours (NotOwned; ``adopt`` takes it over).

Marks written before they were signed (no ``mac``) are no longer proof either: they were
exactly what anybody could write (through a RecordSet named ``_reconcile.victim``, or
with nsupdate), and accepting one would accept the forgery it cannot be told from. A
record set marked that way is NotOwned until adopted; the update after the adoption
removes the old line.

Nothing but marks is written inside the ownership namespace: a name with a label equal
to the prefix is refused at admission and by the client (see
:func:`reconcile_providers.dns.records.inside_namespace`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Iterator, Sequence

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TXT
import dns.zone

from reconcile_providers.dns.records import absolute_name, zone_name

__all__ = [
    "MAC_BYTES",
    "fields_of",
    "mark_name_of",
    "marked_by",
    "owner_in",
    "signed_in_zone",
    "signed_mark",
    "stale_difference",
    "stale_lines",
    "subject_of",
    "text_of",
    "txt",
    "verifies",
]

#: Bytes of the HMAC kept in a mark (128 bits: a forger's guess is hopeless).
MAC_BYTES = 16


@functools.lru_cache(maxsize=65536)
def subject_of(zone: str, name: str) -> tuple[str, str]:
    """The zone and the absolute name of a spec's record set as the MAC covers them:
    canonical text (lower case, absolute)."""
    return (
        zone_name(zone).canonicalize().to_text(),
        absolute_name(zone, name).canonicalize().to_text(),
    )


def _mac(key: bytes, subject: tuple[str, str], rtype: str, uid: str, owner: str) -> str:
    zone, name = subject
    message = f"reconcile-mark-v1\n{zone}\n{name}\n{rtype.upper()}\n{uid}\n{owner}".encode()
    return hmac.digest(key, message, hashlib.sha256)[:MAC_BYTES].hex()


@functools.lru_cache(maxsize=65536)
def signed_mark(key: bytes, owner: str, subject: tuple[str, str], rtype: str, uid: str) -> str:
    """The mark of the record set ``subject`` (its zone and absolute name, canonical:
    :func:`subject_of`) of type ``rtype``, for the resource ``uid``, signed with ``key``
    (cached: every write and every observe of the record set asks for it)."""
    mac = _mac(key, subject, rtype, uid, owner)
    return f"heritage=reconcile,owner={owner},type={rtype},uid={uid},mac={mac}"


def verifies(key: bytes, fields: dict[str, str], subject: tuple[str, str]) -> bool:
    """Whether a mark's ``fields``, found at the mark name of ``subject`` (a zone and an
    absolute name, canonical text), were signed with ``key``."""
    if fields.get("heritage") != "reconcile" or "mac" not in fields:
        return False
    expected = _mac(key, subject, fields.get("type", ""), fields.get("uid", ""), fields.get("owner", ""))
    return hmac.compare_digest(expected, fields["mac"])


@functools.lru_cache(maxsize=65536)
def mark_name_of(prefix: str, zone: str, name: str, rtype: str) -> dns.name.Name:
    """Where the ownership mark of the record set ``name``/``rtype`` of ``zone`` lives:
    ``<prefix>.<name>``, or ``<first label>.<prefix>.<rest>`` for a delegation (NS below
    the apex), whose own name's subtree is occluded (cached: the same object every time,
    as :func:`absolute_name` is, so an UPDATE writes it once)."""
    owner = absolute_name(zone, name)
    if rtype.upper() == "NS" and owner != zone_name(zone):
        return dns.name.Name((owner.labels[0], prefix.encode(), *owner.labels[1:]))
    return dns.name.Name((prefix.encode(), *owner.labels))


def marked_by(prefix: str, mark: dns.name.Name) -> dns.name.Name | None:
    """The record set name a mark at ``mark`` may stand for (the inverse of
    :func:`mark_name_of`: the prefix first, or second for a delegation's); None when
    ``mark`` is no mark's name. Which type a line there may name is checked with
    :func:`mark_name_of` (a delegation's line at ``<prefix>.<name>`` is not where its
    mark lives)."""
    label = prefix.encode().lower()
    labels = [part.lower() for part in mark.labels[:2]]
    if len(mark.labels) >= 2 and labels[0] == label:  # noqa: PLR2004 - a label and the root
        return dns.name.Name(mark.labels[1:])
    if len(mark.labels) >= 3 and labels[1] == label:  # noqa: PLR2004 - two labels and the root
        return dns.name.Name((mark.labels[0], *mark.labels[2:]))
    return None


@functools.lru_cache(maxsize=65536)
def txt(text: str) -> dns.rdata.Rdata:
    """A TXT record of one string (cached, as records are)."""
    return dns.rdtypes.ANY.TXT.TXT(dns.rdataclass.IN, dns.rdatatype.TXT, [text.encode()])


def text_of(rdata: dns.rdata.Rdata) -> str:
    """A TXT record's strings, joined."""
    return b"".join(getattr(rdata, "strings", ())).decode(errors="replace")


def fields_of(text: str) -> dict[str, str]:
    """The ``key=value`` fields of a mark's text."""
    return dict(part.split("=", 1) for part in text.split(",") if "=" in part)


def owner_in(
    key: bytes,
    current: str,
    subject: tuple[str, str],
    rtype: str,
    uid: str,
    *,
    lines: Sequence[dns.rdata.Rdata],
) -> str | None:
    """Whose the record set ``subject``/``rtype`` is, by the ``lines`` of its mark:
    ``uid`` when its signed line (``current``) or another line naming it that ``key``
    signed is among them, else the uid of another line ``key`` signed for the type (a
    resource of this store that is not this one). A line ``key`` did not sign proves
    nothing: it is reported as ``<uid> without this store's signature``, which is no
    resource's uid (the record set is NotOwned, never ours); None when no line is for
    the type."""
    signed, unsigned = [], []
    for rdata in lines:
        text = text_of(rdata)
        if text == current:
            return uid  # (the common case: our own line, nothing to parse or sign)
        fields = fields_of(text)
        if fields.get("heritage") != "reconcile" or fields.get("type") != rtype:
            continue
        if verifies(key, fields, subject):
            signed.append(fields.get("uid", ""))
        else:
            unsigned.append(fields.get("uid", "") or "?")
    if uid in signed:
        return uid
    if signed:
        return signed[0]
    return f"{unsigned[0]} without this store's signature" if unsigned else None


def stale_lines(
    current: str, rtype: str, uid: str, lines: Sequence[dns.rdata.Rdata]
) -> list[dns.rdata.Rdata]:
    """The ``lines`` that name the resource ``uid`` and ``rtype`` but are not its signed
    line ``current`` (written under another owner, before marks were signed, or typed by
    somebody): the update or delete of the record set removes them."""
    stale = []
    for rdata in lines:
        text = text_of(rdata)
        if text == current:
            continue  # (the common case: our own line, nothing to parse)
        fields = fields_of(text)
        if fields.get("heritage") == "reconcile" and fields.get("uid") == uid and fields.get("type") == rtype:
            stale.append(rdata)
    return stale


def stale_difference(key: bytes, subject: tuple[str, str], line: dns.rdata.Rdata, owner: str) -> str:
    """How observe's diff says that a stale line goes."""
    fields = fields_of(text_of(line))
    if verifies(key, fields, subject):
        return f"ownership mark owner {fields.get('owner', '')} -> {owner}"
    return "an ownership mark line for this uid not signed by this store removed"


def signed_in_zone(
    key: bytes, copy: dns.zone.Zone, zone: str, prefix: str
) -> Iterator[tuple[dns.name.Name, dict[str, str], str]]:
    """Every mark line in a transferred ``zone`` that ``key`` signed, found where the mark
    of its record set lives (:func:`mark_name_of`: a line elsewhere is one observe never
    reads): the record set's name, the line's fields and its text (a line naming this
    store that it did not sign is not one)."""
    for relative, node in copy.nodes.items():
        name = relative.derelativize(copy.origin or dns.name.root)
        rdataset = node.get_rdataset(dns.rdataclass.IN, dns.rdatatype.TXT)
        target = None if rdataset is None else marked_by(prefix, name)
        if rdataset is None or target is None:
            continue
        subject = (zone, target.canonicalize().to_text())
        for rdata in rdataset:
            text = text_of(rdata)
            fields = fields_of(text)
            if (
                verifies(key, fields, subject)
                and mark_name_of(prefix, zone, subject[1], fields.get("type", "")) == name
            ):
                yield target, fields, text
