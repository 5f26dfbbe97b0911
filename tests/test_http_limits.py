"""Limits that keep the HTTP API up: the body limit (413), rate and concurrency limits
per client (429 with Retry-After), deadlines against slow clients, and a graceful stop
that ends long requests through the shutdown hooks."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from http_helpers import CHECKOUT, api, serve_process, served, wait_until
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tls_helpers import make_certificates, tls_args

from reconcile.api import connect
from reconcile.http import create_app
from reconcile.http import limits as limits_module
from reconcile.http.authn import Authenticating, Authenticator
from reconcile.http.connections import protocol_class
from reconcile.http.limits import Limits, LimitSettings, long_running
from reconcile.http.serving import _Server
from reconcile.http.shutdown import on_shutdown
from reconcile.http.tokens import hash_token, load_tokens

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"
GATES = "/apis/gates.test/v1/namespaces/default/gates"
ALICE = secrets.token_urlsafe(32)
BOB = secrets.token_urlsafe(32)


class FakeClock:
    """Monotonic time that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        """The time now."""
        return self.now


class Gate:
    """A route whose requests wait until the gate opens, counting those waiting."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.waiting = 0

    async def wait_for(self, count: int, seconds: float = 10) -> None:
        """Until ``count`` requests wait at the gate (failing after ``seconds``)."""
        async with asyncio.timeout(seconds):
            while self.waiting < count:  # noqa: ASYNC110 - in-process: each turn lets the requests run
                await asyncio.sleep(0)

    async def endpoint(self, request: Request) -> Response:  # noqa: ARG002
        """Wait for the gate."""
        self.waiting += 1
        try:
            await self.opened.wait()
        finally:
            self.waiting -= 1
        return Response("through")


def manifest(name: str, content: str, root: Path | None = None) -> dict[str, Any]:
    """A File manifest (confined to ``root`` when given)."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": f"{name}.html", "content": content, **({"root": str(root)} if root else {})},
    }


@contextlib.asynccontextmanager
async def limited(
    tmp_path: Path, settings: LimitSettings, clock: FakeClock | None = None, gate: Gate | None = None
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The app with tokens for alice and bob, then the limits."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{hash_token(ALICE)},alice,1\n{hash_token(BOB)},bob,2\n")
    limit_options: dict[str, Any] = {"settings": settings}
    if clock is not None:
        limit_options["clock"] = clock
    # The gate also at a collection's path, where watch=true is a watch.
    routes = [Route("/gate", gate.endpoint), Route(GATES, gate.endpoint)] if gate is not None else []
    async with api(
        tmp_path,
        routes=routes,
        middleware=[
            Middleware(Authenticating, authenticator=Authenticator(load_tokens(tokens))),
            Middleware(Limits, **limit_options),
        ],
    ) as pair:
        yield pair


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


class TestBodyLimit:
    """413 before the app reads the body; nothing stored."""

    async def test_an_oversized_body_is_413_and_nothing_is_stored(self, tmp_path: Path) -> None:
        """Over the limit by Content-Length or by its chunks: 413; just under: stored."""
        async with limited(tmp_path, LimitSettings(max_body_bytes=2000)) as (client, http):
            big = manifest("big", "x" * 3000, tmp_path)
            declared = await http.post(FILES, json=big, headers=bearer(ALICE))

            async def chunks() -> AsyncIterator[bytes]:
                body = httpx.Request("POST", "/", json=big).content
                for start in range(0, len(body), 500):
                    yield body[start : start + 500]

            chunked = await http.post(
                FILES, content=chunks(), headers=bearer(ALICE) | {"Content-Type": "application/json"}
            )
            before = await client.store.revision()
            small = await http.post(
                FILES, json=manifest("small", "x" * 1000, tmp_path), headers=bearer(ALICE)
            )
            after = await client.store.revision()
        for response in (declared, chunked):
            assert response.status_code == 413
            assert response.json()["reason"] == "RequestEntityTooLarge"
            assert response.json()["message"] == "Request entity too large: limit is 2000 bytes"
        assert before == 0
        assert small.status_code == 201
        assert after == 1


class TestRateAndConcurrency:
    """429 with Retry-After, per client."""

    async def test_rate_limit_per_user(self, tmp_path: Path) -> None:
        """alice's burst spent: 429 with Retry-After; bob still served; alice again after the wait."""
        clock = FakeClock()
        settings = LimitSettings(requests_per_second=2, burst=3)
        async with limited(tmp_path, settings, clock) as (_, http):
            spent = [(await http.get(FILES, headers=bearer(ALICE))).status_code for _ in range(3)]
            refused = await http.get(FILES, headers=bearer(ALICE))
            bob = await http.get(FILES, headers=bearer(BOB))
            clock.now += 0.5  # one token back
            again = await http.get(FILES, headers=bearer(ALICE))
            refused_again = await http.get(FILES, headers=bearer(ALICE))
        assert spent == [200, 200, 200]
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] == "1"
        assert refused.json()["reason"] == "TooManyRequests"
        assert refused.json()["details"]["retryAfterSeconds"] == 1
        assert bob.status_code == 200
        assert again.status_code == 200
        assert refused_again.status_code == 429

    async def test_concurrency_per_client_and_in_all(self, tmp_path: Path) -> None:
        """Two of alice's requests in flight: her third is 429, bob's passes; then the cap in all."""
        gate = Gate()
        settings = LimitSettings(max_inflight_per_client=2, max_inflight=3)
        async with limited(tmp_path, settings, gate=gate) as (_, http):
            held = [asyncio.ensure_future(http.get("/gate", headers=bearer(ALICE))) for _ in range(2)]
            await gate.wait_for(2)
            third = await http.get("/gate", headers=bearer(ALICE))
            watch = asyncio.ensure_future(http.get(f"{GATES}?watch=true", headers=bearer(ALICE)))
            bob = asyncio.ensure_future(http.get("/gate", headers=bearer(BOB)))
            await gate.wait_for(4)
            bob_again = await http.get("/gate", headers=bearer(BOB))  # 3 counted in flight in all
            gate.opened.set()
            answers = await asyncio.gather(*held, watch, bob)
            after = await http.get("/gate", headers=bearer(ALICE))
        assert third.status_code == 429
        assert "2 requests in flight for one client" in third.json()["message"]
        assert bob_again.status_code == 429
        assert "3 requests in flight" in bob_again.json()["message"]
        assert [a.status_code for a in answers] == [200, 200, 200, 200]  # the watch was not counted
        assert after.status_code == 200

    def test_watches_are_long_running(self) -> None:
        """watch=true or 1 on a GET of a collection only."""
        assert long_running({"method": "GET", "path": FILES, "query_string": b"watch=true"})
        assert long_running({"method": "GET", "path": FILES, "query_string": b"limit=1&watch=1"})
        everywhere = "/apis/files.reconcile.dev/v1/files"
        assert long_running({"method": "GET", "path": everywhere, "query_string": b"watch=true"})
        assert not long_running({"method": "GET", "path": FILES, "query_string": b"watch=false"})
        assert not long_running({"method": "POST", "path": FILES, "query_string": b"watch=true"})

    async def test_buckets_are_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Thousands of clients: full (idle) buckets are dropped, so memory stays bounded."""
        monkeypatch.setattr(limits_module, "_BUCKETS_KEPT", 100)
        clock = FakeClock()
        limits = Limits(lambda *_: None, LimitSettings(requests_per_second=10), clock)  # type: ignore[arg-type,return-value]
        for client in range(1000):
            limits._take_token(f"address:{client}")
            clock.now += 1  # each earlier bucket is full again
        assert len(limits._buckets) <= 101


# -- through a real server -------------------------------------------------------------


def address(url: str) -> tuple[str, int]:
    """Host and port of ``url``."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """All the server sends on ``sock`` until it closes it (failing after ``timeout`` s)."""
    sock.settimeout(timeout)
    received = []
    while chunk := sock.recv(65536):
        received.append(chunk)
    return b"".join(received)


def closed_within(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` seconds (reading what it sends)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


@contextlib.contextmanager
def serving_files(tmp_path: Path, *args: str) -> Iterator[str]:
    """``reconcile serve`` over a store holding one file, with ``args``."""
    db = tmp_path / "api.db"

    async def seed() -> None:
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index", "hello\n"), origin=tmp_path / "site.yaml")

    asyncio.run(seed())
    with served(db, *args) as url:
        yield url


@contextlib.contextmanager
def started_server(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``reconcile serve ARGS`` over a store holding one file, as a process this test stops
    itself; yields it and its URL, kills it afterwards if it still runs."""
    db = tmp_path / "api.db"

    async def seed() -> None:
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index", "hello\n"), origin=tmp_path / "site.yaml")

    asyncio.run(seed())
    env = {"PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", "PATH": "/usr/bin:/bin"}
    with serve_process(db, *args, env=env, stderr=subprocess.DEVNULL) as found:
        yield found


class TestSlowClients:
    """Deadlines for headers and bodies; other clients served meanwhile."""

    def test_slow_loris_headers_are_cut_off_while_others_are_served(self, tmp_path: Path) -> None:
        """Headers a byte at a time: closed after --request-header-timeout; a silent
        connection too; meanwhile other clients get their answers."""
        with serving_files(tmp_path, "--request-header-timeout", "1") as url:
            host, port = address(url)
            request = f"GET {FILES} HTTP/1.1\r\nHost: {host}\r\nX-Padding: {'a' * 200}\r\n".encode()
            silent = socket.create_connection((host, port))
            slow = socket.create_connection((host, port))
            outcome: dict[str, float] = {}

            def trickle() -> None:
                started = time.monotonic()
                try:
                    for byte in request:
                        slow.send(bytes([byte]))
                        time.sleep(0.05)  # the slow client's own pace, not a wait for the server
                except OSError:  # the server closed the connection: the point of the test
                    outcome["cut"] = time.monotonic() - started
                    return
                outcome["finished"] = time.monotonic() - started

            thread = threading.Thread(target=trickle)
            thread.start()
            served_meanwhile = 0
            with httpx.Client() as http:
                while thread.is_alive():
                    assert http.get(f"{url}{FILES}/index").status_code == 200
                    served_meanwhile += 1
            thread.join()
            assert closed_within(silent, 10)
            slow.close()
            silent.close()
        assert "cut" in outcome, outcome
        assert 0.9 < outcome["cut"] < 6
        assert served_meanwhile >= 3

    def test_a_slow_body_is_408_and_an_oversized_one_413_unread(self, tmp_path: Path) -> None:
        """Half a body then silence: 408 after --request-body-timeout, connection closed; a
        Content-Length over the limit: 413 at once, with no byte of the body sent."""
        with serving_files(tmp_path, "--request-body-timeout", "1", "--max-body-bytes", "1000") as url:
            host, port = address(url)
            head = f"POST {FILES} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            with socket.create_connection((host, port)) as slow:
                slow.sendall(f"{head}Content-Length: 100\r\n\r\n{{".encode())
                started = time.monotonic()
                answer = read_until_closed(slow, 10)
                took = time.monotonic() - started
            with socket.create_connection((host, port)) as big:
                big.sendall(f"{head}Content-Length: 100000000\r\n\r\n".encode())
                too_large = read_until_closed(big, 10)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"reason":"Timeout"' in answer
        assert 0.9 < took < 6
        assert too_large.startswith(b"HTTP/1.1 413 ")
        assert b"limit is 1000 bytes" in too_large


class TestShutdown:
    """A graceful stop ends long requests through the shutdown hooks."""

    async def test_a_stop_runs_the_hooks_after_it_stops_accepting(self, tmp_path: Path) -> None:
        """A request held open until a hook ends it (as watches are): the stop completes
        well before its deadline; new connections are refused by then."""
        ended = asyncio.Event()
        hook_saw_listener_closed: list[bool] = []

        async def held(request: Request) -> Response:
            await ended.wait()
            return Response("ended by the hook")

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        async with connect(f"sqlite:///{tmp_path / 'api.db'}") as client:
            app = create_app(client, routes=[Route("/held", held)])

            async def end_watches() -> None:
                try:
                    await asyncio.open_connection("127.0.0.1", port)
                    hook_saw_listener_closed.append(False)
                except OSError:
                    hook_saw_listener_closed.append(True)
                ended.set()

            on_shutdown(app.state.reconcile, end_watches)
            config = uvicorn.Config(
                app,
                lifespan="off",
                log_level="warning",
                http=protocol_class(10),
                timeout_graceful_shutdown=30,
            )
            server = _Server(config, app)
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            async with httpx.AsyncClient() as http, asyncio.timeout(30):
                while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag
                    await asyncio.sleep(0.01)
                answer = asyncio.ensure_future(http.get(f"http://127.0.0.1:{port}/held"))
                while not server.server_state.tasks:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                started = time.monotonic()
                server.should_exit = True
                await asyncio.wait_for(serving, 20)
                took = time.monotonic() - started
                response = await answer
        assert hook_saw_listener_closed == [True]
        assert response.text == "ended by the hook"
        assert took < 5

    def test_a_stop_under_tls_does_not_wait_for_idle_clients(self, tmp_path: Path) -> None:
        """An idle keep-alive HTTPS connection (a client's pool): the stop drops it at once
        instead of waiting for its TLS close (asyncio's 30 s) or --shutdown-timeout."""
        paths = make_certificates(tmp_path)
        http = httpx.Client(verify=ssl.create_default_context(cafile=f"{paths['ca']}.crt"))
        try:
            with served(tmp_path / "api.db", *tls_args(paths), "--shutdown-timeout", "20") as url:
                assert http.get(f"{url}/apis/files.reconcile.dev/v1/files").status_code == 200
                started = time.monotonic()
            took = time.monotonic() - started  # served's exit: SIGTERM, then the wait for the process
        finally:
            http.close()
        assert took < 8

    def test_sigterm_ends_an_open_watch_at_once(self, tmp_path: Path) -> None:
        """A watch open (a long request the server would otherwise wait for until
        --shutdown-timeout): the stop's hooks end it, the stream closes, the process exits soon."""
        with started_server(tmp_path, "--shutdown-timeout", "20") as (process, url):
            with httpx.Client(timeout=30) as http, http.stream("GET", f"{url}{FILES}?watch=true") as stream:
                lines = stream.iter_lines()
                assert '"type":"ADDED"' in next(lines)
                started = time.monotonic()
                process.terminate()
                rest = list(lines)  # until the server ends the stream
                ended = time.monotonic() - started
            wait_until(lambda: process.poll() is not None, "the server stopped", timeout=15)
            stopped = time.monotonic() - started
        assert ended < 8
        assert stopped < 8
        assert all('"type":"ERROR"' not in line for line in rest)

    def test_sigterm_stops_the_server_with_a_connection_open(self, tmp_path: Path) -> None:
        """SIGTERM with an idle connection and a request mid-body: the process exits within
        --shutdown-timeout and a little."""
        with started_server(tmp_path, "--shutdown-timeout", "1") as (process, url):
            host, port = address(url)
            idle = socket.create_connection((host, port))
            busy = socket.create_connection((host, port))
            busy.sendall(f"POST {FILES} HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{{".encode())
            started = time.monotonic()
            process.terminate()
            wait_until(lambda: process.poll() is not None, "the server stopped", timeout=15)
            took = time.monotonic() - started
            idle.close()
            busy.close()
        assert took < 8
