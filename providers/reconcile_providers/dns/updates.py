"""UPDATE messages (RFC 2136) written as bytes, and signed with dnspython's TSIG.

A change adds its prerequisites and updates to an :class:`Update` with the calls of
``dns.update.UpdateMessage`` (``absent``, ``present``, ``add``, ``replace``, ``delete``),
which writes each as the RR it stands for: a few ``struct`` packs, where
``UpdateMessage`` hashes every rdata into the set of its RRset and renders the message
again through its renderer (a third of the engine's CPU in converging a zone's record
sets went there). The semantics are dnspython's:

* the prerequisite section is a set: an RR written twice (two changes in one message
  pinning the same ownership TXT) goes once, so the RRsets the server compares with
  (value-dependent prerequisites, RFC 2136 section 3.2.5) hold each record once; their
  owner names and rdata are written in canonical form (lower case), so spelling does
  not make two of one;
* updates go in the order made (the server applies them in that order);
* owner names inside the zone are compressed against the zone section's name, the one
  name every RR of the message shares; rdata is written whole (never compressed).

:meth:`Update.to_wire` signs the message with ``dns.tsig.sign`` (what
``Message.to_wire`` does), and returns the MAC the answer's signature is verified with.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import dns.name
import dns.opcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.tsig

from reconcile_providers.dns.layout import FIRST_NAME, HEADER, QUESTION_TAIL, RR_TAIL

__all__ = ["MAX_MESSAGE", "Update"]

#: A DNS message over TCP is at most this long (its two-byte length prefix).
MAX_MESSAGE = 65535
#: Room kept for the TSIG record (key and algorithm names, a MAC of up to 64 bytes).
TSIG_RESERVE = 600
#: Seconds of clock difference the server may allow the signature (dnspython's default).
FUDGE = 300

_ZONE_TAIL = QUESTION_TAIL.pack(dns.rdatatype.SOA, dns.rdataclass.IN)
_FLAGS = dns.opcode.to_flags(dns.opcode.UPDATE)
_IN, _ANY, _NONE = dns.rdataclass.IN, dns.rdataclass.ANY, dns.rdataclass.NONE


class _ByIdentity:
    """Bytes written once per object (names and rdata are immutable, and the same objects
    come every message: the provider caches its names and records), found by the object's
    identity: hashing a ``dns.name.Name`` lowers every label each time, which costs more
    than the bytes. The memo holds the objects, so an identity is never another's."""

    __slots__ = ("_limit", "_memo")

    def __init__(self, limit: int = 65536) -> None:
        self._memo: dict[int, tuple[object, object, bytes]] = {}
        self._limit = limit

    def get(self, thing: object, zone: dns.name.Name, write: Callable[[], bytes]) -> bytes:
        """``thing`` written in an UPDATE of ``zone``."""
        hit = self._memo.get(id(thing))
        if hit is not None and hit[0] is thing and hit[1] is zone:
            return hit[2]
        wire = write()
        if len(self._memo) >= self._limit:
            self._memo.clear()
        self._memo[id(thing)] = (thing, zone, wire)
        return wire


_OWNERS, _CANONICAL_OWNERS, _RDATA = _ByIdentity(), _ByIdentity(), _ByIdentity()


def _owner(name: dns.name.Name, zone: dns.name.Name) -> bytes:
    """``name`` as an owner name in an UPDATE of ``zone`` (once per name object)."""
    return _OWNERS.get(name, zone, lambda: _owner_wire(name, zone))


def _canonical(name: dns.name.Name, zone: dns.name.Name) -> bytes:
    """:func:`_owner` in lower case."""
    return _CANONICAL_OWNERS.get(name, zone, lambda: _owner_wire(name.canonicalize(), zone))


def _rdata(rdata: dns.rdata.Rdata, zone: dns.name.Name) -> bytes:
    """``rdata`` written whole, its relative names completed with ``zone`` (once per
    rdata object)."""

    def write() -> bytes:
        wire = rdata.to_wire(origin=zone)
        assert wire is not None  # (None only when writing into a file)
        return wire

    return _RDATA.get(rdata, zone, write)


def _owner_wire(name: dns.name.Name, zone: dns.name.Name) -> bytes:
    """``name`` as an owner name in an UPDATE of ``zone``: compressed against the zone
    section when inside it; a relative name is the zone's."""
    if not name.is_absolute():
        name = name.derelativize(zone)
    if name.is_subdomain(zone):
        relative = name.labels[: len(name.labels) - len(zone.labels)]
        return b"".join(len(label).to_bytes(1, "big") + label for label in relative) + FIRST_NAME
    wire = name.to_wire()
    assert wire is not None  # (None only when writing into a file)
    return wire


@functools.lru_cache(maxsize=8)
def _type(rdtype: str) -> int:
    return dns.rdatatype.from_text(rdtype)


class Update:
    """One UPDATE message of ``zone``, being written."""

    __slots__ = ("_prerequisites", "_size", "_updates", "_zone_section", "zone")

    def __init__(self, zone: dns.name.Name) -> None:
        self.zone = zone
        self._zone_section = (zone.to_wire() or b"") + _ZONE_TAIL
        #: Prerequisite RRs, each once (a dict keeps the order they came in).
        self._prerequisites: dict[bytes, None] = {}
        self._updates: list[bytes] = []
        self._size = HEADER.size + len(self._zone_section)

    # -- what a change writes (as dns.update.UpdateMessage's calls) ---------------------------

    def absent(self, name: dns.name.Name, rdtype: str | None = None) -> None:
        """Prerequisite: the RRset ``name``/``rdtype`` does not exist; without a type,
        the name holds nothing at all."""
        kind = dns.rdatatype.ANY if rdtype is None else _type(rdtype)
        self._prerequisite(_canonical(name, self.zone) + RR_TAIL.pack(kind, _NONE, 0, 0))

    def present(self, name: dns.name.Name, *what: dns.rdata.Rdata | str) -> None:
        """Prerequisite: the RRset is exactly these records (value-dependent), or, given a
        type's name, that it exists (value-independent); with nothing, that the name
        holds something."""
        owner = _canonical(name, self.zone)
        if not what or isinstance(what[0], str):
            kind = dns.rdatatype.ANY if not what else _type(str(what[0]))
            self._prerequisite(owner + RR_TAIL.pack(kind, _ANY, 0, 0))
            return
        for rdata in what:
            assert isinstance(rdata, dns.rdata.Rdata)
            data = rdata.to_digestable(self.zone)
            self._prerequisite(owner + RR_TAIL.pack(rdata.rdtype, _IN, 0, len(data)) + data)

    def add(self, name: dns.name.Name, ttl: int, *rdatas: dns.rdata.Rdata) -> None:
        """Update: add these records."""
        owner = _owner(name, self.zone)
        for rdata in rdatas:
            data = _rdata(rdata, self.zone)
            self._update(owner + RR_TAIL.pack(rdata.rdtype, _IN, ttl, len(data)) + data)

    def replace(self, name: dns.name.Name, ttl: int, *rdatas: dns.rdata.Rdata) -> None:
        """Update: the RRset of these records' type becomes exactly them."""
        owner = _owner(name, self.zone)
        self._update(owner + RR_TAIL.pack(rdatas[0].rdtype, _ANY, 0, 0))
        self.add(name, ttl, *rdatas)

    def delete(self, name: dns.name.Name, what: dns.rdata.Rdata | str | None = None) -> None:
        """Update: delete one record (an rdata), an RRset (a type's name), or everything
        at the name (nothing)."""
        owner = _owner(name, self.zone)
        if isinstance(what, dns.rdata.Rdata):
            data = _rdata(what, self.zone)
            self._update(owner + RR_TAIL.pack(what.rdtype, _NONE, 0, len(data)) + data)
            return
        kind = dns.rdatatype.ANY if what is None else _type(what)
        self._update(owner + RR_TAIL.pack(kind, _ANY, 0, 0))

    # -- the message ------------------------------------------------------------------------

    @property
    def prerequisites(self) -> int:
        """RRs in the prerequisite section."""
        return len(self._prerequisites)

    @property
    def updates(self) -> int:
        """RRs in the update section."""
        return len(self._updates)

    @property
    def size(self) -> int:
        """Bytes so far, the signature aside."""
        return self._size

    def checkpoint(self) -> tuple[int, int, int]:
        """Where the message stands, for :meth:`rollback`."""
        return len(self._prerequisites), len(self._updates), self._size

    def rollback(self, point: tuple[int, int, int]) -> None:
        """Take back what was written since :meth:`checkpoint` gave ``point``."""
        prerequisites, updates, self._size = point
        if len(self._prerequisites) > prerequisites:
            self._prerequisites = dict.fromkeys(list(self._prerequisites)[:prerequisites])
        del self._updates[updates:]

    def _prerequisite(self, rr: bytes) -> None:
        if rr not in self._prerequisites:
            self._prerequisites[rr] = None
            self._size += len(rr)

    def _update(self, rr: bytes) -> None:
        self._updates.append(rr)
        self._size += len(rr)

    def to_wire(self, qid: int, key: dns.tsig.Key, now: int | None = None) -> tuple[bytes, bytes]:
        """The message, signed with ``key`` (``now``: the signing time, seconds since the
        epoch; the clock's by default), and its MAC (what the answer is signed with)."""
        counts = (1, len(self._prerequisites), len(self._updates))
        body = b"".join((self._zone_section, *self._prerequisites, *self._updates))
        # dnspython's TSIG code is untyped: what it returns is typed here.
        template = dns.rdtypes.ANY.TSIG.TSIG(  # type: ignore[no-untyped-call]
            dns.rdataclass.ANY, dns.rdatatype.TSIG, key.algorithm, 0, FUDGE, b"", qid, 0, b""
        )
        signing = int(time.time()) if now is None else now
        unsigned = HEADER.pack(qid, _FLAGS, *counts, 0) + body
        signed = dns.tsig.sign(unsigned, key, template, signing, b"")  # type: ignore[no-untyped-call]
        tsig: dns.rdata.Rdata = signed[0]
        mac: bytes = signed[0].mac
        data = tsig.to_wire()
        key_name = key.name.to_wire()
        assert data is not None
        assert key_name is not None
        record = key_name + RR_TAIL.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(data)) + data
        return HEADER.pack(qid, _FLAGS, *counts, 1) + body + record, mac
