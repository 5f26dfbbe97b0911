"""The dns provider's own wire code, without a server: queries built as dnspython builds
them, answers read as dnspython reads them (compression, several records, a CNAME
followed, NXDOMAIN, the wrong answer refused), and the TCP connections' framing,
reuse, replacement and deadlines against a small asyncio server of the test's own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from dns_echo import Echo, serving

from reconcile.errors import TransientError
from reconcile_providers.dns.config import Server
from reconcile_providers.dns.health import FIRST_WAIT, Health, ServerDownError
from reconcile_providers.dns.streams import Connections
from reconcile_providers.dns.wire import (
    MalformedAnswerError,
    OccludedError,
    query,
    query_message,
    read_answer,
)

NAME = dns.name.from_text("www.example.test.")
ZONE = dns.name.from_text("example.test.")


def _answer_to(request: bytes, *rrsets: dns.rrset.RRset, authoritative: bool = True) -> dns.message.Message:
    response = dns.message.make_response(dns.message.from_wire(request))
    if authoritative:
        response.flags |= dns.flags.AA
    response.answer.extend(rrsets)
    return response


class TestQueryMessage:
    """The query the provider sends."""

    def test_is_dnspythons_query_without_recursion(self) -> None:
        """Byte for byte what ``make_query`` with RD cleared makes (no EDNS)."""
        expected = dns.message.make_query(NAME, "TXT", use_edns=False)
        expected.flags &= ~dns.flags.RD
        assert query_message(expected.id, NAME, dns.rdatatype.TXT) == expected.to_wire()


@pytest.fixture(params=["parsed", "question bytes"])
def question_of(request: pytest.FixtureRequest) -> Callable[[bytes], bytes]:
    """What ``read_answer`` is told of the question: nothing (the answer's question is
    parsed and compared as a name), or the query's question bytes (compared as bytes
    first); both readings must agree."""
    if request.param == "parsed":
        return lambda _query: b""
    return lambda query: query[12:]


class TestReadAnswer:
    """An answer read from the wire (each test with and without the question's bytes)."""

    def test_records_with_compression_and_the_other_sections_skipped(
        self, question_of: Callable[[bytes], bytes]
    ) -> None:
        """Two A records (names compressed), an authority and an additional section: the
        RRset, its TTL, the AA flag and the rcode; what dnspython's parser reads too."""
        request = query_message(7, NAME, dns.rdatatype.A)
        response = _answer_to(request, dns.rrset.from_text(NAME, 300, "IN", "A", "192.0.2.1", "192.0.2.2"))
        response.authority.append(dns.rrset.from_text("example.test.", 300, "IN", "NS", "ns.example.test."))
        response.additional.append(dns.rrset.from_text("ns.example.test.", 300, "IN", "A", "127.0.0.1"))
        wire = response.to_wire()
        rcode, authoritative, found = read_answer(wire, 7, NAME, dns.rdatatype.A, question_of(request))
        assert (rcode, authoritative) == (dns.rcode.NOERROR, True)
        assert found is not None
        assert found.ttl == 300
        assert set(found.rdatas) == set(dns.message.from_wire(wire).answer[0])

    def test_records_without_names_come_as_their_bytes_and_parse_when_read(
        self, question_of: Callable[[bytes], bytes]
    ) -> None:
        """A, AAAA, TXT and CAA records hold no names: the answer keeps their bytes (a
        record twice, once), and parses them when ``rdatas`` is read, as dnspython does;
        MX records hold a name (maybe compressed): parsed at once, no bytes kept."""
        for rtype, texts in [
            ("A", ["192.0.2.1", "192.0.2.2", "192.0.2.1"]),
            ("AAAA", ["2001:db8::1"]),
            ("TXT", ['"one" "two"', '"three"']),
            ("CAA", ['0 issue "ca.example.net"']),
            ("MX", ["10 mail.example.test."]),
        ]:
            request = query_message(5, NAME, dns.rdatatype.from_text(rtype))
            rrset = dns.rrset.from_text(NAME, 60, "IN", rtype, *texts)
            wire = _answer_to(request, rrset).to_wire()
            _, _, found = read_answer(wire, 5, NAME, dns.rdatatype.from_text(rtype), question_of(request))
            assert found is not None
            expected = set(dns.message.from_wire(wire).answer[0])
            if rtype == "MX":
                assert found.wires is None
            else:
                assert found.wires is not None
                assert set(found.wires) == {rdata.to_wire() for rdata in expected}
                assert len(found.wires) == len(expected)
            assert set(found.rdatas) == expected

    def test_a_record_that_does_not_parse_is_transient_when_read(self) -> None:
        """An A record of three bytes: kept as bytes, and a TransientError when parsed."""
        request = query_message(5, NAME, dns.rdatatype.A)
        wire = _answer_to(request, dns.rrset.from_text(NAME, 60, "IN", "A", "192.0.2.1")).to_wire()
        short = wire[:-6] + b"\x00\x03" + wire[-4:-1]  # (the rdata length and the record, cut)
        _, _, found = read_answer(short, 5, NAME, dns.rdatatype.A)
        assert found is not None
        with pytest.raises(TransientError, match="malformed record in a DNS answer"):
            _ = found.rdatas

    def test_names_compare_without_case_and_duplicates_count_once(
        self, question_of: Callable[[bytes], bytes]
    ) -> None:
        """``WWW.Example.TEST.`` is the name asked; a record sent twice is one record."""
        request = query_message(9, NAME, dns.rdatatype.A)
        upper = dns.name.from_text("WWW.Example.TEST.")
        record = dns.rrset.from_text(upper, 60, "IN", "A", "192.0.2.9")
        wire = _answer_to(request, record, record).to_wire()  # the same record twice
        assert wire.count(bytes([192, 0, 2, 9])) == 2
        _, _, found = read_answer(wire, 9, NAME, dns.rdatatype.A, question_of(request))
        assert found is not None
        assert [r.to_text() for r in found.rdatas] == ["192.0.2.9"]
        assert found.ttl == 60

    def test_a_cname_followed_is_not_the_rrset(self, question_of: Callable[[bytes], bytes]) -> None:
        """A query for A at a name that holds a CNAME: the server answers the CNAME and
        its target's A; neither is the A RRset at the name asked."""
        request = query_message(11, NAME, dns.rdatatype.A)
        response = _answer_to(
            request,
            dns.rrset.from_text(NAME, 300, "IN", "CNAME", "target.example.test."),
            dns.rrset.from_text("target.example.test.", 300, "IN", "A", "192.0.2.7"),
        )
        assert read_answer(response.to_wire(), 11, NAME, dns.rdatatype.A, question_of(request)) == (
            dns.rcode.NOERROR,
            True,
            None,
        )

    def test_nxdomain_and_a_referral(self, question_of: Callable[[bytes], bytes]) -> None:
        """No such name: NXDOMAIN and nothing found; an answer without AA says so."""
        request = query_message(13, NAME, dns.rdatatype.A)
        response = _answer_to(request)
        response.set_rcode(dns.rcode.NXDOMAIN)
        assert read_answer(response.to_wire(), 13, NAME, dns.rdatatype.A, question_of(request)) == (
            dns.rcode.NXDOMAIN,
            True,
            None,
        )
        referral = _answer_to(request, authoritative=False)
        assert read_answer(referral.to_wire(), 13, NAME, dns.rdatatype.A, question_of(request))[1] is False

    @pytest.mark.parametrize(
        ("change", "reason"),
        [
            (lambda wire: wire[:1] + bytes([wire[1] ^ 1]) + wire[2:], "not the answer to this query"),  # id
            (
                lambda wire: wire[:2] + bytes([wire[2] & 0x7F]) + wire[3:],
                "not the answer to this query",
            ),  # QR
            (lambda wire: wire[:20], "malformed"),  # cut short
            (lambda wire: wire[:4] + b"\x00\x00" + wire[6:], "does not repeat the question"),
        ],
    )
    def test_what_is_not_the_answer_is_refused(
        self, change: Callable[[bytes], bytes], reason: str, question_of: Callable[[bytes], bytes]
    ) -> None:
        """Another message's id, a query rather than an answer, a message cut short, an
        answer without the question: MalformedAnswerError, never a wrong RRset."""
        request = query_message(21, NAME, dns.rdatatype.A)
        wire = _answer_to(request, dns.rrset.from_text(NAME, 300, "IN", "A", "192.0.2.1")).to_wire()
        with pytest.raises(MalformedAnswerError, match=reason):
            read_answer(change(wire), 21, NAME, dns.rdatatype.A, question_of(request))

    def test_an_answer_to_another_question_is_refused(self, question_of: Callable[[bytes], bytes]) -> None:
        """The answer to a query of another name (a connection out of step) is refused."""
        other = query_message(5, dns.name.from_text("other.example.test."), dns.rdatatype.A)
        wire = _answer_to(other).to_wire()
        with pytest.raises(MalformedAnswerError, match="another question"):
            read_answer(wire, 5, NAME, dns.rdatatype.A, question_of(query_message(5, NAME, dns.rdatatype.A)))

    def test_a_question_echoed_in_another_case_and_an_owner_written_out(
        self, question_of: Callable[[bytes], bytes]
    ) -> None:
        """A server that echoes the question with its letters' case changed (DNS 0x20)
        and writes the owner name out instead of pointing at the question: the same
        RRset (the bytes differ, so the names are parsed and compared as DNS does)."""
        request = query_message(23, NAME, dns.rdatatype.A)
        wire = _answer_to(request, dns.rrset.from_text(NAME, 300, "IN", "A", "192.0.2.1")).to_wire()
        pointer = wire.index(b"\xc0\x0c", len(request))  # the owner: the first name after the question
        assert wire[13:16] == b"www"
        changed = wire[:13] + b"WwW" + wire[16:pointer] + NAME.to_wire() + wire[pointer + 2 :]
        _, _, found = read_answer(changed, 23, NAME, dns.rdatatype.A, question_of(request))
        assert found is not None
        assert [r.to_text() for r in found.rdatas] == ["192.0.2.1"]

    def test_another_type_asked_with_the_same_name_is_refused(
        self, question_of: Callable[[bytes], bytes]
    ) -> None:
        """The answer to a query of the same name for another type is not this answer."""
        other = query_message(6, NAME, dns.rdatatype.TXT)
        wire = _answer_to(other).to_wire()
        with pytest.raises(MalformedAnswerError, match="another question"):
            read_answer(wire, 6, NAME, dns.rdatatype.A, question_of(query_message(6, NAME, dns.rdatatype.A)))


class TestConnections:
    """Framed exchanges on reused connections."""

    async def test_one_connection_serves_one_message_after_another(self) -> None:
        """Each message gets its own answer, framed by length, on one connection."""
        async with serving(Echo(lambda message: message[::-1])) as echo:
            connections = Connections()
            assert await connections.exchange(echo.where, b"abc", 5) == b"cba"
            assert await connections.exchange(echo.where, b"x" * 1000, 5) == b"x" * 1000
            assert echo.connections == 1
            await connections.close()

    async def test_a_connection_the_server_closed_is_replaced_once(self) -> None:
        """A server that closes idle connections: the next exchange finds its idle
        connection gone and goes again on a fresh one, without failing."""
        async with serving(Echo(lambda message: message, close_idle=True)) as echo:
            connections = Connections()
            assert await connections.exchange(echo.where, b"one", 5) == b"one"
            assert await connections.exchange(echo.where, b"two", 5) == b"two"
            assert echo.connections == 2
            await connections.close()

    async def test_no_answer_in_time_is_transient_and_the_connection_is_not_kept(self) -> None:
        """A server that does not answer: TransientError at the deadline, naming the
        server; the connection is closed, so a late answer is never read as the next."""
        answers = iter([None, b"late-proof"])
        now = [0.0]
        async with serving(Echo(lambda _message: next(answers))) as echo:
            connections = Connections(Health(5, clock=lambda: now[0]))
            with pytest.raises(
                TransientError, match=r"127\.0\.0\.1:\d+ is unreachable: no answer in 0\.05 s"
            ):
                await connections.exchange(echo.where, b"first", 0.05)
            now[0] += FIRST_WAIT  # (the server is tried again: see TestHealth)
            assert await connections.exchange(echo.where, b"second", 5) == b"late-proof"
            assert echo.connections == 2
            await connections.close()

    async def test_a_server_not_listening_is_transient(self) -> None:
        """Connection refused: TransientError naming the server."""
        async with serving(Echo(lambda message: message)) as echo:
            where = echo.where
        with pytest.raises(TransientError, match=f"{where.address}:{where.port} is unreachable"):
            await Connections().exchange(where, b"anyone?", 5)


class TestHealth:
    """A server that stopped answering is noticed once and backs off as one server."""

    async def test_after_no_answer_the_next_exchanges_fail_at_once_until_a_probe_answers(self) -> None:
        """The first exchange without an answer marks the server down; the next fail at
        once, naming it, since when and when it is tried again (retry_after), without
        reaching it; when that time comes one exchange goes as the probe (the others still
        fail at once), and its answer marks the server up."""
        now = [100.0]
        answers = iter([None, b"probe", b"after"])
        async with serving(Echo(lambda _message: next(answers))) as echo:
            health = Health(5, clock=lambda: now[0], wall=lambda: 0.0)
            connections = Connections(health)
            with pytest.raises(ServerDownError, match=r"no answer in 0\.05 s"):
                await connections.exchange(echo.where, b"first", 0.05)
            for _ in range(3):
                with pytest.raises(ServerDownError) as caught:
                    await connections.exchange(echo.where, b"waiting", 5)
                message = str(caught.value)
                assert (
                    f"DNS server 127.0.0.1:{echo.where.port} is unreachable: no answer in 0.05 s" in message
                )
                assert "not answering since 00:00:00 UTC" in message
                assert caught.value.retry_after == pytest.approx(FIRST_WAIT)
            assert echo.connections == 1, "nothing reached the server"
            now[0] += FIRST_WAIT
            probe = asyncio.create_task(connections.exchange(echo.where, b"probe", 5))
            await asyncio.sleep(0)  # (the probe claimed; it has not been answered yet)
            with pytest.raises(ServerDownError):
                await connections.exchange(echo.where, b"meanwhile", 5)
            assert await probe == b"probe"
            assert await connections.exchange(echo.where, b"after", 5) == b"after"
            assert health.statistics() == {"down": 0, "refused": 4}
            await connections.close()

    def test_a_failed_probe_doubles_the_wait_and_earlier_exchanges_do_not(self) -> None:
        """Exchanges begun before the server went down fail without changing the wait; each
        failed probe doubles it, up to six times the timeout."""
        now = [0.0]
        health = Health(2, clock=lambda: now[0])
        server = Server("192.0.2.1", 53, ())
        started = [health.check(server) for _ in range(16)]  # 16 on the wire
        now[0] = 2.0
        waits = [health.failed(server, "no answer in 2 s", begun).retry_after for begun in started]
        assert waits == [FIRST_WAIT] * 16
        for expected in (2.0, 4.0, 8.0, 12.0, 12.0):
            now[0] += waits[-1] or 0.0
            begun = health.check(server)  # the probe
            now[0] += 2.0
            waits.append(health.failed(server, "no answer in 2 s", begun).retry_after)
            assert waits[-1] == expected


class TestQuery:
    """``query``: the RRset, a referral's NS records, a server that is not authoritative."""

    @staticmethod
    def _server(
        *,
        authoritative: bool,
        rcode: dns.rcode.Rcode = dns.rcode.NOERROR,
        cut: dns.name.Name | None = None,
    ) -> Echo:
        def reply(message: bytes) -> bytes:
            request = dns.message.from_wire(message)
            response = _answer_to(message, authoritative=authoritative)
            response.set_rcode(rcode)
            question = request.question[0]
            if not authoritative:  # a delegation: the child's NS as a referral
                where = question.name if cut is None else cut
                response.authority.append(dns.rrset.from_text(where, 600, "IN", "NS", "ns.child.test."))
            else:
                response.answer.append(dns.rrset.from_text(question.name, 60, "IN", "A", "192.0.2.5"))
            return response.to_wire()

        return Echo(reply)

    async def test_the_rrset_and_a_referral(self) -> None:
        """An authoritative answer's RRset; a delegation's NS records from the authority
        section of a referral (the parent, the zone's primary, answers them without AA)."""
        for authoritative, rdtype, expected in (
            (True, "A", (60, ["192.0.2.5"])),  # the answer's RRset
            (False, "NS", (600, ["ns.child.test."])),  # a delegation's NS, from the parent's referral
        ):
            async with serving(self._server(authoritative=authoritative)) as echo:
                connections = Connections()
                found = await query(connections, echo.where, NAME, rdtype, 5, zone=ZONE)
                assert found is not None
                assert (found.ttl, [r.to_text() for r in found.rdatas]) == expected
                await connections.close()

    @pytest.mark.parametrize(
        ("rcode", "cut", "zone"),
        [
            (dns.rcode.NOERROR, None, None),  # no zone to be a delegation of
            (dns.rcode.NXDOMAIN, None, ZONE),  # not a referral's rcode
            (dns.rcode.NOERROR, ZONE, ZONE),  # the apex's NS: the zone is not this server's
            (dns.rcode.NOERROR, dns.name.from_text("test."), ZONE),  # a cut above the zone
            (dns.rcode.NOERROR, dns.name.from_text("other.example.test."), ZONE),  # not above the name
        ],
    )
    async def test_a_referral_of_another_shape_is_not_the_delegation(
        self, rcode: dns.rcode.Rcode, cut: dns.name.Name | None, zone: dns.name.Name | None
    ) -> None:
        """Only NOERROR, no AA and the NS RRset of the name asked for, strictly below the
        zone's apex, is a delegation's NS RRset; anything else is NOTAUTH."""
        async with serving(self._server(authoritative=False, rcode=rcode, cut=cut)) as echo:
            connections = Connections()
            with pytest.raises(TransientError, match=r"not authoritative for www\.example\.test\."):
                await query(connections, echo.where, NAME, "NS", 5, zone=zone)
            await connections.close()

    async def test_below_a_delegation_is_occluded(self) -> None:
        """A referral to a cut at or above the name asked for (but the NS at the cut): an
        OccludedError naming the delegation."""
        cut = dns.name.from_text("sub.example.test.")
        below = dns.name.from_text("x.sub.example.test.")
        async with serving(self._server(authoritative=False, cut=cut)) as echo:
            connections = Connections()
            with pytest.raises(
                OccludedError, match=r"^x\.sub\.example\.test\. is below the delegation at sub"
            ):
                await query(connections, echo.where, below, "NS", 5, zone=ZONE)
            with pytest.raises(OccludedError, match=r"^sub\.example\.test\. is at the delegation at sub"):
                await query(connections, echo.where, cut, "A", 5, zone=ZONE)
            await connections.close()

    async def test_not_authoritative_and_refused_are_transient(self) -> None:
        """An answer without AA (a cache's view) and a REFUSED: TransientError saying so."""
        async with serving(self._server(authoritative=False)) as echo:
            connections = Connections()
            with pytest.raises(TransientError, match=r"not authoritative for www\.example\.test\."):
                await query(connections, echo.where, NAME, "A", 5)
            await connections.close()
        async with serving(self._server(authoritative=True, rcode=dns.rcode.REFUSED)) as echo:
            connections = Connections()
            refused = r"answered REFUSED to a query of www\.example\.test\. A"
            with pytest.raises(TransientError, match=refused):
                await query(connections, echo.where, NAME, "A", 5)
            await connections.close()
