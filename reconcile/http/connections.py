"""The server's HTTP/1.1 connections: uvicorn's h11 protocol with four additions.

- **A deadline for the request's headers.** uvicorn limits their size
  (``h11_max_incomplete_event_size``) and how long an idle keep-alive connection stays
  open (``timeout_keep_alive``), but not how long a request may take to send its
  headers: a client sending them a byte at a time (slow-loris) held its connection,
  and a slot of the server, for ever. Here the clock starts when a connection opens or
  when the first byte of its next request arrives, and the connection is closed when the
  headers are not complete within ``header_timeout`` seconds (Go's ``ReadHeaderTimeout``).
  The body's own deadline is :mod:`reconcile.http.limits`' job.
- **A deadline for a client that takes nothing.** A response the client does not read
  fills the socket's buffers, and uvicorn then waits for room without end: the request
  held its handler, its place among the requests in flight and its memory for ever (a
  list of many objects, asked for and never read). Here the connection is dropped when
  its writes stay paused (the client took nothing) for ``write_timeout`` seconds. A
  watcher that stops reading meets it too, if its own cut-off has not ended it first.
- **A prompt graceful stop under TLS**: an idle connection is dropped at once (see
  :meth:`_Connection.shutdown`).
- **The verified TLS client certificate** in the ASGI scope
  (:data:`~reconcile.http.authn.PEER_CERTIFICATE_SCOPE_KEY`), for authentication by
  client certificate: uvicorn does not pass it on.

:func:`protocol_class` makes the protocol class for ``uvicorn.Config(http=...)``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from reconcile.http.authn import PEER_CERTIFICATE_SCOPE_KEY

__all__ = ["protocol_class"]

logger = logging.getLogger("reconcile.http")


class _WithCertificate:
    """The app, for one connection's requests: its client certificate in each scope."""

    def __init__(self, app: ASGIApp, certificate: dict[str, Any]) -> None:
        self.app = app
        self.certificate = certificate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[PEER_CERTIFICATE_SCOPE_KEY] = self.certificate
        await self.app(scope, receive, send)


class _Connection(H11Protocol):
    """uvicorn's h11 connection with a header deadline and the peer's certificate."""

    header_timeout: float = 10.0
    write_timeout: float = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        if certificate:  # verified by the TLS layer against the client CA
            self.app = _WithCertificate(self.app, certificate)
        self._start_header_clock()

    def _start_header_clock(self) -> None:
        if self._header_deadline is None and not self.transport.is_closing():
            self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _stop_header_clock(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            client = self.client[0] if self.client else "unknown"
            logger.info(
                "closed a connection from %s: no request headers within %g s", client, self.header_timeout
            )
            self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.write_timeout, self._writes_too_slow)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _writes_too_slow(self) -> None:
        self._write_deadline = None
        client = self.client[0] if self.client else "unknown"
        logger.info("dropped a connection from %s: it took nothing for %g s", client, self.write_timeout)
        self.transport.abort()  # connection_lost follows: the response's writes end at once

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._start_header_clock()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._stop_header_clock()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A pipelined request's first bytes may be waiting already: its clock runs now.
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._start_header_clock()

    def shutdown(self) -> None:
        """Close an idle connection at a graceful stop; under TLS, without waiting for the
        client's close_notify (asyncio waits up to 30 s for it, and a client's pooled idle
        connection never sends it: the stop would wait for nothing)."""
        idle = self.cycle is None or self.cycle.response_complete
        super().shutdown()
        tls = self.transport.get_extra_info("ssl_object") is not None
        if idle and tls and not self.transport.get_write_buffer_size():
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_clock()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        super().connection_lost(exc)


def protocol_class(header_timeout: float, write_timeout: float = 60.0) -> type[asyncio.Protocol]:
    """The connection class for ``uvicorn.Config(http=...)``, with ``header_timeout`` and
    ``write_timeout`` (seconds a client may take nothing of a response being written)."""
    return type(
        "Connection", (_Connection,), {"header_timeout": header_timeout, "write_timeout": write_timeout}
    )
