"""A small asyncio DNS-over-TCP server of the tests' own: it answers each framed message
with what the test says, without a real server's rules."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from reconcile_providers.dns.config import Server

__all__ = ["Echo", "serving"]


class Echo:
    """A TCP server answering each framed message with ``reply(message)`` (None: no
    answer), counting connections; ``close_idle`` ends a connection after one answer."""

    def __init__(self, reply: Callable[[bytes], bytes | None], *, close_idle: bool = False) -> None:
        self.reply, self.close_idle, self.connections = reply, close_idle, 0
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection."""
        self.connections += 1
        self.writers.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                length = int.from_bytes(await reader.readexactly(2), "big")
                answer = self.reply(await reader.readexactly(length))
                if answer is not None:
                    writer.write(len(answer).to_bytes(2, "big") + answer)
                    await writer.drain()
                if self.close_idle:
                    break
        writer.close()

    @property
    def where(self) -> Server:
        """The server, as the provider's config names one."""
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return Server(host, port, ("example.test.",))


@contextlib.asynccontextmanager
async def serving(echo: Echo) -> AsyncIterator[Echo]:
    """``echo`` listening on a free loopback port; closed, with every connection, after."""
    echo.server = await asyncio.start_server(echo.handle, "127.0.0.1", 0)
    try:
        yield echo
    finally:
        echo.server.close()
        for writer in echo.writers:  # the server's side of every connection, closed too
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await echo.server.wait_closed()
