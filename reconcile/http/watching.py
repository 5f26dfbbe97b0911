"""``watch=true``: a kind's changes as a stream of watch events, as client-go's reflector
and ``kubectl get -w`` read them (a chunked ``application/json`` response, one event per
line; :mod:`reconcile.http.watch_events`).

Where the stream starts (Kubernetes' rules): with ``resourceVersion`` N, at the events
after N; without one (or ``"0"``), with the current objects as ADDED events, then their
changes; ``sendInitialEvents=true`` (with ``resourceVersionMatch=NotOlderThan``) does the
same and ends the initial events with a BOOKMARK annotated
``k8s.io/initial-events-end: "true"``; ``sendInitialEvents=false`` without a version
starts at the head. A version before the store's compaction horizon gets an ERROR event
with a 410 Expired ``Status`` (client-go relists on it); one after the head, a 504
(Kubernetes' "Too large resource version").

Each watch is three tasks beside the request's own, which supervises them:

* the *reader* follows the store's watch (``EventStore.watch``: no polling of our own)
  and puts each event's line in the watcher's :class:`~reconcile.http.backlog.Backlog`;
* the *sender* writes what the backlog holds to the socket, in one chunk per wake, and a
  BOOKMARK every ``bookmark_interval`` with ``allowWatchBookmarks=true``;
* the *listener* waits for the client to go away (``http.disconnect``).

The watch ends when its ``timeoutSeconds`` pass, when the app closes its watches
(:func:`~reconcile.http.watchers.close_watches`), when the store closes (the stream
finishes cleanly, after what the backlog holds), when the client goes (everything is
cancelled at once), or when the backlog outgrows its bound: a client that reads slower
than changes come is cut off -- its backlog dropped, an ERROR event with a 410 Expired
``Status`` ("relist") sent when the socket takes it within ``grace`` seconds -- so no
watcher holds more than the bound, however slow its client. Every task is ended and
awaited before the request returns, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from reconcile.errors import ExpiredError
from reconcile.http.backlog import Backlog
from reconcile.http.context import Target, state
from reconcile.http.errors import status_of
from reconcile.http.limits import client_key
from reconcile.http.listing import ListOptions, too_large
from reconcile.http.tables import table, wants_table
from reconcile.http.watch_events import Tabulate, Translator, bookmark_line, error_line
from reconcile.http.watchers import Watchers, watchers_of
from reconcile.model.events import Bookmark
from reconcile.store import StoredObject

__all__ = ["Watch", "WatchResponse", "tabulate_for", "watch_objects"]


class Ending(enum.Enum):
    """How a watch's reader stopped."""

    #: The store closed (its watch ended).
    STORE_CLOSED = "store closed"
    #: The backlog outgrew its bound.
    CUT_OFF = "cut off"


async def _aclose(iterator: AsyncIterator[Any]) -> None:
    close: Callable[[], Awaitable[None]] | None = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


async def _cancel(*tasks: asyncio.Future[Any]) -> None:
    """Cancel ``tasks`` and wait until they have ended (a cancellation of the caller
    still propagates); their failures are taken as answered."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.exception()


class Watch:
    """One client's watch of a kind (made by :func:`watch_objects`, run by its response)."""

    def __init__(self, request: Request, found: Target, options: ListOptions, watchers: Watchers) -> None:
        self._state = state(request)
        self._found = found
        self._options = options
        self._watchers = watchers
        #: Whom the watch's place counts against (its user, or its address).
        self.client = client_key(request.scope)
        limits = watchers.limits
        self.backlog = Backlog(max_events=limits.max_backlog_events, max_bytes=limits.max_backlog_bytes)
        self._translator = Translator(
            self._state.client, found, options.selection, watchers.objects, tabulate_for(request, found)
        )
        seconds = options.timeout_seconds
        self._timeout = (
            float(seconds) if seconds else limits.min_timeout * (1.0 + random.random())  # noqa: S311
        )
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: The latest revision the client has been sent everything up to.
        self.delivered = options.resource_version or 0
        #: Where the stream starts (:meth:`_begin`): after this revision, with these
        #: objects first (None: no list).
        self._since = 0
        self._listed: Sequence[StoredObject] | None = None

    def close(self) -> None:
        """End the watch cleanly (the app is shutting down)."""
        if not self._closed.done():
            self._closed.set_result(None)

    # -- the reader ---------------------------------------------------------------------

    def _namespace(self) -> str | None:
        return self._found.namespace or self._options.selection.namespace()

    async def _begin(self) -> None:
        """Decide where the stream starts, before the response does (a watch without a
        version starts at the state of when it was asked, as the apiserver's): the
        revision after which it follows the store, and the objects it lists first."""
        client, kind, options = self._state.client, self._found.resource.kind, self._options
        initial = options.send_initial_events
        if initial is None:
            initial = not options.resource_version
        if initial:
            selection = options.selection
            page = await client.store.list(
                kind.api_group,
                kind.kind,
                namespace=self._namespace(),
                predicate=None if selection.everything else selection.matches,
            )
            self._listed, self._since = page.items, page.revision
        elif options.resource_version:
            self._since = options.resource_version
        else:
            self._since = await client.store.revision()

    async def _read(self) -> Ending:
        """Queue the listed objects (ADDED), then follow the store into the backlog until
        it closes or the backlog overflows."""
        client, kind, since = self._state.client, self._found.resource.kind, self._since
        if self._listed is not None:
            for listed in self._listed:
                # (revision 0: no bookmark may name a revision until the whole list is sent)
                await self.backlog.put_waiting(self._translator.listed(listed), 0)
            self._listed = ()
            self._translator.complete = True
            if self._options.send_initial_events:
                end = bookmark_line(self._found, since, initial_events_end=True)
                await self.backlog.put_waiting(end, since)
        self.backlog.mark(since)
        events = client.store.watch(
            since=since, api_group=kind.api_group, kind=kind.kind, namespace=self._namespace()
        )
        try:
            async for item in events:
                if isinstance(item, Bookmark):
                    self.backlog.mark(item.revision)
                    continue
                line = await self._translator.line(item)
                if line is not None and not self.backlog.put(line, item.revision):
                    return Ending.CUT_OFF
        finally:
            await _aclose(events)
        return Ending.STORE_CLOSED

    # -- the sender ---------------------------------------------------------------------

    async def _send(self, send: Send) -> None:
        """Write the backlog to the socket (and bookmarks) until it is finished."""
        loop = asyncio.get_running_loop()
        bookmarks = self._options.allow_bookmarks
        interval = self._watchers.limits.bookmark_interval
        next_bookmark = loop.time() + interval
        while True:
            await self.backlog.wait(next_bookmark - loop.time() if bookmarks else None)
            finished = self.backlog.finished
            lines, revision = self.backlog.take()
            if lines:
                await _body(send, b"".join(lines))
            self.delivered = max(self.delivered, revision)
            if finished and self.backlog.empty:
                return
            if bookmarks and loop.time() >= next_bookmark:
                if self.delivered:
                    await _body(send, bookmark_line(self._found, self.delivered))
                next_bookmark = loop.time() + interval

    # -- the whole ------------------------------------------------------------------------

    async def run(self, receive: Receive, send: Send) -> None:
        """Stream the watch to the client; return once it has ended and every task with it."""
        grace = self._watchers.limits.grace
        self._watchers.opened(self)
        try:
            await self._begin()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"cache-control", b"no-cache, private"),
                    ],
                }
            )
            reader = asyncio.ensure_future(self._read())
            sender = asyncio.ensure_future(self._send(send))
            listener = asyncio.ensure_future(_disconnected(receive))
            try:
                every: set[asyncio.Future[Any]] = {reader, sender, listener, self._closed}
                await asyncio.wait(
                    every,
                    timeout=self._timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if listener.done() or (sender.done() and sender.exception() is not None):
                    return  # the client went (or its socket failed): nothing more to send
                last = b""
                if reader.done():
                    try:
                        ending = reader.result()
                    except ExpiredError as exc:
                        since = self._options.resource_version or 0
                        last = _expired(f"too old resource version: {since} ({exc.horizon - 1})")
                    except Exception as exc:  # noqa: BLE001 - told to the client as a Status
                        error = status_of(exc)
                        last = error_line(error.code, error.message, error.reason)
                    else:
                        if ending is Ending.CUT_OFF:
                            self.backlog.clear()
                            await _cancel(sender)
                            last = _expired(
                                "the watch fell too far behind (more than "
                                f"{self.backlog.max_events} events or {self.backlog.max_bytes} bytes "
                                "unsent) and was cut off; relist"
                            )
                await _cancel(reader)
                if not sender.done():
                    self.backlog.finish()
                    await asyncio.wait({sender, listener}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
                    if listener.done():
                        return
                    if not sender.done():
                        return  # (the client does not read: drop it; the server closes the socket)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(grace):
                        if last:
                            await _body(send, last)
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                await _cancel(reader, sender, listener)
        finally:
            self._watchers.release(self, self.client)


async def _body(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


def _expired(message: str) -> bytes:
    return error_line(410, message, "Expired")


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


class WatchResponse(Response):
    """The streamed response of a watch."""

    def __init__(self, watch: Watch) -> None:
        # (no body, no content-length: the events are streamed by __call__)
        self.status_code = 200
        self.background = None
        self.body = b""
        self.raw_headers = [(b"content-type", b"application/json")]
        self._watch = watch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: ARG002
        """Run the watch."""
        await self._watch.run(receive, send)


def tabulate_for(request: Request, found: Target) -> Tabulate | None:
    """How a watch that asks for tables (``kubectl get -w``) shows each event's object: a
    Table of its one row, as the apiserver sends it (a 400 now, before the stream, for an
    ``includeObject`` the tables refuse); None for a watch of documents."""
    if not wants_table(request):
        return None
    client = state(request).client

    def tabulate(document: dict[str, Any], first: bool) -> dict[str, Any]:
        now = datetime.datetime.fromtimestamp(client.clock(), datetime.UTC)
        revision = str(document["metadata"].get("resourceVersion", ""))
        return table(request, found.resource, [document], now=now, resource_version=revision, headers=first)

    table(request, found.resource, [], now=datetime.datetime.now(datetime.UTC), resource_version="")
    return tabulate


async def watch_objects(request: Request, found: Target, options: ListOptions) -> Response:
    """The response of ``GET .../{plural}?watch=true``: checked before any byte is sent
    (the watcher cap: 429; a version after the head: 504), streamed after."""
    watchers = watchers_of(request)
    asked = options.resource_version
    if asked:
        head = await state(request).client.store.revision()
        if asked > head:
            raise too_large(asked, head)
    client = client_key(request.scope)
    watchers.reserve(client)
    try:
        watch = Watch(request, found, options, watchers)
    except BaseException:
        watchers.release(None, client)
        raise
    return WatchResponse(watch)
