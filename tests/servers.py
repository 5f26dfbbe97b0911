"""Real servers the tests start themselves (moto_server, named): a free loopback port,
the process started and waited for until it answers, stopped afterwards.

Under ``CI=true`` a server that does not start fails the run; elsewhere the tests that
need it are skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn

import pytest

START_DEADLINE = 30.0  # seconds a server may take to answer


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unavailable(server: str, needed_by: str, reason: str) -> NoReturn:
    """Fail under CI=true, skip loudly elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{server} is required under CI=true: {reason}")
    pytest.skip(f"SKIPPED LOUDLY: no {server} for {needed_by}: {reason}")


def stop(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Stop a child process: SIGTERM, and SIGKILL if it has not exited within ``timeout``."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running(
    command: Sequence[str],
    *,
    server: str,
    needed_by: str,
    answers: Callable[[], bool],
    log: IO[bytes],
    tail: Callable[[], str],
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` (its output to ``log``), wait until ``answers()`` holds (a
    condition with a deadline, not a sleep for a result), yield it, stop it."""
    process = subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not answers():
            if process.poll() is not None:
                unavailable(server, needed_by, f"it exited with {process.returncode}: {tail()}")
            if time.monotonic() > deadline:
                unavailable(server, needed_by, f"it did not answer within {START_DEADLINE:g} s")
            time.sleep(0.05)
        yield process
    finally:
        stop(process)
