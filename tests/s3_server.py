"""moto_server for the s3 provider's tests: a real S3 HTTP server on a free loopback
port, started once per session, reset between tests through its reset endpoint.

Under ``CI=true`` a server that does not start fails the run; elsewhere the tests that
need it are skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

START_DEADLINE = 30.0  # seconds moto_server may take to answer


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - a loopback URL we built
            return True
    except OSError:
        return False


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"moto_server is required under CI=true: {reason}")
    pytest.skip(f"SKIPPED LOUDLY: no S3 server for the s3 provider's tests: {reason}")


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Run moto_server; yield its endpoint URL; stop it."""
    executable = Path(sys.executable).parent / "moto_server"
    command = str(executable) if executable.exists() else shutil.which("moto_server")
    if command is None:
        _unavailable("the moto_server command is not installed (pip install 'moto[server]')")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Its request log goes to a file: a pipe nobody reads fills up after a few hundred
    # requests, and the server then blocks writing to it.
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    process = subprocess.Popen(
        [str(command), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not _answers(f"{url}/moto-api/"):  # a condition with a deadline, not a sleep for a result
            if process.poll() is not None:
                log.seek(0)
                error = log.read().decode(errors="replace")[-500:]
                _unavailable(f"moto_server exited with {process.returncode}: {error}")
            if time.monotonic() > deadline:
                _unavailable(f"moto_server did not answer on {url} within {START_DEADLINE:g} s")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def reset(url: str) -> None:
    """Forget every bucket (moto's reset endpoint)."""
    request = urllib.request.Request(f"{url}/moto-api/reset", method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - a loopback URL we built
        pass
