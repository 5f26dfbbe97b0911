"""Helpers of the watch tests: a watch request run in-process against the ASGI app and
read as it streams (httpx's ASGI transport waits for a response to finish, which a watch
does not), with a client that may stop reading or go away; and a wait on a condition with
a deadline, for asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette

from reconcile.annotations import FINALIZER
from reconcile.api import Client, connect
from reconcile.http import create_app

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"


def manifest(
    name: str, *, app: str = "site", content: str = "hello\n", namespace: str = "default"
) -> dict[str, Any]:
    """A File manifest."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"path": f"{namespace}-{name}.html", "content": content},
    }


async def remove(client: Client, name: str, namespace: str = "default") -> None:
    """Delete a File for good: the deletion (which sets deletionTimestamp, the object
    holding the engine's finalizer), then the finalizer's removal (no controller runs here)."""
    await client.delete("File", name, namespace=namespace)
    await client.remove_finalizer("File", name, FINALIZER, namespace=namespace)


@contextlib.asynccontextmanager
async def app_over(
    tmp_path: Path, *, store: str | None = None, **app_options: Any
) -> AsyncIterator[tuple[Client, Starlette]]:
    """A client on a store (a SQLite file unless ``store`` names another) and the app over it."""
    async with connect(store or f"sqlite:///{tmp_path / 'api.db'}") as client:
        yield client, create_app(client, **app_options)


async def eventually(predicate: Callable[[], bool], what: Callable[[], str], within: float = 30.0) -> None:
    """Wait (yielding to the loop) until ``predicate`` holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, f"not within {within} s: {what()}"
        await asyncio.sleep(0.005)


class Stream:
    """One watch request in flight: its status, headers and the events read so far."""

    def __init__(self, app: Starlette, path: str, params: dict[str, str]) -> None:
        self._app = app
        self._scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": urlencode(params).encode(),
            "root_path": "",
            "headers": [(b"host", b"reconcile"), (b"accept", b"application/json")],
            "client": ("127.0.0.1", 50000),
            "server": ("reconcile", 80),
        }
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.ended = False
        #: Body sends the app attempted (a blocked client counts those it never took).
        self.attempts = 0
        self._started = asyncio.Event()
        self._gone = asyncio.Event()
        self._reading = asyncio.Event()
        self._reading.set()
        self._first_request = True
        self.task: asyncio.Task[None] | None = None

    async def _receive(self) -> dict[str, Any]:
        if self._first_request:
            self._first_request = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            self._started.set()
            return
        self.attempts += 1
        await self._reading.wait()  # a client that stops reading blocks the sender here
        self.body += message.get("body", b"")
        if not message.get("more_body", False):
            self.ended = True

    async def start(self) -> Stream:
        """Send the request; return once the response has started (or finished)."""
        self.task = asyncio.ensure_future(self._app(self._scope, self._receive, self._send))
        started = asyncio.ensure_future(self._started.wait())
        await asyncio.wait({started, self.task}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        assert self.status is not None, "the response did not start"
        return self

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every whole event line received so far."""
        return [json.loads(line) for line in self.body.split(b"\n")[:-1] if line]

    def json(self) -> Any:
        """The body of a response that is not a stream."""
        return json.loads(self.body)

    async def wait_events(self, count: int, within: float = 30.0) -> list[dict[str, Any]]:
        """The first ``count`` events, once they have come."""
        await eventually(
            lambda: len(self.events) >= count or self.ended,
            lambda: f"{count} events (so far: {types(self.events)})",
            within,
        )
        assert len(self.events) >= count, f"the stream ended after {self.events}"
        return self.events[:count]

    async def wait_ended(self, within: float = 30.0) -> None:
        """Wait until the app has returned."""
        assert self.task is not None
        await asyncio.wait_for(asyncio.shield(self.task), within)

    def stop_reading(self) -> None:
        """Become a client that never reads: every later send blocks."""
        self._reading.clear()

    def read_again(self) -> None:
        """Take what the app sends again."""
        self._reading.set()

    def disconnect(self) -> None:
        """Go away (the app's receive says http.disconnect)."""
        self._gone.set()
        self._reading.set()


async def watch(app: Starlette, path: str = FILES, **params: str) -> Stream:
    """Start a watch (``watch=true`` plus ``params``) on ``path``."""
    return await Stream(app, path, {"watch": "true", **params}).start()


async def request(app: Starlette, path: str, **params: str) -> Stream:
    """A GET run to its end."""
    stream = await Stream(app, path, params).start()
    await stream.wait_ended()
    return stream


def types(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each event's type and its object's name (or resourceVersion for a bookmark)."""
    out = []
    for event in events:
        meta = event["object"].get("metadata", {})
        out.append((event["type"], meta.get("name") or meta.get("resourceVersion", "")))
    return out
