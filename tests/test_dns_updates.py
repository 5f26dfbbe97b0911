"""UPDATE messages as the dns provider writes them (``reconcile_providers.dns.updates``): each call
the same RRs dnspython's ``UpdateMessage`` sends, read back by dnspython's own parser with
the signature verified; prerequisites once; names compressed against the zone; sending
one over the kept-open streams and the server's answers turned into errors; and the
batcher keeping every message under the 64 KiB a DNS message may hold."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.update
import pytest
from dns_echo import Echo, serving
from helpers import settle
from hypothesis import given, settings
from hypothesis import strategies as st

from reconcile.errors import PermanentError, TransientError
from reconcile_providers.dns.batching import Batcher
from reconcile_providers.dns.streams import Connections
from reconcile_providers.dns.updates import Update
from reconcile_providers.dns.wire import (
    PrerequisiteFailedError,
    UpdateRefusedError,
    query_message,
    send_update,
)

ZONE = dns.name.from_text("example.test.")
KEY = dns.tsig.Key("reconciler-key.", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", dns.tsig.HMAC_SHA256)
WWW = dns.name.from_text("www.example.test.")
MAIL = dns.name.from_text("Mail.Example.Test.")
OUTSIDE = dns.name.from_text("www.other.test.")


def rdata(rtype: str, text: str) -> dns.rdata.Rdata:
    """One record, parsed."""
    return dns.rdata.from_text(dns.rdataclass.IN, rtype, text, origin=ZONE)


def parsed(wire: bytes, key: dns.tsig.Key = KEY) -> dns.update.UpdateMessage:
    """``wire`` read by dnspython, its signature verified with ``key``."""
    message = dns.message.from_wire(wire, keyring=key)
    assert isinstance(message, dns.update.UpdateMessage)
    return message


def dnspythons(edit: Callable[[Any], None]) -> dns.update.UpdateMessage:
    """The same edit made with dnspython's UpdateMessage, through its wire and back."""
    message = dns.update.UpdateMessage(ZONE)
    message.use_tsig(KEY)
    edit(message)
    return parsed(message.to_wire())


def ours(edit: Callable[[Any], None]) -> dns.update.UpdateMessage:
    """The edit written by :class:`Update`, read back by dnspython."""
    update = Update(ZONE)
    edit(update)
    wire, _ = update.to_wire(4321, KEY)
    return parsed(wire)


EDITS: dict[str, Callable[[Any], None]] = {
    "absent": lambda m: (m.absent(WWW, "A"), m.absent(MAIL)),
    "present, value-independent": lambda m: (m.present(WWW, "A"), m.present(MAIL)),
    "present, value-dependent": lambda m: m.present(WWW, rdata("A", "192.0.2.1"), rdata("A", "192.0.2.2")),
    "add": lambda m: (
        m.add(WWW, 300, rdata("A", "192.0.2.1"), rdata("A", "192.0.2.2")),
        m.add(MAIL, 60, rdata("MX", "10 mx.example.test.")),
        m.add(WWW, 300, rdata("TXT", '"a" "b"')),
    ),
    "replace": lambda m: m.replace(WWW, 600, rdata("A", "198.51.100.7")),
    "delete": lambda m: (
        m.delete(WWW, "A"),
        m.delete(MAIL, rdata("MX", "10 mx.example.test.")),
        m.delete(dns.name.from_text("old.example.test.")),
    ),
    "the apex, and a name outside the zone": lambda m: (
        m.add(ZONE, 300, rdata("TXT", '"apex"')),
        m.absent(OUTSIDE, "A"),
        m.add(OUTSIDE, 300, rdata("A", "192.0.2.9")),
    ),
    "a whole change": lambda m: (
        m.absent(WWW, "A"),
        m.absent(WWW, "CNAME"),
        m.add(WWW, 300, rdata("A", "192.0.2.1")),
        m.add(dns.name.from_text("_reconcile.www.example.test."), 300, rdata("TXT", '"heritage=reconcile"')),
    ),
}


class TestUpdate:
    """What :class:`Update` writes."""

    @pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
    def test_the_same_rrs_as_dnspythons_update_message(self, edit: str) -> None:
        """Every call writes the RRs dnspython's own call sends: same zone section,
        prerequisites and updates, read by dnspython's parser; the signature verifies."""
        expected, got = dnspythons(EDITS[edit]), ours(EDITS[edit])
        assert got.zone == expected.zone
        assert got.prerequisite == expected.prerequisite
        assert got.update == expected.update
        assert [rrset.ttl for rrset in got.update] == [rrset.ttl for rrset in expected.update]
        assert got.id == 4321
        assert got.had_tsig

    def test_a_prerequisite_twice_goes_once_whatever_its_spelling(self) -> None:
        """Two changes pinning the same RRset (``www`` and ``WWW``, the same records):
        the server compares with that RRset once, not with each record twice."""
        update = Update(ZONE)
        marks = (rdata("TXT", '"one"'), rdata("TXT", '"two"'))
        update.present(WWW, *marks)
        update.present(dns.name.from_text("WWW.example.test."), *marks)
        update.absent(WWW, "CNAME")
        update.absent(WWW, "CNAME")
        assert update.prerequisites == 3
        message = parsed(update.to_wire(1, KEY)[0])
        records = [(rrset.name, rrset.rdtype, len(rrset)) for rrset in message.prerequisite]
        assert records == [
            (WWW, dns.rdatatype.TXT, 1),
            (WWW, dns.rdatatype.TXT, 1),
            (WWW, dns.rdatatype.CNAME, 0),
        ]

    def test_updates_go_in_the_order_made(self) -> None:
        """A delete after an add is sent after it (the server applies them in order)."""
        update = Update(ZONE)
        update.add(WWW, 300, rdata("A", "192.0.2.1"))
        update.delete(WWW, rdata("A", "192.0.2.1"))
        update.add(WWW, 300, rdata("A", "192.0.2.2"))
        assert update.updates == 3
        message = parsed(update.to_wire(1, KEY)[0])
        sent = [(rrset.deleting, rdata.address) for rrset in message.update for rdata in rrset]
        assert sent == [(None, "192.0.2.1"), (dns.rdataclass.NONE, "192.0.2.1"), (None, "192.0.2.2")]

    def test_names_inside_the_zone_point_at_the_zone_section(self) -> None:
        """``www.example.test.`` is written as ``www`` and a pointer to offset 12."""
        update = Update(ZONE)
        update.add(WWW, 300, rdata("A", "192.0.2.1"))
        wire, _ = update.to_wire(1, KEY)
        assert b"\x03www\xc0\x0c" in wire
        assert wire.count(b"\x07example") == 1

    def test_checkpoint_and_rollback(self) -> None:
        """What was written after a checkpoint is taken back, size included."""
        update = Update(ZONE)
        update.absent(WWW, "A")
        update.add(WWW, 300, rdata("A", "192.0.2.1"))
        point, size = update.checkpoint(), update.size
        update.absent(MAIL, "MX")
        update.absent(WWW, "A")  # (there already: stays after the rollback)
        update.add(MAIL, 60, rdata("MX", "10 mx.example.test."))
        assert update.size > size
        update.rollback(point)
        assert (update.prerequisites, update.updates, update.size) == (1, 1, size)
        message = parsed(update.to_wire(1, KEY)[0])
        assert [rrset.name for rrset in message.update] == [WWW]

    def test_the_signature_is_the_keys(self) -> None:
        """Another secret does not verify it; the MAC returned is the message's."""
        update = Update(ZONE)
        update.absent(WWW, "A")
        wire, mac = update.to_wire(1, KEY)
        assert parsed(wire).mac == mac
        other = dns.tsig.Key(KEY.name, "b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA==", dns.tsig.HMAC_SHA256)
        with pytest.raises(dns.tsig.BadSignature):
            parsed(wire, other)


_NAMES = [
    WWW,
    MAIL,
    ZONE,
    OUTSIDE,
    dns.name.from_text("WWW.example.TEST."),
    dns.name.from_text("a.b.example.test."),
]
_RECORDS = [
    rdata("A", "192.0.2.1"),
    rdata("A", "192.0.2.2"),
    rdata("TXT", '"heritage=reconcile,owner=x"'),
    rdata("TXT", '"a" "b"'),
    rdata("MX", "10 mx.example.test."),
    rdata("MX", "20 MX.Example.Test."),
]
_TYPES = ["A", "TXT", "MX", "CNAME"]
_OPERATION = st.one_of(
    st.tuples(st.just("absent"), st.sampled_from(_NAMES), st.sampled_from([None, *_TYPES])),
    st.tuples(st.just("present"), st.sampled_from(_NAMES), st.sampled_from([None, *_TYPES])),
    st.tuples(st.just("present records"), st.sampled_from(_NAMES), st.sampled_from(_RECORDS)),
    st.tuples(st.just("add"), st.sampled_from(_NAMES), st.sampled_from(_RECORDS)),
    st.tuples(st.just("replace"), st.sampled_from(_NAMES), st.sampled_from(_RECORDS)),
    st.tuples(st.just("delete"), st.sampled_from(_NAMES), st.sampled_from([None, *_TYPES])),
    st.tuples(st.just("delete record"), st.sampled_from(_NAMES), st.sampled_from(_RECORDS)),
)


def _apply(message: Any, operations: list[tuple[str, dns.name.Name, Any]]) -> None:
    for operation, name, what in operations:
        if operation == "absent":
            message.absent(name) if what is None else message.absent(name, what)
        elif operation == "present":
            message.present(name) if what is None else message.present(name, what)
        elif operation == "present records":
            message.present(name, what)
        elif operation in {"add", "replace"}:
            getattr(message, operation)(name, 300, what)
        else:  # (delete, and delete record)
            message.delete(name) if what is None else message.delete(name, what)


def _records(section: list[dns.rrset.RRset]) -> Counter[tuple[Any, ...]]:
    """A section's RRs, however they are grouped into RRsets."""
    found: Counter[tuple[Any, ...]] = Counter()
    for rrset in section:
        key = (rrset.name, rrset.rdclass, rrset.rdtype, rrset.deleting)
        if len(rrset) == 0:
            found[(*key, 0, None)] += 1
        for record in rrset:
            found[(*key, rrset.ttl, record)] += 1
    return found


@settings(max_examples=150, deadline=None)
@given(st.lists(_OPERATION, max_size=12))
def test_any_sequence_of_calls_sends_dnspythons_rrs(operations: list[tuple[str, dns.name.Name, Any]]) -> None:
    """Property: whatever calls a change makes, the message holds the RRs dnspython's
    ``UpdateMessage`` sends for them (read back by dnspython, signature verified): the
    prerequisites as a set (the server compares RRsets), the updates as they come."""
    expected = dnspythons(lambda m: _apply(m, operations))
    got = ours(lambda m: _apply(m, operations))
    assert set(_records(got.prerequisite)) == set(_records(expected.prerequisite))
    assert _records(got.update) == _records(expected.update)


def _answering(
    rcode: dns.rcode.Rcode = dns.rcode.NOERROR, *, key: dns.tsig.Key = KEY, qid: int | None = None
) -> Echo:
    """A server answering an UPDATE with ``rcode``, signed with ``key``; a query, NXDOMAIN."""

    def reply(message: bytes) -> bytes:
        request = dns.message.from_wire(message, keyring=KEY) if message[2] & 0x78 else None
        if request is None:
            response = dns.message.make_response(dns.message.from_wire(message))
            response.set_rcode(dns.rcode.NXDOMAIN)
            return response.to_wire()
        response = dns.message.make_response(request)
        response.set_rcode(rcode)
        if qid is not None:
            response.id = qid
        response.use_tsig(key, original_id=response.id)
        response.request_mac = request.mac
        return response.to_wire()

    return Echo(reply)


def _update() -> Update:
    update = Update(ZONE)
    update.absent(WWW, "A")
    update.add(WWW, 300, rdata("A", "192.0.2.1"))
    return update


class TestSendUpdate:
    """One UPDATE over the kept-open streams, and what its answer means."""

    async def test_applied_and_on_the_connection_queries_use(self) -> None:
        """NOERROR, signed with the key: applied. Two updates and a query go on one
        connection."""
        async with serving(_answering()) as echo:
            connections = Connections()
            await send_update(connections, echo.where, _update(), "example.test.", KEY, seconds=5)
            await send_update(connections, echo.where, _update(), "example.test.", KEY, seconds=5)
            await connections.exchange(echo.where, query_message(3, WWW, dns.rdatatype.A), 5)
            assert echo.connections == 1
            await connections.close()

    @pytest.mark.parametrize(
        ("rcode", "error", "text"),
        [
            (dns.rcode.YXRRSET, PrerequisiteFailedError, "YXRRSET"),
            (dns.rcode.NXRRSET, PrerequisiteFailedError, "NXRRSET"),
            (
                dns.rcode.REFUSED,
                PermanentError,
                "REFUSED the update of zone example.test.: its update-policy",
            ),
            (dns.rcode.NOTAUTH, TransientError, "NOTAUTH: it is not authoritative for zone example.test."),
            (dns.rcode.SERVFAIL, TransientError, "SERVFAIL to an update of zone example.test."),
        ],
    )
    async def test_what_the_server_answers(
        self, rcode: dns.rcode.Rcode, error: type[Exception], text: str
    ) -> None:
        """Each refusal is its error, naming the zone."""
        async with serving(_answering(rcode)) as echo:
            connections = Connections()
            with pytest.raises(error, match=text):
                await send_update(connections, echo.where, _update(), "example.test.", KEY, seconds=5)
            await connections.close()

    async def test_an_answer_signed_otherwise_or_to_another_message_is_refused(self) -> None:
        """An answer whose signature does not verify, or that answers another message:
        a TransientError, the secret never in it."""
        other = dns.tsig.Key(KEY.name, "b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA==", dns.tsig.HMAC_SHA256)
        async with serving(_answering(key=other)) as echo:
            connections = Connections()
            with pytest.raises(TransientError, match="TSIG signature") as caught:
                await send_update(connections, echo.where, _update(), "example.test.", KEY, seconds=5)
            assert KEY.secret not in str(caught.value).encode()
            await connections.close()
        async with serving(_answering(qid=7)) as echo:
            connections = Connections()
            with pytest.raises(TransientError, match="another message"):
                await send_update(connections, echo.where, _update(), "example.test.", KEY, seconds=5)
            await connections.close()


def _sized(index: int, octets: int) -> Callable[[Update], None]:
    """A change adding a TXT record of about ``octets`` bytes at its own name."""
    text = " ".join(f'"{"x" * 250}"' for _ in range(octets // 251 + 1))
    record = rdata("TXT", text)
    name = dns.name.from_text(f"t{index}.example.test.")
    return lambda message: message.add(name, 300, record)


class TestBatcherMessages:
    """The batcher keeps each message within what one DNS message may hold."""

    @staticmethod
    def _batcher(sent: list[Update], limit: int) -> Batcher:
        async def send(message: Update) -> None:
            sent.append(message)

        return Batcher(lambda: Update(ZONE), send, window=0.0, size=100, limit=limit)

    async def test_what_does_not_fit_goes_in_the_next_message(self) -> None:
        """Five changes of ~3 KB with room for two a message: three messages, every
        caller applied, every message within the limit."""
        sent: list[Update] = []
        batcher = self._batcher(sent, 7000)
        await asyncio.gather(*(batcher.submit(_sized(i, 3000)) for i in range(5)))
        assert [m.updates for m in sent] == [2, 2, 1]
        assert all(m.size <= 7000 for m in sent)
        assert (batcher.messages, batcher.changes) == (3, 5)
        await batcher.close()

    async def test_a_change_too_large_alone_fails_alone(self) -> None:
        """A change larger than a message: PermanentError for its caller; a change that
        fails to write: its own error; the others go."""
        sent: list[Update] = []
        batcher = self._batcher(sent, 7000)

        def broken(_message: Update) -> None:
            raise ValueError("cannot write this")

        outcomes = await asyncio.gather(
            batcher.submit(_sized(0, 1000)),
            batcher.submit(_sized(1, 9000)),
            batcher.submit(broken),
            batcher.submit(_sized(2, 1000)),
            return_exceptions=True,
        )
        assert outcomes[0] is None
        assert outcomes[3] is None
        assert isinstance(outcomes[1], PermanentError)
        assert "too large for one DNS message (7000 bytes at most)" in str(outcomes[1])
        assert isinstance(outcomes[2], ValueError)
        assert [m.updates for m in sent] == [2]
        await batcher.close()

    async def test_changes_arriving_while_a_message_is_in_flight_share_the_next(self) -> None:
        """The batcher's pipelining: while the zone's message is unanswered, new changes
        wait and then go together in one message; each caller hears its own outcome."""
        sent: list[Update] = []
        answered = asyncio.Event()

        async def send(message: Update) -> None:
            sent.append(message)
            if len(sent) == 1:
                await answered.wait()

        batcher = Batcher(lambda: Update(ZONE), send, window=0.0, size=100)
        first = asyncio.create_task(batcher.submit(_sized(0, 10)))
        await settle(lambda: len(sent) == 1)
        later = [asyncio.create_task(batcher.submit(_sized(i, 10))) for i in range(1, 6)]
        await settle(lambda: batcher.waiting == 5)
        assert len(sent) == 1
        answered.set()
        await asyncio.gather(first, *later)
        assert [m.updates for m in sent] == [1, 5]
        await batcher.close()

    async def test_a_change_behind_a_message_never_answered_fails_at_its_deadline(self) -> None:
        """A message in flight that is never answered: the changes queued behind it fail
        at their deadline, naming where they were going, and are never sent."""
        sent: list[Update] = []
        never = asyncio.Event()

        async def send(message: Update) -> None:
            sent.append(message)
            await never.wait()

        batcher = Batcher(lambda: Update(ZONE), send, window=0.0, size=100, deadline=0.2, name="zone z at S")
        first = asyncio.create_task(batcher.submit(_sized(0, 10)))
        await settle(lambda: len(sent) == 1)
        behind = await asyncio.gather(
            *(batcher.submit(_sized(i, 10)) for i in range(1, 4)), return_exceptions=True
        )
        assert all(isinstance(outcome, TransientError) for outcome in behind)
        assert "no answer to the change within 0.2 s: zone z at S answered neither it" in str(behind[0])
        with pytest.raises(TransientError):
            await first
        never.set()
        await batcher.close()
        assert len(sent) == 1, "the changes whose callers gave up were never sent"

    async def test_a_message_the_server_refuses_is_sent_again_change_by_change(self) -> None:
        """REFUSED (or SERVFAIL, NOTIMP, FORMERR) for a combined message: each change goes
        alone, and only the one refused alone fails, with the server's own error."""
        sent: list[Update] = []

        async def send(message: Update) -> None:
            sent.append(message)
            if message.updates != 1 or len(sent) == 3:  # the combined one, and change 1 alone
                raise UpdateRefusedError("REFUSED the update", "REFUSED")

        batcher = Batcher(lambda: Update(ZONE), send, window=0.01, size=100)
        outcomes = await asyncio.gather(
            *(batcher.submit(_sized(i, 10)) for i in range(4)), return_exceptions=True
        )
        assert [m.updates for m in sent] == [4, 1, 1, 1, 1]
        assert [type(o).__name__ for o in outcomes] == [
            "NoneType",
            "UpdateRefusedError",
            "NoneType",
            "NoneType",
        ]
        await batcher.close()
