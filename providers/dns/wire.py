"""Talking to an authoritative server: direct queries (TCP, no recursion) and TSIG-signed
UPDATE messages (RFC 2136), with the server's answers turned into the engine's errors.

A query answer must be authoritative (AA): a server that is not authoritative for the
zone would otherwise hand out a cache's view. Prerequisite failures (YXDOMAIN, YXRRSET,
NXDOMAIN, NXRRSET) are :class:`PrerequisiteFailed`, which the batcher splits and the
client turns into a ConflictError; a refused signature or key names the TSIG error and
the key, never the secret.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from typing import Any

import attrs
import dns.asyncbackend
import dns.asyncquery
import dns.exception
import dns.flags
import dns.inet
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdatatype
import dns.tsig
import dns.update
import dns.xfr
import dns.zone

from providers.dns.config import Server
from reconcile.errors import PermanentError, TransientError

__all__ = ["Answer", "Connections", "PrerequisiteFailedError", "query", "send_update", "transfer"]

_PREREQUISITE = {dns.rcode.YXDOMAIN, dns.rcode.YXRRSET, dns.rcode.NXDOMAIN, dns.rcode.NXRRSET}


class PrerequisiteFailedError(Exception):
    """An UPDATE's prerequisites did not hold: somebody changed the zone meanwhile."""

    def __init__(self, rcode: str) -> None:
        super().__init__(rcode)
        self.rcode = rcode


@attrs.frozen
class Answer:
    """An RRset as the server holds it."""

    ttl: int
    rdatas: tuple[dns.rdata.Rdata, ...]


def _where(server: Server) -> str:
    return f"{server.address}:{server.port}"


class Connections:
    """Idle TCP connections to each server, reused for queries and updates (a server
    answers many messages on one connection): no handshake per message. A connection
    that fails is dropped; one the server closed while idle is replaced once."""

    def __init__(self) -> None:
        self._idle: dict[Server, list[Any]] = {}

    async def exchange(
        self, server: Server, message: dns.message.Message, seconds: float
    ) -> dns.message.Message:
        """Send ``message`` on a connection to ``server``; its verified answer. A server
        that cannot be reached, or does not answer in time, is a TransientError."""
        try:
            return await self._exchange(server, message, seconds)
        except (OSError, dns.exception.Timeout, EOFError) as exc:
            reason = str(exc) or type(exc).__name__
            raise TransientError(f"DNS server {_where(server)} is unreachable: {reason}") from exc

    async def _exchange(
        self, server: Server, message: dns.message.Message, seconds: float
    ) -> dns.message.Message:
        idle = self._idle.setdefault(server, [])
        for attempt in range(2):
            fresh = attempt > 0 or not idle
            sock = await self._connect(server, seconds) if fresh else idle.pop()
            try:
                response = await dns.asyncquery.tcp(
                    message, server.address, port=server.port, timeout=seconds, sock=sock
                )
            except (EOFError, ConnectionError):
                await sock.close()
                if fresh:
                    raise
                continue  # a connection the server closed while idle: once more, fresh
            except BaseException:
                await sock.close()
                raise
            idle.append(sock)
            return response
        raise AssertionError  # pragma: no cover - the loop returns or raises

    @staticmethod
    async def _connect(server: Server, seconds: float) -> Any:
        backend: Any = dns.asyncbackend.get_backend("asyncio")
        family = dns.inet.af_for_address(server.address)
        return await backend.make_socket(
            family, socket.SOCK_STREAM, 0, None, (server.address, server.port), seconds
        )

    async def close(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            while idle:
                with contextlib.suppress(Exception):
                    await idle.pop().close()


async def query(
    connections: Connections, server: Server, name: dns.name.Name, rdtype: str, seconds: float
) -> Answer | None:
    """The RRset ``name``/``rdtype`` as ``server`` holds it; None when there is none."""
    request = dns.message.make_query(name, rdtype)
    request.flags &= ~dns.flags.RD
    try:
        response = await connections.exchange(server, request, seconds)
    except dns.exception.DNSException as exc:
        raise TransientError(f"DNS query of {name} {rdtype} to {_where(server)} failed: {exc}") from exc
    rcode = response.rcode()
    if rcode not in {dns.rcode.NOERROR, dns.rcode.NXDOMAIN}:
        text = dns.rcode.to_text(rcode)
        raise TransientError(f"DNS server {_where(server)} answered {text} to a query of {name} {rdtype}")
    wanted = dns.rdatatype.from_text(rdtype)
    if not response.flags & dns.flags.AA:
        # A delegation's NS records are answered as a referral (the parent holds them,
        # the child zone is authoritative for them): found in the authority section.
        for rrset in response.authority:
            if wanted == dns.rdatatype.NS and rrset.name == name and rrset.rdtype == wanted:
                return Answer(rrset.ttl, tuple(rrset))
        raise TransientError(
            f"DNS server {_where(server)} is not authoritative for {name} (NOTAUTH: its answer is not AA)"
        )
    for rrset in response.answer:
        if rrset.name == name and rrset.rdtype == wanted:
            return Answer(rrset.ttl, tuple(rrset))
    return None


async def send_update(
    connections: Connections, server: Server, message: dns.update.UpdateMessage, zone: str, seconds: float
) -> None:
    """Send one signed UPDATE; raise unless the server applied it (NOERROR)."""
    try:
        response = await connections.exchange(server, message, seconds)
    except dns.tsig.PeerBadKey as exc:
        raise TransientError(
            f"DNS server {_where(server)} does not know the TSIG key of zone {zone} (BADKEY)"
        ) from exc
    except (dns.tsig.PeerBadSignature, dns.tsig.BadSignature) as exc:
        raise TransientError(
            f"DNS server {_where(server)} refused the TSIG signature for zone {zone} (BADSIG: check the "
            "key's secret)"
        ) from exc
    except dns.tsig.PeerBadTime as exc:
        raise TransientError(f"DNS server {_where(server)}: BADTIME (check the clocks)") from exc
    except dns.exception.DNSException as exc:
        raise TransientError(f"DNS update of zone {zone} at {_where(server)} failed: {exc}") from exc
    rcode = response.rcode()
    if rcode == dns.rcode.NOERROR:
        return
    text = dns.rcode.to_text(rcode)
    if rcode in _PREREQUISITE:
        raise PrerequisiteFailedError(text)
    if rcode in {dns.rcode.NOTAUTH, dns.rcode.NOTZONE}:
        raise TransientError(
            f"DNS server {_where(server)} answered {text}: it is not authoritative for zone {zone}, or the "
            "update names something outside it"
        )
    if rcode == dns.rcode.REFUSED:
        raise PermanentError(
            f"DNS server {_where(server)} REFUSED the update of zone {zone}: its update-policy does not "
            "grant this key the change"
        )
    raise TransientError(f"DNS server {_where(server)} answered {text} to an update of zone {zone}")


def signed_update(zone: str, key: dns.tsig.Key) -> dns.update.UpdateMessage:
    """An empty UPDATE for ``zone``, to be signed with ``key``."""
    message = dns.update.UpdateMessage(zone)
    message.use_tsig(key)
    return message


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
            f"DNS server {_where(server)} refused the zone transfer of {zone} ({text}): its allow-transfer "
            "must grant the zone's TSIG key to list what this store owns"
        ) from exc
    except (dns.tsig.PeerBadKey, dns.tsig.PeerBadSignature, dns.tsig.BadSignature) as exc:
        raise PermanentError(
            f"DNS server {_where(server)} refused the TSIG key of zone {zone} for a zone transfer "
            "(BADKEY/BADSIG)"
        ) from exc
    except (OSError, EOFError, dns.exception.Timeout) as exc:
        reason = str(exc) or type(exc).__name__
        raise TransientError(f"DNS server {_where(server)} is unreachable: {reason}") from exc
    except dns.exception.DNSException as exc:
        raise TransientError(f"zone transfer of {zone} from {_where(server)} failed: {exc}") from exc
    return copy
