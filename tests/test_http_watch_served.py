"""The HTTP API's watches over real sockets, against ``reconcile serve``: a thousand
watchers, one that never reads, chunked streams read by httpx, kubectl (get -w, wait,
get --raw) and the kubernetes Python client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from http_helpers import kubeconfig, kubectl, served
from watch_helpers import FILES, eventually, manifest, types

from reconcile.api import connect


async def _open_watch(host: str, port: int, query: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {FILES}?{query} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return reader, writer


async def _chunk(reader: asyncio.StreamReader) -> bytes:
    """The next chunk of a chunked response."""
    size = int((await reader.readuntil(b"\r\n")).strip(), 16)
    return (await reader.readexactly(size + 2))[:-2]


async def _read_to_the_end(reader: asyncio.StreamReader) -> list[dict[str, Any]]:
    """Every whole event line of a chunked stream until its end or the connection's."""
    data = b""
    try:
        while chunk := await _chunk(reader):
            data += chunk
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line]


class TestServed:
    """Watches over real sockets, against ``reconcile serve``."""

    @pytest.mark.slow
    async def test_a_thousand_watchers_each_get_the_change(self, tmp_path: Path) -> None:
        """1,000 concurrent watch connections: each receives the change; the server answers
        GETs meanwhile and after they all go."""
        db = tmp_path / "state.db"
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            head = await client.revision()
            with served(db) as url:
                host, port = url.removeprefix("http://").rsplit(":", 1)
                query = f"watch=true&resourceVersion={head}"
                watchers = [await _open_watch(host, int(port), query) for _ in range(1000)]
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    during = await http.get(FILES)
                    await client.apply(manifest("index", content="changed\n"), origin=tmp_path / "a.yaml")
                    lines = await asyncio.wait_for(
                        asyncio.gather(*(_chunk(reader) for reader, _ in watchers)), 120
                    )
                    for _, writer in watchers:
                        writer.close()
                    await asyncio.gather(*(writer.wait_closed() for _, writer in watchers))
                    after = await http.get(FILES)
        assert during.status_code == after.status_code == 200
        assert len(lines) == 1000
        for line in lines:
            event = json.loads(line)
            assert event["type"] == "MODIFIED"
            assert event["object"]["spec"]["content"] == "changed\n"

    @pytest.mark.slow
    async def test_a_socket_that_never_reads_is_cut_off(self, tmp_path: Path) -> None:
        """A client that stops reading (a small receive window, nothing taken): the server
        cuts it off past its backlog bound and its stream ends short of the changes, while
        a watcher beside it gets every one and the server answers GETs."""
        db = tmp_path / "state.db"
        big = "x" * 200_000
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            head = await client.revision()
            with served(db) as url:
                host, port = url.removeprefix("http://").rsplit(":", 1)
                query = f"watch=true&resourceVersion={head}"
                slow_socket = socket.socket()
                slow_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                slow_socket.connect((host, int(port)))
                slow_socket.setblocking(False)  # noqa: FBT003 - socket's own signature
                slow_reader, slow_writer = await asyncio.open_connection(sock=slow_socket, limit=4096)
                slow_writer.write(f"GET {FILES}?{query} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                await slow_reader.readuntil(b"\r\n\r\n")
                fast_reader, fast_writer = await _open_watch(host, int(port), query)
                changes = 60  # 12 MB: past the 4 MiB backlog, the kernel's buffers and the transport's
                fast: list[dict[str, Any]] = []

                async def read_fast() -> None:
                    while len(fast) < changes:
                        fast.extend(json.loads(line) for line in (await _chunk(fast_reader)).splitlines())

                reading = asyncio.ensure_future(read_fast())
                for n in range(changes):
                    await client.apply(manifest("index", content=f"{n}{big}"), origin=tmp_path / "a.yaml")
                    # (in step: the reading watcher never falls behind, whatever the machine's load)
                    await eventually(lambda n=n: len(fast) > n or reading.done(), lambda: "the change")
                await asyncio.wait_for(reading, 60)
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    during = await http.get(f"{FILES}/index")
                slow = await asyncio.wait_for(_read_to_the_end(slow_reader), 60)
                for writer in (slow_writer, fast_writer):
                    writer.close()
                    await writer.wait_closed()
        assert [e["type"] for e in fast] == ["MODIFIED"] * changes
        assert during.status_code == 200
        modified = [e for e in slow if e["type"] == "MODIFIED"]
        assert len(modified) < changes  # cut off, never buffered to the end
        if slow and slow[-1]["type"] == "ERROR":  # (when its socket took the ERROR in time)
            assert (slow[-1]["object"]["code"], slow[-1]["object"]["reason"]) == (410, "Expired")

    async def test_a_stream_over_http_with_its_timeout(self, tmp_path: Path) -> None:
        """httpx reads a chunked stream: the listed object, a change, then the end at
        timeoutSeconds; kubectl get --raw reads the same stream."""
        db = tmp_path / "state.db"
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            with served(db) as url:
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    params = {"watch": "1", "timeoutSeconds": "2"}
                    async with http.stream("GET", FILES, params=params) as response:
                        assert response.headers["transfer-encoding"] == "chunked"
                        events = []
                        async for line in response.aiter_lines():
                            events.append(json.loads(line))
                            if len(events) == 1:
                                await client.apply(manifest("about"), origin=tmp_path / "a.yaml")
                config = kubeconfig(tmp_path / "kubeconfig", url)
                raw = kubectl(config, "get", "--raw", f"{FILES}?watch=true&timeoutSeconds=1")
        assert types(events) == [("ADDED", "index"), ("ADDED", "about")]
        assert types([json.loads(line) for line in raw.stdout.splitlines()]) == [
            ("ADDED", "about"),
            ("ADDED", "index"),
        ]

    async def test_kubectl_get_watch_prints_each_change(self, tmp_path: Path) -> None:
        """kubectl get -w --output-watch-events: the listed rows, then a row per change, in
        the kind's columns (each event's object a Table of its row)."""
        db = tmp_path / "state.db"
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            with served(db) as url:
                config = kubeconfig(tmp_path / "kubeconfig", url)
                process = await asyncio.create_subprocess_exec(
                    "kubectl",
                    "get",
                    "files",
                    "-w",
                    "--output-watch-events",
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env={**os.environ, "KUBECONFIG": str(config), "KUBECACHEDIR": str(tmp_path / "cache")},
                )
                assert process.stdout is not None
                try:

                    async def line() -> list[str]:
                        assert process.stdout is not None
                        return (await asyncio.wait_for(process.stdout.readline(), 60)).decode().split()

                    header, listed = await line(), await line()
                    await client.apply(manifest("about"), origin=tmp_path / "a.yaml")
                    added = await line()
                    await client.apply(manifest("index", content="x\n"), origin=tmp_path / "a.yaml")
                    modified = await line()
                finally:
                    process.terminate()
                    await process.wait()
        assert header[:4] == ["EVENT", "NAME", "READY", "SYNCED"]
        assert listed[:2] == ["ADDED", "index"]
        assert added[:2] == ["ADDED", "about"]
        assert modified[:2] == ["MODIFIED", "index"]

    async def test_the_python_clients_dynamic_watch(self, tmp_path: Path) -> None:
        """The kubernetes Python client's dynamic client: list, then watch from the list's
        resourceVersion (as its informers do), getting the change made in between."""
        db = tmp_path / "state.db"
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            with served(db) as url:
                api_client = kubernetes.config.new_client_from_config(str(kubeconfig(tmp_path / "kc", url)))
                files = kubernetes.dynamic.DynamicClient(api_client).resources.get(
                    api_version="files.reconcile.dev/v1", kind="File"
                )
                listed = await asyncio.to_thread(files.get, namespace="default")
                await client.apply(manifest("about"), origin=tmp_path / "a.yaml")

                def watched() -> list[tuple[str, str]]:
                    stream = files.watch(
                        namespace="default", resource_version=listed.metadata.resourceVersion, timeout=1
                    )
                    return [(event["type"], event["object"].metadata.name) for event in stream]

                events = await asyncio.to_thread(watched)
                api_client.close()
        assert [item.metadata.name for item in listed.items] == ["index"]
        assert events == [("ADDED", "about")]

    async def test_kubectl_wait_sees_the_change_through_its_informer(self, tmp_path: Path) -> None:
        """kubectl wait --for=jsonpath: client-go's informer lists (resourceVersion=0,
        limit, fieldSelector metadata.name), watches with bookmarks, and sees the change."""
        db = tmp_path / "state.db"
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(manifest("index"), origin=tmp_path / "a.yaml")
            with served(db) as url:
                config = kubeconfig(tmp_path / "kubeconfig", url)
                process = await asyncio.create_subprocess_exec(
                    "kubectl",
                    "wait",
                    "--for=jsonpath={.spec.content}=done",
                    "file/index",
                    "--timeout=60s",
                    "-v=6",
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env={**os.environ, "KUBECONFIG": str(config), "KUBECACHEDIR": str(tmp_path / "cache")},
                )
                assert process.stderr is not None
                try:
                    watching = ""
                    while "watch=true" not in watching:  # (its watch is open: change it now)
                        watching = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
                        assert watching, "kubectl ended before it watched"
                    await client.apply(manifest("index", content="done"), origin=tmp_path / "a.yaml")
                    out, _ = await asyncio.wait_for(process.communicate(), 60)
                finally:
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
        assert process.returncode == 0
        assert "condition met" in out.decode()
        assert "allowWatchBookmarks=true" in watching
        assert "fieldSelector=metadata.name%3Dindex" in watching
