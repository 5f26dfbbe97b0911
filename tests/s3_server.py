"""moto_server for the s3 provider's tests: a real S3 HTTP server on a free loopback
port, started once per session, reset between tests through its reset endpoint.

Under ``CI=true`` a server that does not start fails the run; elsewhere the tests that
need it are skipped with the reason."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from servers import free_port, running, unavailable

NEEDED_BY = "the s3 provider's tests"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - a loopback URL we built
            return True
    except OSError:
        return False


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Run moto_server; yield its endpoint URL; stop it."""
    executable = Path(sys.executable).parent / "moto_server"
    command = str(executable) if executable.exists() else shutil.which("moto_server")
    if command is None:
        unavailable("moto_server", NEEDED_BY, "the command is not installed (pip install 'moto[server]')")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Its request log goes to a file: a pipe nobody reads fills up after a few hundred
    # requests, and the server then blocks writing to it.
    with tempfile.TemporaryFile() as log:

        def tail() -> str:
            log.seek(0)
            return log.read().decode(errors="replace")[-500:]

        with running(
            [command, "-H", "127.0.0.1", "-p", str(port)],
            server="moto_server",
            needed_by=NEEDED_BY,
            answers=lambda: _answers(f"{url}/moto-api/"),
            log=log,
            tail=tail,
        ):
            yield url


def reset(url: str) -> None:
    """Forget every bucket (moto's reset endpoint)."""
    request = urllib.request.Request(f"{url}/moto-api/reset", method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - a loopback URL we built
        pass
