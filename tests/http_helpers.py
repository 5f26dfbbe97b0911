"""Helpers of the HTTP API's tests: the app over a SQLite file store, spoken to in-process
through httpx's ASGI transport, and ``reconcile serve`` as a process for real clients
(kubectl, the kubernetes Python client) with a kubeconfig pointing at it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml
from servers import stop

from reconcile.api import Client, connect
from reconcile.http import create_app

CHECKOUT = Path(__file__).parents[1]


@contextlib.asynccontextmanager
async def api(tmp_path: Path, **app_options: Any) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    """A client on a SQLite file store and an httpx client on the app over it."""
    async with connect(f"sqlite:///{tmp_path / 'api.db'}") as client:
        app = create_app(client, **app_options)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://reconcile") as http:
            yield client, http


def reconcile_command(*args: str) -> list[str]:
    """``reconcile ARGS`` run by this interpreter."""
    return [sys.executable, "-m", "reconcile", *args]


@contextlib.contextmanager
def serve_process(
    db: Path | str,
    *args: str,
    options: Sequence[str] = (),
    env: dict[str, str] | None = None,
    stderr: int = subprocess.PIPE,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``reconcile --db DB OPTIONS serve --port 0 ARGS`` as a process the test signals
    itself, and the URL it announced; killed afterwards if still running, its pipes
    closed either way. ``env``: the child's whole environment (default: this one's, with
    this checkout's code)."""
    environment = (
        env if env is not None else {**os.environ, "PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}"}
    )
    with subprocess.Popen(
        reconcile_command("--db", str(db), *options, "serve", "--port", "0", *args),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=environment,
        cwd=CHECKOUT,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("serving on "), line
            yield process, line.removeprefix("serving on ").strip()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


@contextlib.contextmanager
def served(
    db: Path | str, *args: str, env: dict[str, str] | None = None, stderr: list[str] | None = None
) -> Iterator[str]:
    """``reconcile --db DB serve --port 0 ARGS`` as a process; yields the URL it serves
    on once it accepts connections, stops it (SIGTERM) afterwards (and then appends what
    it wrote on stderr to ``stderr``, when given)."""
    environment = {**os.environ, "PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", **(env or {})}
    process = subprocess.Popen(
        reconcile_command("--db", str(db), "serve", "--port", "0", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=CHECKOUT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server says where, or exits
        if not line.startswith("serving on "):
            process.kill()
            _, err = process.communicate(timeout=30)
            raise AssertionError(f"reconcile serve did not start: {line!r} {err}")
        yield line.removeprefix("serving on ").strip()
    finally:
        if process.poll() is None:
            stop(process, timeout=30)
        if stderr is not None and process.stderr is not None:
            stderr.append(process.stderr.read())
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def kubeconfig(
    path: Path,
    url: str,
    *,
    token: str | None = None,
    credentials: dict[str, Any] | None = None,
    **cluster: Any,
) -> Path:
    """A kubeconfig at ``path`` whose one context points at ``url`` (``credentials``: more
    of the user's fields, e.g. ``client-certificate``)."""
    user: dict[str, Any] = {"token": token} if token else {}
    user |= credentials or {}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "reconcile", "cluster": {"server": url, **cluster}}],
        "users": [{"name": "me", "user": user}],
        "contexts": [
            {"name": "reconcile", "context": {"cluster": "reconcile", "user": "me", "namespace": "default"}}
        ],
        "current-context": "reconcile",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def kubectl(
    config: Path,
    *args: str,
    stdin: str | None = None,
    timeout: float = 60,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run kubectl with ``config``; its result (asserted successful unless ``check=False``)."""
    environment = {
        **os.environ,
        "KUBECONFIG": str(config),
        "KUBECACHEDIR": str(config.parent / "kube-cache"),
        **(env or {}),
    }
    result = subprocess.run(
        ["kubectl", *args],  # noqa: S607 - kubectl from PATH, as a user runs it
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        check=False,
    )
    if check:
        assert result.returncode == 0, (
            f"kubectl {' '.join(args)}: {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


def wait_until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until true, failing with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


__all__: Sequence[str] = ["api", "kubeconfig", "kubectl", "reconcile_command", "served", "wait_until"]
