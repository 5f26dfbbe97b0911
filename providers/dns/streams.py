"""DNS over TCP (RFC 7766): idle connections to each server, reused for one message at a
time, each message framed by its two-byte length.

Two kinds of connection, kept apart:

* queries go as bytes (built and read by :mod:`providers.dns.wire`) on plain asyncio
  streams, with one deadline per exchange (``asyncio.timeout``): a third of the CPU of
  dnspython's own TCP path per message, which waits on every read and write separately,
  each wait a task of its own; a poll of a thousand record sets is two thousand queries;
* UPDATE messages go with dnspython's asyncio API (``dns.asyncquery.tcp`` on a kept-open
  socket of its asyncio backend), which signs them and verifies the answer's TSIG: a few
  messages carry a zone's changes, so their transport's cost does not count.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import dns.asyncbackend
import dns.asyncquery
import dns.exception
import dns.inet
import dns.message

from providers.dns.config import Server
from reconcile.errors import TransientError

__all__ = ["Connections", "where"]

T = TypeVar("T")


def where(server: Server) -> str:
    """``address:port``, as messages name a server."""
    return f"{server.address}:{server.port}"


class _Connection(Protocol):
    async def close(self) -> None: ...


class _Stream:
    """A plain asyncio stream: length-framed bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server: Server, _seconds: float) -> _Stream:
        return cls(*await asyncio.open_connection(server.address, server.port))

    async def exchange(self, message: bytes) -> bytes:
        self.writer.write(len(message).to_bytes(2, "big") + message)
        length = int.from_bytes(await self.reader.readexactly(2), "big")
        return await self.reader.readexactly(length)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
            await self.writer.wait_closed()


class _Socket:
    """A socket of dnspython's asyncio backend, for ``dns.asyncquery.tcp``."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock

    @classmethod
    async def open(cls, server: Server, seconds: float) -> _Socket:
        backend: Any = dns.asyncbackend.get_backend("asyncio")
        family = dns.inet.af_for_address(server.address)
        address = (server.address, server.port)
        return cls(await backend.make_socket(family, socket.SOCK_STREAM, 0, None, address, seconds))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.sock.close()


class Connections:
    """Idle TCP connections to each server, reused (a server answers many messages on
    one connection): no handshake per message. A connection that fails, or whose
    exchange was cut short, is closed (an answer still on its way would be read as the
    next message's); one the server closed while idle is replaced once. A server that
    cannot be reached, closes the connection or does not answer in ``seconds``
    (connecting included) is a TransientError naming it."""

    def __init__(self) -> None:
        self._idle: dict[tuple[Server, type], list[Any]] = {}

    async def exchange(self, server: Server, message: bytes, seconds: float) -> bytes:
        """A query (bytes) and its answer (bytes), on a plain asyncio stream."""
        return await self._using(server, seconds, _Stream, lambda stream: stream.exchange(message))

    async def exchange_message(
        self, server: Server, message: dns.message.Message, seconds: float
    ) -> dns.message.Message:
        """An UPDATE and its answer, with dnspython's asyncio API (which signs the
        message and verifies the answer's TSIG)."""

        def send(connection: _Socket) -> Awaitable[dns.message.Message]:
            address, port = server.address, server.port
            return dns.asyncquery.tcp(message, address, port=port, timeout=seconds, sock=connection.sock)

        return await self._using(server, seconds, _Socket, send)

    async def _using(
        self, server: Server, seconds: float, kind: Any, use: Callable[[Any], Awaitable[T]]
    ) -> T:
        try:
            async with asyncio.timeout(seconds):
                return await self._exchange(server, seconds, kind, use)
        except (TimeoutError, dns.exception.Timeout) as exc:
            reason = f"no answer in {seconds:g} s"
            raise TransientError(f"DNS server {where(server)} is unreachable: {reason}") from exc
        except (OSError, EOFError) as exc:
            reason = str(exc) or type(exc).__name__
            raise TransientError(f"DNS server {where(server)} is unreachable: {reason}") from exc

    async def _exchange(
        self, server: Server, seconds: float, kind: Any, use: Callable[[Any], Awaitable[T]]
    ) -> T:
        idle = self._idle.setdefault((server, kind), [])
        for attempt in range(2):
            fresh = attempt > 0 or not idle
            connection: _Connection = await kind.open(server, seconds) if fresh else idle.pop()
            try:
                answer = await use(connection)
            except (EOFError, ConnectionError):
                await connection.close()
                if fresh:
                    raise
                continue  # a connection the server closed while idle: once more, fresh
            except BaseException:
                await connection.close()
                raise
            idle.append(connection)
            return answer
        raise AssertionError  # pragma: no cover - the loop returns or raises

    async def close(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            while idle:
                await idle.pop().close()
