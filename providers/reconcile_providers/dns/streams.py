"""DNS over TCP (RFC 7766): idle connections to each server, reused for one message at a
time, each message framed by its two-byte length.

Messages go as bytes on plain asyncio streams, with one deadline per exchange
(``asyncio.timeout``): queries built and read by :mod:`reconcile_providers.dns.wire`, UPDATE
messages written by :mod:`reconcile_providers.dns.updates` and signed with dnspython's TSIG.
dnspython's own TCP path waits on every read and write separately, each wait a task of
its own: three times the CPU per message, and a poll of a thousand record sets is two
thousand queries.

Which servers answer is :mod:`reconcile_providers.dns.health`'s: an exchange with a server known to
have stopped answering fails at once, and the first that gets no answer marks it so.
"""

from __future__ import annotations

import asyncio
import contextlib

from reconcile_providers.dns.config import Server
from reconcile_providers.dns.health import Health, where

__all__ = ["Connections", "where"]


class _Stream:
    """A plain asyncio stream: length-framed bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server: Server) -> _Stream:
        return cls(*await asyncio.open_connection(server.address, server.port))

    async def exchange(self, message: bytes) -> bytes:
        self.writer.write(len(message).to_bytes(2, "big") + message)
        length = int.from_bytes(await self.reader.readexactly(2), "big")
        return await self.reader.readexactly(length)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
            await self.writer.wait_closed()


class Connections:
    """Idle TCP connections to each server, reused (a server answers many messages on
    one connection): no handshake per message. A connection that fails, or whose
    exchange was cut short, is closed (an answer still on its way would be read as the
    next message's); one the server closed while idle is replaced once. A server that
    cannot be reached, closes the connection or does not answer in ``seconds``
    (connecting included) is a TransientError naming it (a ServerDownError, which
    :attr:`health` keeps: the next exchanges with it fail at once until it is tried
    again)."""

    def __init__(self, health: Health | None = None) -> None:
        self._idle: dict[Server, list[_Stream]] = {}
        self.health = Health(5.0) if health is None else health

    async def exchange(self, server: Server, message: bytes, seconds: float) -> bytes:
        """A message (bytes) and its answer (bytes)."""
        started = self.health.check(server)
        try:
            async with asyncio.timeout(seconds):
                answer = await self._exchange(server, message)
        except TimeoutError as exc:
            raise self.health.failed(server, f"no answer in {seconds:g} s", started) from exc
        except (OSError, EOFError) as exc:
            raise self.health.failed(server, str(exc) or type(exc).__name__, started) from exc
        self.health.answered(server)
        return answer

    async def _exchange(self, server: Server, message: bytes) -> bytes:
        idle = self._idle.setdefault(server, [])
        for attempt in range(2):
            fresh = attempt > 0 or not idle
            connection = await _Stream.open(server) if fresh else idle.pop()
            try:
                answer = await connection.exchange(message)
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
