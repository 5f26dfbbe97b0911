"""DNS over TCP (RFC 7766): idle connections to each server, reused for one message at a
time, each message framed by its two-byte length.

The messages are bytes: building and reading them is :mod:`providers.dns.wire`'s. The
connections are plain asyncio streams with one deadline per exchange
(``asyncio.timeout``), which costs a third of what dnspython's own TCP path does per
message (it waits on every read and write separately, each wait a task of its own): a
poll of a thousand record sets is two thousand exchanges.
"""

from __future__ import annotations

import asyncio
import contextlib

from providers.dns.config import Server
from reconcile.errors import TransientError

__all__ = ["Connections", "where"]

_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def where(server: Server) -> str:
    """``address:port``, as messages name a server."""
    return f"{server.address}:{server.port}"


class Connections:
    """Idle TCP connections to each server, reused for queries and updates (a server
    answers many messages on one connection): no handshake per message. A connection
    that fails, or whose exchange was cut short, is closed (an answer still on its way
    would be read as the next message's); one the server closed while idle is replaced
    once."""

    def __init__(self) -> None:
        self._idle: dict[Server, list[_Stream]] = {}

    async def exchange(self, server: Server, message: bytes, seconds: float) -> bytes:
        """Send ``message`` to ``server`` on a connection; its answer, within ``seconds``
        (connecting included). A server that cannot be reached, closes the connection or
        does not answer in time is a TransientError."""
        try:
            async with asyncio.timeout(seconds):
                return await self._exchange(server, message)
        except TimeoutError as exc:
            reason = f"no answer in {seconds:g} s"
            raise TransientError(f"DNS server {where(server)} is unreachable: {reason}") from exc
        except (OSError, EOFError) as exc:
            reason = str(exc) or type(exc).__name__
            raise TransientError(f"DNS server {where(server)} is unreachable: {reason}") from exc

    async def _exchange(self, server: Server, message: bytes) -> bytes:
        idle = self._idle.setdefault(server, [])
        framed = len(message).to_bytes(2, "big") + message
        for attempt in range(2):
            fresh = attempt > 0 or not idle
            if fresh:
                reader, writer = await asyncio.open_connection(server.address, server.port)
            else:
                reader, writer = idle.pop()
            try:
                writer.write(framed)
                length = int.from_bytes(await reader.readexactly(2), "big")
                answer = await reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                _close(writer)
                if fresh:
                    raise
                continue  # a connection the server closed while idle: once more, fresh
            except BaseException:
                _close(writer)
                raise
            idle.append((reader, writer))
            return answer
        raise AssertionError  # pragma: no cover - the loop returns or raises

    async def close(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            while idle:
                _, writer = idle.pop()
                _close(writer)
                with contextlib.suppress(Exception):
                    await writer.wait_closed()


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
