"""``reconcile serve``: the HTTP API on a socket, served by uvicorn.

The command is the CLI's through the ``reconcile.commands`` entry point (the CLI imports
nothing of this package); it opens the store the global options name (``--db``, the
provider settings) through the settings object the CLI leaves in click's context.
Binds 127.0.0.1 unless told otherwise; ``--port 0`` takes a free port. The first line
on standard output says where it serves (``serving on http://127.0.0.1:6443``), once
it accepts connections.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Protocol

import click
import uvicorn

from reconcile.http.app import create_app
from reconcile.http.hosting import HostSettings, hosted

__all__ = ["serve"]

DEFAULT_PORT = 6443


class OpensClient(HostSettings, Protocol):
    """What ``serve`` needs of the CLI's settings (click's ``context.obj``)."""


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.BadParameter(
            f"cannot listen on {host}:{port}: {exc.strerror}", param_hint="--port"
        ) from None
    sock.listen(2048)
    sock.setblocking(False)  # noqa: FBT003 - socket's own signature
    return sock


async def _serve(settings: OpensClient, host: str, port: int, *, run: bool = False) -> None:
    sock = _bound(host, port)
    async with hosted(settings, run=run) as backing:
        app = create_app(backing.client)
        app.state.reconcile.runtime_health = backing.runtime_health
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        shown_host = f"[{host}]" if ":" in host else host
        where = f"http://{shown_host}:{sock.getsockname()[1]}"

        async def announce() -> None:
            while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
                await asyncio.sleep(0.01)
            click.echo(f"serving on {where}")

        announcing = asyncio.ensure_future(announce())
        try:
            await server.serve(sockets=[sock])
        finally:
            announcing.cancel()
            sock.close()


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="0: a free port."
)
@click.option("--run", is_flag=True, help="Run the controllers in this process too (as reconcile run does).")
@click.pass_obj
def serve(settings: Any, host: str, port: int, run: bool) -> None:
    """Serve the HTTP API (Kubernetes' REST conventions: kubectl works against it)."""
    asyncio.run(_serve(settings, host, port, run=run))
