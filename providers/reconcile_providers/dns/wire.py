"""Talking to an authoritative server: direct queries (TCP, no recursion) and TSIG-signed
UPDATE messages (RFC 2136), with the server's answers turned into the engine's errors.

A query answer must be authoritative (AA): a server that is not authoritative for the
zone would otherwise hand out a cache's view. The one exception is a delegation inside
the zone (an NS record set below the apex: a zone cut): the zone's primary answers a
query for that NS RRset with a referral (no AA, the RRset in the authority section), and
that referral is read as the zone's data; anything else at or below the cut is occluded,
which :class:`OccludedError` says. Prerequisite failures (YXDOMAIN, YXRRSET,
NXDOMAIN, NXRRSET) are :class:`PrerequisiteFailed`, which the batcher splits and the
client turns into a ConflictError; a message the server will not apply as a whole
(REFUSED, SERVFAIL, NOTIMP, FORMERR) is a :class:`MessageFailedError`, which the batcher
splits too, so that only the change the server objects to fails; a refused signature or
key names the TSIG error and the key, never the secret.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import dns.asyncquery
import dns.entropy
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.wire
import dns.xfr
import dns.zone

from reconcile.errors import PermanentError, ReconcileError, TransientError
from reconcile_providers.dns.config import Server
from reconcile_providers.dns.layout import FIRST_NAME, HEADER, QUESTION_TAIL, RR_TAIL
from reconcile_providers.dns.streams import Connections, where

if TYPE_CHECKING:
    from reconcile_providers.dns.updates import Update

__all__ = [
    "Answer",
    "Connections",
    "MalformedAnswerError",
    "MessageFailedError",
    "OccludedError",
    "PrerequisiteFailedError",
    "UpdateFailedError",
    "UpdateRefusedError",
    "query",
    "query_message",
    "read_answer",
    "send_update",
    "transfer",
]

_PREREQUISITE = {dns.rcode.YXDOMAIN, dns.rcode.YXRRSET, dns.rcode.NXDOMAIN, dns.rcode.NXRRSET}
#: Answers to a whole UPDATE message, maybe for one change in it (REFUSED aside).
_MESSAGE_FAILED = {dns.rcode.SERVFAIL, dns.rcode.NOTIMP, dns.rcode.FORMERR}


class MalformedAnswerError(Exception):
    """A server's answer that is not the answer to the message sent, or is malformed."""


class PrerequisiteFailedError(Exception):
    """An UPDATE's prerequisites did not hold: somebody changed the zone meanwhile."""

    def __init__(self, rcode: str) -> None:
        super().__init__(rcode)
        self.rcode = rcode


class MessageFailedError(ReconcileError):
    """The server answered an UPDATE with REFUSED, SERVFAIL, NOTIMP or FORMERR: it applied
    none of the message, maybe because of one change in it (a name its update-policy does
    not grant, a record it will not take). The batcher sends a combined message's changes
    again one by one; each class below says what the caller does when its change alone
    is answered so."""

    def __init__(self, message: str, rcode: str) -> None:
        super().__init__(message)
        self.rcode = rcode


class UpdateRefusedError(MessageFailedError, PermanentError):
    """REFUSED: the update-policy does not grant the change (or the zone's checks refuse
    it): permanent."""


class UpdateFailedError(MessageFailedError, TransientError):
    """SERVFAIL, NOTIMP, FORMERR: the server failed the message: transient."""


#: Types whose records hold no names: their wire form is never compressed, so the bytes
#: of an answer's record are the record, comparable as they are.
FLAT_TYPES = frozenset({dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.TXT, dns.rdatatype.CAA})


class Answer:
    """An RRset as the server holds it: its TTL and records. Records of a
    :data:`FLAT_TYPES` type come as their bytes (``wires``) and are parsed when
    ``rdatas`` is first read: a read back that finds the bytes it sent needs no parsing."""

    __slots__ = ("_rdatas", "rdtype", "ttl", "wires")

    def __init__(
        self,
        ttl: int,
        rdatas: tuple[dns.rdata.Rdata, ...] | None = None,
        *,
        rdtype: int = 0,
        wires: tuple[bytes, ...] | None = None,
    ) -> None:
        self.ttl, self.rdtype, self.wires = ttl, rdtype, wires
        self._rdatas = rdatas

    @property
    def rdatas(self) -> tuple[dns.rdata.Rdata, ...]:
        """The records, parsed (a record that does not parse: TransientError, as any
        malformed answer)."""
        if self._rdatas is None:
            try:
                self._rdatas = tuple(
                    dns.rdata.from_wire(
                        dns.rdataclass.IN, dns.rdatatype.RdataType(self.rdtype), wire, 0, len(wire)
                    )
                    for wire in self.wires or ()
                )
            except (dns.exception.DNSException, ValueError, IndexError) as exc:
                raise TransientError(f"malformed record in a DNS answer: {exc}") from exc
        return self._rdatas

    def __repr__(self) -> str:
        return f"Answer(ttl={self.ttl}, rdatas={self.rdatas!r})"


_QR, _AA, _OPCODE, _RCODE = 0x8000, 0x0400, 0x7800, 0x000F


def query_message(qid: int, name: dns.name.Name, rdtype: int) -> bytes:
    """A query of ``name``/``rdtype`` (class IN) without recursion, as bytes: what
    ``dns.message.make_query`` with RD cleared and no EDNS makes, without the objects."""
    labels = name.to_wire()
    assert labels is not None  # (None only when writing into a file)
    question = labels + QUESTION_TAIL.pack(rdtype, dns.rdataclass.IN)
    return HEADER.pack(qid, 0, 1, 0, 0, 0) + question


def read_answer(
    wire: bytes, qid: int, name: dns.name.Name, rdtype: int, question: bytes = b""
) -> tuple[dns.rcode.Rcode, bool, Answer | None]:
    """The rcode, the AA flag and the RRset ``name``/``rdtype`` of the answer to the
    query :func:`query_message` made (``question``: that query's question section, its
    bytes after the header); only the header, the question and the answer section are
    read, with dnspython's own wire parsers (names, compression, rdata).
    MalformedAnswerError when it is not the answer to that query or is malformed."""
    try:
        return _read_answer(dns.wire.Parser(wire), qid, name, rdtype, question)
    except (dns.exception.DNSException, struct.error, ValueError, IndexError) as exc:
        raise MalformedAnswerError(f"malformed answer: {exc}") from exc


def _read_answer(
    parser: dns.wire.Parser, qid: int, name: dns.name.Name, rdtype: int, question: bytes
) -> tuple[dns.rcode.Rcode, bool, Answer | None]:
    rid, flags, questions, answers, _, _ = parser.get_struct(HEADER.format)
    if rid != qid or not flags & _QR or flags & _OPCODE:
        raise MalformedAnswerError("not the answer to this query")
    if questions != 1:
        raise MalformedAnswerError("the answer does not repeat the question")
    # A server copies the question as it was sent: byte for byte, it needs no parsing
    # (otherwise it is parsed, and its name compared as DNS compares names).
    if not question or parser.wire[parser.current : parser.current + len(question)] != question:
        asked = dns.name.from_wire_parser(parser)
        if asked != name or parser.get_struct(QUESTION_TAIL.format) != (rdtype, dns.rdataclass.IN):
            raise MalformedAnswerError("the answer is to another question")
    else:
        parser.seek(parser.current + len(question))
    rdatas: list[dns.rdata.Rdata] = []
    flat = rdtype in FLAT_TYPES
    wires: dict[bytes, None] = {}
    ttl = None
    for _ in range(answers):
        if parser.wire[parser.current : parser.current + 2] == FIRST_NAME:
            parser.seek(parser.current + 2)
            ours = True  # the question's name, which is ``name``
        else:
            ours = dns.name.from_wire_parser(parser) == name
        type_, class_, rr_ttl, length = parser.get_struct(RR_TAIL.format)
        if type_ != rdtype or class_ != dns.rdataclass.IN or not ours:
            parser.seek(parser.current + length)  # a CNAME followed, say: not this RRset
            continue
        if flat:  # (a set, as an RRset is: equal bytes are equal records for these types)
            wires[parser.get_bytes(length)] = None
        else:
            with parser.restrict_to(length):
                rdata = dns.rdata.from_wire_parser(class_, type_, parser)
            if rdata not in rdatas:  # an RRset is a set (as dnspython's message parser keeps it)
                rdatas.append(rdata)
        ttl = rr_ttl if ttl is None else min(ttl, rr_ttl)
    if ttl is None:
        found = None
    elif flat:
        found = Answer(ttl, rdtype=rdtype, wires=tuple(wires))
    else:
        found = Answer(ttl, tuple(rdatas), rdtype=rdtype)
    return dns.rcode.Rcode.make(flags & _RCODE), bool(flags & _AA), found


class OccludedError(PermanentError):
    """The name asked for lies at or below a delegation inside the zone (a zone cut: an
    NS record set below the apex): the server holds no data there that it serves, it
    refers the asker to the child zone's servers instead."""


async def query(
    connections: Connections,
    server: Server,
    name: dns.name.Name,
    rdtype: str,
    seconds: float,
    *,
    zone: dns.name.Name | None = None,
) -> Answer | None:
    """The RRset ``name``/``rdtype`` as ``server`` holds it; None when there is none.

    ``zone``: the zone ``server`` is the primary of and ``name`` is in. A referral from it
    (NOERROR, no AA, no answer, an NS RRset in the authority section for a name strictly
    below the apex, at or above ``name``) is a delegation of the zone: its NS RRset is the
    zone's own data when it is exactly what was asked (NS at the cut), and anything else
    at or below the cut is occluded (:class:`OccludedError`). Without ``zone``, or in any
    other shape, an answer without AA is a TransientError (NOTAUTH)."""
    wanted = dns.rdatatype.from_text(rdtype)
    qid = dns.entropy.random_16()
    message = query_message(qid, name, wanted)
    answer = await connections.exchange(server, message, seconds)
    try:
        rcode, authoritative, found = read_answer(answer, qid, name, wanted, message[HEADER.size :])
    except MalformedAnswerError as exc:
        raise TransientError(f"DNS query of {name} {rdtype} to {where(server)} failed: {exc}") from exc
    if rcode not in {dns.rcode.NOERROR, dns.rcode.NXDOMAIN}:
        text = dns.rcode.to_text(rcode)
        raise TransientError(f"DNS server {where(server)} answered {text} to a query of {name} {rdtype}")
    if authoritative:
        return found
    cut = None
    if zone is not None and rcode == dns.rcode.NOERROR and found is None:
        cut = _delegation(answer, name, zone, server)
    if cut is not None:
        if wanted == dns.rdatatype.NS and cut.name == name:
            # The parent's (this zone's) NS RRset of the delegation, answered as a referral.
            return Answer(cut.ttl, tuple(cut), rdtype=wanted)
        position = "at" if cut.name == name else "below"
        raise OccludedError(
            f"{name} is {position} the delegation at {cut.name}: occluded (DNS server {where(server)} "
            f"refers a query for {name} {rdtype} to the delegated zone's servers: at a delegation only "
            "its NS records, and below it nothing, is this zone's data)"
        )
    raise TransientError(
        f"DNS server {where(server)} is not authoritative for {name} (NOTAUTH: its answer is not AA)"
    )


def _delegation(
    answer: bytes, name: dns.name.Name, zone: dns.name.Name, server: Server
) -> dns.rrset.RRset | None:
    """The NS RRset of the referral ``answer`` when it refers ``name`` to a delegation of
    ``zone`` (a cut strictly below the apex, at or above ``name``); None otherwise."""
    try:
        referral = dns.message.from_wire(answer)
    except dns.exception.DNSException as exc:
        raise TransientError(f"DNS query of {name} to {where(server)} failed: {exc}") from exc
    for rrset in referral.authority:
        if (
            rrset.rdtype == dns.rdatatype.NS
            and rrset.rdclass == dns.rdataclass.IN
            and rrset.name != zone
            and rrset.name.is_subdomain(zone)
            and name.is_subdomain(rrset.name)
        ):
            return rrset
    return None


async def send_update(
    connections: Connections,
    server: Server,
    message: Update,
    zone: str,
    key: dns.tsig.Key,
    *,
    seconds: float,
) -> None:
    """Send one UPDATE, signed with ``key``; raise unless the server applied it (NOERROR).
    The answer's signature is verified (a server's TSIG error is named, never the
    secret)."""
    qid = dns.entropy.random_16()
    try:
        wire, mac = message.to_wire(qid, key)
        answer = await connections.exchange(server, wire, seconds)
        response = dns.message.from_wire(answer, keyring=key, request_mac=mac)
    except dns.tsig.PeerBadKey as exc:
        raise TransientError(
            f"DNS server {where(server)} does not know the TSIG key of zone {zone} (BADKEY)"
        ) from exc
    except (dns.tsig.PeerBadSignature, dns.tsig.BadSignature) as exc:
        raise TransientError(
            f"DNS server {where(server)} refused the TSIG signature for zone {zone} (BADSIG: check the "
            "key's secret)"
        ) from exc
    except dns.tsig.PeerBadTime as exc:
        raise TransientError(f"DNS server {where(server)}: BADTIME (check the clocks)") from exc
    except dns.exception.DNSException as exc:
        raise TransientError(f"DNS update of zone {zone} at {where(server)} failed: {exc}") from exc
    if response.id != qid or not response.flags & dns.flags.QR or response.opcode() != dns.opcode.UPDATE:
        msg = f"DNS server {where(server)} answered an update of zone {zone} with another message"
        raise TransientError(msg)
    rcode = response.rcode()
    if rcode == dns.rcode.NOERROR:
        return
    text = dns.rcode.to_text(rcode)
    if rcode in _PREREQUISITE:
        raise PrerequisiteFailedError(text)
    if rcode in {dns.rcode.NOTAUTH, dns.rcode.NOTZONE}:
        raise TransientError(
            f"DNS server {where(server)} answered {text}: it is not authoritative for zone {zone}, or the "
            "update names something outside it"
        )
    if rcode == dns.rcode.REFUSED:
        raise UpdateRefusedError(
            f"DNS server {where(server)} REFUSED the update of zone {zone}: its update-policy does not "
            "grant this key the change",
            text,
        )
    if rcode in _MESSAGE_FAILED:
        raise UpdateFailedError(
            f"DNS server {where(server)} answered {text} to an update of zone {zone}", text
        )
    raise TransientError(f"DNS server {where(server)} answered {text} to an update of zone {zone}")


def same_records(answer: Answer | None, wanted: Sequence[dns.rdata.Rdata], ttl: int) -> bool:
    """Whether the server holds exactly ``wanted`` with ``ttl``."""
    return answer is not None and set(answer.rdatas) == set(wanted) and answer.ttl == ttl


async def transfer(server: Server, zone: str, key: dns.tsig.Key, seconds: float) -> dns.zone.Zone:
    """The whole zone by a TSIG-signed AXFR (over TCP): what lists our ownership marks.
    A server that refuses it (its ``allow-transfer`` does not grant the key) is a
    PermanentError saying so; one that cannot be reached, a TransientError."""
    copy = dns.zone.Zone(zone)
    request, _ = dns.xfr.make_query(
        copy, serial=None, keyring=key, keyname=key.name, keyalgorithm=key.algorithm
    )
    try:
        await dns.asyncquery.inbound_xfr(server.address, copy, request, port=server.port, timeout=seconds)
    except dns.xfr.TransferError as exc:
        text = dns.rcode.to_text(exc.rcode)
        raise PermanentError(
            f"DNS server {where(server)} refused the zone transfer of {zone} ({text}): its allow-transfer "
            "must grant the zone's TSIG key to list what this store owns"
        ) from exc
    except (dns.tsig.PeerBadKey, dns.tsig.PeerBadSignature, dns.tsig.BadSignature) as exc:
        raise PermanentError(
            f"DNS server {where(server)} refused the TSIG key of zone {zone} for a zone transfer "
            "(BADKEY/BADSIG)"
        ) from exc
    except (OSError, EOFError, dns.exception.Timeout) as exc:
        reason = str(exc) or type(exc).__name__
        raise TransientError(f"DNS server {where(server)} is unreachable: {reason}") from exc
    except dns.exception.DNSException as exc:
        raise TransientError(f"zone transfer of {zone} from {where(server)} failed: {exc}") from exc
    return copy
