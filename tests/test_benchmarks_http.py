"""benchmarks/http_api.py at tiny sizes (a smoke test, not a timing), and the socket
``reconcile serve`` listens on: its connections answer without waiting for a delayed ACK."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

from reconcile.http.documents import managed_fields
from reconcile.http.serving import _bound

ROOT = Path(__file__).parents[1]


def run_http_benchmark(tmp_path: Path, *arguments: str) -> tuple[dict[str, dict[str, object]], str]:
    """benchmarks/http_api.py at tiny sizes, one run: its rows by phase and what it printed."""
    out = tmp_path / "http.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "http_api.py"),
            *("--size", "20", "--seconds", "0.2", "--connections", "2", "--runs", "1"),
            *("--json", str(out), *arguments),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["benchmark"] == "http"
    return {row["phase"]: row for row in document["rows"]}, result.stdout


class TestBenchmark:
    """The benchmark measures every read beside both its limits, in one run."""

    def test_reads_beside_the_bare_handler_and_the_client(self, tmp_path: Path) -> None:
        """GET of one object and a list, each over HTTP, from a bare handler on the same
        server, from the real reconcile serve with a bearer token and through the client
        in-process: every side answered (a failed request fails the run), ratios recorded."""
        rows, printed = run_http_benchmark(tmp_path, "--changes", "0")
        assert set(rows) == {"get one", "list"}
        for row in rows.values():
            for side in ("bare_per_s", "http_per_s", "serve_per_s", "client_per_s"):
                figures = row[side]
                assert isinstance(figures, dict)
                assert 0 < figures["min"] <= figures["median"] <= figures["max"]
            assert isinstance(row["ratio_to_bare"], float)
            assert row["ratio_to_bare"] > 0
            cpu = row["server_cpu_us"]
            assert isinstance(cpu, dict)
            assert cpu["http"]["median"] > 0
            assert cpu["serve"]["median"] > 0
        assert "http / bare" in printed


class TestServingSocket:
    """The socket ``reconcile serve`` binds."""

    async def test_accepted_connections_do_not_wait_for_a_delayed_ack(self) -> None:
        """Each accepted connection has TCP_NODELAY (asyncio sets it only on a socket
        made for TCP): without it, every answer after a connection's first, whose headers
        and body uvicorn writes apart, waited 40 ms for the client's delayed ACK."""
        sock = _bound("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def accepted(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted_socket = writer.get_extra_info("socket")
            seen.set_result(accepted_socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
            assert await asyncio.wait_for(seen, 10) != 0
            writer.close()
        finally:
            server.close()
            await server.wait_closed()


class TestWireForm:
    """What the read path's speed-ups must keep."""

    def test_managed_fields_entries_are_each_documents_own(self) -> None:
        """The entries built once for a set of managers are handed out as copies: a
        caller changing one document's entries changes no other document's."""
        body = {
            "apiVersion": "example.reconcile.dev/v1",
            "metadata": {
                "managedFields": {"reconcile": ["spec/size", "labels/app"], "ci (Update)": ["spec/x"]}
            },
        }
        first = managed_fields(body)
        first[0]["fieldsV1"]["f:spec"]["f:changed"] = {}
        first[1]["manager"] = "changed"
        again = managed_fields(body)
        assert again == [
            {
                "manager": "ci",
                "operation": "Update",
                "apiVersion": "example.reconcile.dev/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:x": {}}},
            },
            {
                "manager": "reconcile",
                "operation": "Apply",
                "apiVersion": "example.reconcile.dev/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:size": {}}},
            },
        ]


class TestWatchBenchmark:
    """The watch case: changes written in the server reach every watcher."""

    def test_every_watcher_gets_every_change(self, tmp_path: Path) -> None:
        """A few watchers over HTTP and as many on the store's watch each get every one
        of the changes (nothing lost, nobody cut off), with latencies and the write rate."""
        rows, printed = run_http_benchmark(
            tmp_path, "--changes", "40", "--watchers", "3", "--rate", "0", "--seconds", "0.1"
        )
        watch = rows["watch"]
        assert watch["lost_http"] == 0
        assert watch["lost_store"] == 0
        assert watch["cut_off_http"] == 0
        for side in ("http", "store"):
            p50, p99 = watch[f"{side}_p50_ms"], watch[f"{side}_p99_ms"]
            assert isinstance(p50, dict)
            assert isinstance(p99, dict)
            assert p50["median"] <= p99["median"]
            written = watch[f"{side}_written_per_s"]
            assert isinstance(written, dict)
            assert written["median"] > 0
        assert "watch: 40 changes to 3 watchers" in printed
