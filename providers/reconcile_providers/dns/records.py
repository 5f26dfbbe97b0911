"""The ``RecordSet`` kind (``dns.reconcile.dev/v1``): the records of one name and type in
one zone, kept on an authoritative server through RFC 2136 dynamic updates.

Identity is ``(zone, name, type)``, deterministic and immutable. Records are written in
presentation format (``"10 mail.example.test."`` for MX) and checked with dnspython's
own rdata parsers at admission, relative names completed with the zone; a TXT value that
is not quoted is one string of text, split into 255-byte strings as DNS needs. A CNAME
holds exactly one record and never sits at the zone's apex.

dnspython is imported where a record set is checked, not with the kind: every command
that lists the installed kinds (``reconcile version``, ``get``) loads this module.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

import reconcile
from reconcile.errors import FieldError

if TYPE_CHECKING:
    import dns.name
    import dns.rdata

__all__ = [
    "API_VERSION",
    "RECORD_SET",
    "TYPES",
    "RecordSetSpec",
    "absolute_name",
    "canonical_records",
    "canonical_spec_records",
    "fqdn_text",
    "inside_namespace",
    "parse_record",
    "possible_cuts",
    "relative_text",
    "spec_wires",
    "zone_name",
]

API_VERSION = "dns.reconcile.dev/v1"
#: Where ownership marks live by default (the provider config's ``owner_prefix``).
OWNER_PREFIX = "_reconcile"
TYPES = ("A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA", "NS", "PTR")
_MAX_TTL = 2**31 - 1
_TXT_CHUNK = 255
#: Bytes a record set's records may take on the wire.
MAX_RRSET = 30000
#: A relative name of plain labels (letters, digits, hyphens, underscores; a leading
#: wildcard): dnspython writes it back exactly as given, so its canonical spelling is
#: its lower case, and completed with the zone it is always inside it.
_PLAIN_RELATIVE = re.compile(r"(?:\*\.)?[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
#: A zone of plain labels, absolute: dnspython writes it back exactly as given.
_PLAIN_ZONE = re.compile(r"(?:[A-Za-z0-9_-]+\.)+")


@attrs.frozen
class RecordSetSpec:
    """One RRset: a name and a type in a zone, its TTL and its records."""

    zone: str = reconcile.doc_field("The zone, absolute (`example.test.`). Immutable.")
    name: str = reconcile.doc_field(
        "The owner name: relative to the zone (`www`), absolute with a trailing dot, or `@` for the "
        "apex. Immutable."
    )
    type: str = reconcile.doc_field("The record type. Immutable.", values=TYPES)
    records: list[str] = reconcile.doc_field(  # noqa: RUF009 - an attrs field
        "The records in presentation format (`192.0.2.1`, `10 mail.example.test.`); relative names are "
        "completed with the zone; an unquoted TXT value is one text, split into 255-byte strings. At most "
        "30,000 bytes of records on the wire."
    )
    ttl: int = reconcile.doc_field("Time to live, in seconds.", default=300)


@functools.lru_cache(maxsize=4096)
def zone_name(zone: str) -> dns.name.Name:
    """``zone`` as a name (cached: a few zones are asked for by every record set)."""
    import dns.name  # noqa: PLC0415 - see the module's docstring

    return dns.name.from_text(zone)


@functools.lru_cache(maxsize=65536)
def absolute_name(zone: str, name: str) -> dns.name.Name:
    """The absolute owner name ``name`` stands for in ``zone`` (cached: names are
    immutable, and every observe and write asks)."""
    import dns.name  # noqa: PLC0415 - see the module's docstring

    origin = zone_name(zone)
    if name == "@":
        return origin
    return dns.name.from_text(name, origin=origin)


@functools.lru_cache(maxsize=4096)
def _zone_text(zone: str) -> str:
    """``zone``'s canonical spelling (lower case, as dnspython writes it)."""
    return zone_name(zone).to_text().lower()


def relative_text(zone: str, name: str) -> str:
    """``name``'s canonical spelling relative to ``zone``: lower case, ``@`` for the apex
    (``name`` is inside ``zone``: validation saw to it)."""
    if name == "@":
        return name
    if _PLAIN_RELATIVE.fullmatch(name):
        return name.lower()
    origin, owner = zone_name(zone), absolute_name(zone, name)
    return "@" if owner == origin else owner.relativize(origin).to_text().lower()


@functools.lru_cache(maxsize=65536)
def parse_record(rdtype: str, text: str, zone: str) -> dns.rdata.Rdata:
    """One record of ``rdtype`` from its presentation text (SyntaxError-like dnspython
    errors propagate; cached: rdata are immutable)."""
    import dns.rdata  # noqa: PLC0415 - see the module's docstring
    import dns.rdataclass  # noqa: PLC0415
    import dns.rdatatype  # noqa: PLC0415

    origin = zone_name(zone)
    if rdtype == "TXT" and not text.startswith('"'):
        raw = text.encode()
        chunks = [raw[i : i + _TXT_CHUNK] for i in range(0, len(raw), _TXT_CHUNK)] or [b""]
        text = " ".join(_quoted(chunk) for chunk in chunks)
    return dns.rdata.from_text(
        dns.rdataclass.IN, dns.rdatatype.from_text(rdtype), text, origin=origin, relativize=False
    )


def canonical_records(rdatas: Sequence[dns.rdata.Rdata]) -> list[str]:
    """Records as observe reports them: absolute presentation text, sorted."""
    return sorted(r.to_text(relativize=False) for r in rdatas)


@functools.lru_cache(maxsize=65536)
def canonical_spec_records(rdtype: str, records: tuple[str, ...], zone: str) -> tuple[str, ...]:
    """A spec's records as observe reports them (cached: every observe compares with them)."""
    return tuple(canonical_records([parse_record(rdtype, text, zone) for text in records]))


@functools.lru_cache(maxsize=65536)
def spec_wires(rdtype: str, records: tuple[str, ...], zone: str) -> frozenset[bytes]:
    """A spec's records in wire form (cached: a read back and every observe of a type
    without names in its records compare an answer's bytes with them)."""
    return frozenset(parse_record(rdtype, text, zone).to_wire() or b"" for text in records)


@functools.lru_cache(maxsize=65536)
def fqdn_text(zone: str, name: str) -> str:
    """The absolute owner name's text, as dnspython writes it (cached, as the name is)."""
    if name == "@" and _PLAIN_ZONE.fullmatch(zone):
        return zone
    if _PLAIN_RELATIVE.fullmatch(name) and _PLAIN_ZONE.fullmatch(zone):
        return f"{name}.{zone}"
    return absolute_name(zone, name).to_text()


@functools.lru_cache(maxsize=65536)
def possible_cuts(zone: str, name: str, rtype: str) -> tuple[dns.name.Name, ...]:
    """Where a delegation (NS below the apex: a zone cut) would occlude the record set
    ``name``/``rtype`` of ``zone``: its name and every name between it and the apex (its
    own name not for an NS record set, which is the delegation itself). Cached: the same
    objects each time, so an UPDATE writes each once."""
    origin, owner = zone_name(zone), absolute_name(zone, name)
    cuts = []
    while owner != origin and owner.is_subdomain(origin):
        cuts.append(owner)
        owner = owner.parent()
    if rtype.upper() == "NS" and cuts:
        del cuts[0]
    return tuple(cuts)


def inside_namespace(prefix: str, owner: dns.name.Name) -> bool:
    """Whether ``owner`` lies in the ownership namespace of ``prefix``: one of its labels
    is the prefix (DNS compares labels without case). Marks live at ``<prefix>.<name>``
    (a delegation's at ``<first label>.<prefix>.<rest>``); a record set there, or below,
    could hold or shadow one, so nothing but the marks the client writes itself goes
    there."""
    label = prefix.encode().lower()
    return any(part.lower() == label for part in owner.labels)


def _namespace_error(prefix: str, name: str) -> FieldError:
    return FieldError(
        "name",
        f"{name!r} is inside the ownership namespace ({prefix}): reconcile keeps its ownership marks "
        "there and never writes anything else",
    )


def _quoted(chunk: bytes) -> str:
    escaped = "".join(
        chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\{b:03d}"  # noqa: PLR2004 - printable ASCII
        for b in chunk
    )
    return f'"{escaped}"'


def validate_record_set(spec: RecordSetSpec) -> Iterator[FieldError]:
    """Names that fit the zone, a known type, records that parse as that type, and the
    CNAME rules."""
    import dns.exception  # noqa: PLC0415 - see the module's docstring

    zone = _zone_or_none(spec.zone)
    if zone is None:
        yield FieldError("zone", f"{spec.zone!r} is not an absolute DNS name (it ends with a dot)")
        return
    rtype = spec.type.upper()
    if rtype not in TYPES:
        yield FieldError("type", f"must be one of {', '.join(TYPES)}, not {spec.type!r}")
    try:
        owner = absolute_name(spec.zone, spec.name)
    except dns.exception.DNSException as exc:
        yield FieldError("name", f"{spec.name!r} is not a DNS name: {exc}")
        return
    # (A relative name is completed with the zone: inside it by construction.)
    if spec.name.endswith(".") and not owner.is_subdomain(zone):
        yield FieldError("name", f"{spec.name!r} is outside the zone {spec.zone}")
    if inside_namespace(OWNER_PREFIX, owner):
        yield _namespace_error(OWNER_PREFIX, spec.name)
    if not 0 <= spec.ttl <= _MAX_TTL:
        yield FieldError("ttl", f"must be between 0 and {_MAX_TTL}")
    if not spec.records:
        yield FieldError("records", "at least one record (delete the RecordSet to remove them all)")
    if rtype not in TYPES:
        return
    if rtype == "CNAME":
        if owner == zone:
            yield FieldError(
                "type", "a CNAME cannot be at the zone's apex (the SOA and NS records are there)"
            )
        if len(spec.records) > 1:
            yield FieldError(
                "records", "a CNAME holds exactly one record (a name with a CNAME has no other data)"
            )
    yield from _too_large(rtype, spec)
    seen: set[dns.rdata.Rdata] = set()
    for index, text in enumerate(spec.records):
        try:
            rdata = parse_record(rtype, text, spec.zone)
        except (dns.exception.DNSException, ValueError) as exc:
            yield FieldError(f"records[{index}]", f"not a valid {rtype} record: {exc}")
            continue
        if len(spec.records) == 1:
            break  # (one record: nothing to be a duplicate of, and no wire form to hash)
        count = len(seen)
        seen.add(rdata)  # (hashed once: an Rdata's hash renders its wire form)
        if len(seen) == count:
            yield FieldError(f"records[{index}]", f"duplicate record {text!r}")


def _too_large(rtype: str, spec: RecordSetSpec) -> Iterator[FieldError]:
    """An RRset larger than :data:`MAX_RRSET` bytes: an update carries a record set as
    observed (its prerequisite) and as wanted in one DNS message of 64 KiB at most."""
    # A record's wire form is at most its text, its names completed with the zone, and
    # its strings' length bytes: only a record set near the limit is measured.
    if sum(len(text) * 256 // 255 + len(spec.zone) + 4 for text in spec.records) <= MAX_RRSET:
        return
    import dns.exception  # noqa: PLC0415 - see the module's docstring

    size = 0
    for text in spec.records:
        with contextlib.suppress(dns.exception.DNSException, ValueError):  # (reported per record)
            size += len(parse_record(rtype, text, spec.zone).to_wire() or b"")
    if size > MAX_RRSET:
        yield FieldError(
            "records",
            f"{size} bytes of records: at most {MAX_RRSET} (an update carries them twice, as observed and "
            "as wanted, in one DNS message of 64 KiB)",
        )


def _zone_or_none(zone: str) -> dns.name.Name | None:
    import dns.exception  # noqa: PLC0415 - see the module's docstring

    if not zone.endswith("."):
        return None
    try:
        return zone_name(zone)
    except dns.exception.DNSException:
        return None


def admit_record_set(spec: RecordSetSpec, context: reconcile.AdmissionContext) -> RecordSetSpec:
    """Canonical spelling (so the identity is one per RRset): the zone and name in lower
    case, the name relative to the zone (``@`` for the apex), the type upper case; and a
    zone no configured server serves is refused (when the provider config names servers),
    and so is a name inside the configured ownership namespace (``owner_prefix``; the
    default's is refused by validation, config or not)."""
    zone = _zone_text(spec.zone)
    name = relative_text(spec.zone, spec.name)
    canonical = RecordSetSpec(zone, name, spec.type.upper(), spec.records, spec.ttl)
    prefix: Any = context.config.get("owner_prefix")
    if isinstance(prefix, str) and prefix and inside_namespace(prefix, absolute_name(spec.zone, spec.name)):
        raise reconcile.InvalidError([_namespace_error(prefix, spec.name)])
    servers: Any = context.config.get("servers")
    if isinstance(servers, list) and servers:
        served = {
            str(z).lower() for server in servers if isinstance(server, dict) for z in server.get("zones", ())
        }
        if zone not in served:
            reason = f"no server in the dns provider config serves {zone} (it serves {sorted(served)})"
            raise reconcile.InvalidError([FieldError("zone", reason)])
    return canonical


_CNAME_RULE = "a CNAME cannot share its name with other data (RFC 1034)"


def cname_conflicts(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """What a record set cannot coexist with: at a CNAME's name, a record set of any
    other type; at any other record set's name, a CNAME (specs as admission stores them:
    the type in upper case, the name absolute)."""
    rtype = str(spec.get("type", "")).upper()
    others = [t for t in TYPES if t != "CNAME"] if rtype == "CNAME" else ["CNAME"]
    for other in others:
        yield "type", {**spec, "type": other}, _CNAME_RULE


RECORD_SET = reconcile.Kind(
    API_VERSION,
    "RecordSet",
    RecordSetSpec,
    reconcile.ManagedStatus,
    validate=validate_record_set,
    admit=admit_record_set,
    behaviour=reconcile.Behaviour.EXCLUSIVE_MARKED_ON_CREATE,
    immutable=("zone", "name", "type"),
    identity=("zone", "name", "type"),
    conflicts=cname_conflicts,
    short_names=("rrset", "recordset"),
    # Changes to a zone share UPDATE messages: many reconciles in flight fill them (the
    # client's max_connections bounds what goes on the wire at once).
    workers=256,
)
