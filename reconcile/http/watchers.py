"""Every open watch of one app, and the limits that keep them from taking the server
down: how many may be open at once (beyond it, a 429 with ``Retry-After``), how much one
may hold unsent (beyond it, it is cut off), how often bookmarks go out, how long a watch
lasts when its client names no ``timeoutSeconds``.

The registry also ends them all at shutdown (:func:`close_watches`): a server that waits
for its connections to finish would otherwise wait for the watches' timeouts, half an
hour or more. And it keeps the encoded objects of the latest events
(:class:`WireObjects`), so that a change seen by a thousand watchers is decoded and
encoded once, not a thousand times.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

import attrs
from starlette.requests import Request

from reconcile.http.context import ApiState, state
from reconcile.http.errors import ApiError
from reconcile.http.shutdown import on_shutdown

__all__ = [
    "WatchLimits",
    "Watchers",
    "WireObjects",
    "close_watches",
    "configure_watches",
    "watchers_of",
]

#: Where the registry lives in :attr:`ApiState.extras`.
EXTRAS_KEY = "watchers"


@attrs.frozen
class WatchLimits:
    """The limits on an app's watches (``create_app(client, watch_limits=...)``)."""

    #: Watches open at once; one more is refused with 429 TooManyRequests.
    max_watchers: int = 4096
    #: Watches one client (its user; the anonymous by address) may hold open at once, so
    #: that one cannot take every place (0: no cap of its own).
    max_watchers_per_client: int = 1024
    #: Events a watcher may hold unsent before it is cut off (a 410 ERROR event).
    max_backlog_events: int = 1000
    #: Bytes of events a watcher may hold unsent before it is cut off.
    max_backlog_bytes: int = 4 * 1024 * 1024
    #: Seconds between bookmarks (``allowWatchBookmarks=true``): Kubernetes' minute.
    bookmark_interval: float = 60.0
    #: A watch without ``timeoutSeconds`` ends after between this and twice this many
    #: seconds (the apiserver's ``--min-request-timeout``, 1800), so watches spread out.
    min_timeout: float = 1800.0
    #: Seconds a watch that ends (cut off, timed out, closed) gives its client to take
    #: its last events before the connection is dropped.
    grace: float = 5.0
    #: ``Retry-After`` of the 429 beyond ``max_watchers``.
    retry_after: int = 1


class Closable(Protocol):
    """An open watch, as the registry ends it."""

    def close(self) -> None:
        """End the watch (its stream finishes cleanly)."""


class WireObjects:
    """The encoded wire objects of the latest events, by (revision, apiVersion): shared
    by every watcher, bounded in entries and bytes (the oldest go first)."""

    def __init__(self, max_entries: int = 2048, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: collections.OrderedDict[tuple[int, str], bytes] = collections.OrderedDict()
        self._bytes = 0

    def get(self, revision: int, api_version: str, make: Callable[[], bytes]) -> bytes:
        """The object of ``revision`` in ``api_version``, made by ``make`` when not kept."""
        key = (revision, api_version)
        found = self._entries.get(key)
        if found is None:
            found = make()
            self._entries[key] = found
            self._bytes += len(found)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)
        return found

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()
        self._bytes = 0


class Watchers:
    """The open watches of one app, and their limits."""

    def __init__(self, limits: WatchLimits | None = None) -> None:
        self.limits = limits or WatchLimits()
        self.objects = WireObjects()
        self._open: set[Closable] = set()
        self._reserved = 0
        self._per_client: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.closing = False

    @property
    def watches(self) -> tuple[Closable, ...]:
        """The watches streaming now."""
        return tuple(self._open)

    @property
    def count(self) -> int:
        """Watches open (or about to open)."""
        return self._reserved

    def reserve(self, client: str = "") -> None:
        """Take a place for a new watch of ``client`` (:func:`~reconcile.http.limits.client_key`):
        a 429 when every place, or every place of one client, is taken; a 503 once the app
        is closing its watches."""
        if self.closing:
            raise ApiError(503, "the server is shutting down", headers={"Retry-After": "1"})
        per_client = self.limits.max_watchers_per_client
        if self._reserved >= self.limits.max_watchers:
            raise self._too_many(f"too many watches open ({self.limits.max_watchers})")
        if per_client and self._per_client.get(client, 0) >= per_client:
            raise self._too_many(f"too many watches open for one client ({per_client})")
        self._reserved += 1
        self._per_client[client] = self._per_client.get(client, 0) + 1
        self._idle.clear()

    def _too_many(self, what: str) -> ApiError:
        retry = self.limits.retry_after
        return ApiError(
            429,
            f"{what}; try again later",
            details={"retryAfterSeconds": retry},
            headers={"Retry-After": str(retry)},
        )

    def opened(self, watch: Closable) -> None:
        """A reserved watch started streaming."""
        self._open.add(watch)
        if self.closing:
            watch.close()

    def release(self, watch: Closable | None, client: str = "") -> None:
        """A watch of ``client`` ended (or never started): its place is free."""
        if watch is not None:
            self._open.discard(watch)
        left = self._per_client.get(client, 0) - 1
        if left > 0:
            self._per_client[client] = left
        else:
            self._per_client.pop(client, None)
        self._reserved -= 1
        if self._reserved <= 0:
            self._reserved = 0
            self._idle.set()
            if not self.closing:
                self.objects.clear()

    async def close_all(self, within: float | None = None) -> int:
        """End every open watch and refuse new ones; wait (up to ``within`` seconds)
        until all have finished. How many were open."""
        self.closing = True
        open_now = list(self._open)
        for watch in open_now:
            watch.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._idle.wait()
        return len(open_now)


def watchers_of(holder: ApiState | Request | Any) -> Watchers:
    """The watch registry of an app, of its state, or of a request's app (made with the
    default limits when the app was built without any)."""
    found: ApiState
    if isinstance(holder, ApiState):
        found = holder
    elif isinstance(holder, Request):
        found = state(holder)
    else:
        found = holder.state.reconcile
    registry = found.extras.get(EXTRAS_KEY)
    if registry is None:
        registry = found.extras[EXTRAS_KEY] = Watchers()
    assert isinstance(registry, Watchers)
    return registry


def configure_watches(found: ApiState, limits: WatchLimits | None) -> Watchers:
    """Give an app's state its watch registry, with ``limits``, and a shutdown hook that
    ends every open watch (:meth:`Watchers.close_all`, within the limits' ``grace``)."""
    registry = Watchers(limits)
    found.extras[EXTRAS_KEY] = registry

    async def end_watches() -> None:
        await registry.close_all(registry.limits.grace)

    on_shutdown(found, end_watches)  # reconcile serve runs them once it stops accepting
    return registry


async def close_watches(app: Any, *, within: float | None = 10.0) -> int:
    """End every open watch of ``app`` (a Starlette app from ``create_app``) cleanly --
    each stream's last events are sent and its response finished -- and refuse new
    watches (503); wait up to ``within`` seconds for them to finish. For a server's
    shutdown, before it waits for its connections to close. How many were open."""
    return await watchers_of(app).close_all(within)
