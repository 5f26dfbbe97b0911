"""``reconcile run --once --timeout S`` ends within S seconds even when a provider call
hangs: the shutdown deadline fits inside ``--timeout`` (against an S3 endpoint that
accepts connections and never answers, it used to take S plus the 10 s
``--shutdown-deadline``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
#: What the process may take beyond its --timeout: starting Python, the report.
MARGIN = 3.0


@pytest.fixture
def hanging_endpoint() -> Iterator[str]:
    """A loopback TCP server that accepts every connection and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(connection)  # held open, never read from or written to

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        server.close()


class TestOnceTimeout:
    """--timeout bounds the whole of run --once."""

    def test_a_hanging_endpoint_does_not_stretch_it(self, hanging_endpoint: str, tmp_path: Path) -> None:
        """A bucket whose every call hangs: exit 1 naming it, within --timeout plus a margin."""
        config = tmp_path / "providers.yaml"
        config.write_text(f"s3: {{endpoint_url: '{hanging_endpoint}', addressing_style: path}}\n")
        manifest = tmp_path / "bucket.yaml"
        manifest.write_text("apiVersion: s3.reconcile.dev/v1\nkind: Bucket\nmetadata: {name: hung-bucket}\n")
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AWS_ACCESS_KEY_ID": "AKIATESTING",
            "AWS_SECRET_ACCESS_KEY": "testing-secret",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "AWS_CONFIG_FILE": "/nonexistent/aws-config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        }
        base = [sys.executable, "-m", "reconcile", "--db", str(tmp_path / "state.db")]
        base += ["--provider-config", str(config)]
        applied = subprocess.run(
            [*base, "apply", "-f", str(manifest)], env=env, capture_output=True, check=False
        )
        assert applied.returncode == 0, applied.stderr
        timeout = 4.0
        started = time.monotonic()
        once = subprocess.run(
            [*base, "run", "--once", "--timeout", str(timeout)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        took = time.monotonic() - started
        assert once.returncode == 1, once.stderr
        assert "not converged after 4 s" in once.stderr
        assert "Bucket default/hung-bucket" in once.stderr
        assert "Traceback" not in once.stderr
        assert took < timeout + MARGIN, f"run --once --timeout {timeout:g} took {took:.1f} s"
