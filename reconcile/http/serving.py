"""``reconcile serve``: the HTTP API on a socket, served by uvicorn.

The command is the CLI's through the ``reconcile.commands`` entry point (the CLI imports
nothing of this package); it opens the store the global options name (``--db``, the
provider settings) through the settings object the CLI leaves in click's context.
Binds 127.0.0.1 unless told otherwise; ``--port 0`` takes a free port. The first line
on standard output says where it serves (``serving on https://127.0.0.1:6443``), once
it accepts connections. ``--run`` runs the controllers in the same process, on the same
store (:mod:`reconcile.http.hosting`).

Security (docs/reference/http-auth.md): ``--token-file`` (hashed bearer tokens),
``--client-ca-file`` (TLS client certificates), ``--anonymous``, ``--authorization-config``
(RBAC), ``--tls-cert-file``/``--tls-private-key-file``. With no way to authenticate, it
serves a loopback address only; on any other address without TLS it warns on stderr.
Every configuration file is read before the store opens: a bad one exits with code 2 and
a message naming the file and the field. Only the files' paths are ever printed.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import sys
from typing import Any, Protocol

import attrs
import click
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware

from reconcile.http.app import create_app
from reconcile.http.authn import Authenticating, Authenticator, loopback
from reconcile.http.configfiles import ConfigError
from reconcile.http.connections import protocol_class
from reconcile.http.context import Authorizer
from reconcile.http.hosting import HostSettings, hosted
from reconcile.http.limits import DEFAULT_MAX_BODY_BYTES, Limits, LimitSettings
from reconcile.http.rbac import AllowAuthenticated, load_rbac
from reconcile.http.shutdown import shut_down
from reconcile.http.tokens import MIN_TOKEN_LENGTH, hash_token, load_tokens

__all__ = ["serve"]

DEFAULT_PORT = 6443


class OpensClient(HostSettings, Protocol):
    """What ``serve`` needs of the CLI's settings (click's ``context.obj``)."""


@attrs.frozen
class Security:
    """What ``serve`` read from its security options, checked before the store opens."""

    authenticator: Authenticator
    authorizer: Authorizer
    tls: dict[str, Any]


@attrs.frozen
class Timeouts:
    """The connection-level deadlines (the body's is in :class:`LimitSettings`)."""

    header: float
    keep_alive: int
    shutdown: float
    write: float = 60.0


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it every answer but a connection's first waited 40 ms for a delayed ACK
    # (uvicorn writes the headers and the body apart; kubectl keeps its connections).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
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


class _Server(uvicorn.Server):
    """uvicorn's server, ending the app's long requests (watches) once it stops accepting."""

    def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:  # stop accepting first: a watcher must not come back here
            server.close()
        await shut_down(self.app.state.reconcile)
        await super().shutdown(sockets)


async def _serve(
    settings: OpensClient,
    host: str,
    port: int,
    *,
    security: Security,
    limits: LimitSettings,
    timeouts: Timeouts,
    run: bool = False,
) -> None:
    sock = _bound(host, port)
    async with hosted(settings, run=run) as backing:
        app = create_app(
            backing.client,
            authorizer=security.authorizer,
            middleware=[
                Middleware(Authenticating, authenticator=security.authenticator),
                Middleware(Limits, settings=limits),
            ],
        )
        app.state.reconcile.runtime_health = backing.runtime_health
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="off",
            access_log=False,  # an access log line is a request's path and query: none here
            # The client's address is the socket's: a header saying otherwise is anybody's
            # to send (uvicorn trusts X-Forwarded-For from 127.0.0.1 by default, so a local
            # client could pose as any number of addresses past the per-address limits).
            proxy_headers=False,
            server_header=False,
            http=protocol_class(timeouts.header, timeouts.write),
            timeout_keep_alive=timeouts.keep_alive,
            timeout_graceful_shutdown=max(1, round(timeouts.shutdown)),
            **security.tls,
        )
        server = _Server(config, app)
        shown_host = f"[{host}]" if ":" in host else host
        scheme = "https" if security.tls else "http"
        where = f"{scheme}://{shown_host}:{sock.getsockname()[1]}"

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


def _tls(cert: str | None, key: str | None, client_ca: str | None) -> dict[str, Any]:
    if (cert is None) != (key is None):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    if client_ca is not None and cert is None:
        raise click.UsageError("--client-ca-file needs TLS: give --tls-cert-file and --tls-private-key-file")
    if cert is None:
        return {}
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise click.BadParameter(
            f"{cert} and {key} are not a certificate and its private key ({exc.strerror or exc})",
            param_hint="--tls-cert-file",
        ) from None
    options: dict[str, Any] = {"ssl_certfile": cert, "ssl_keyfile": key}
    if client_ca is not None:
        try:
            context.load_verify_locations(client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise click.BadParameter(
                f"{client_ca} holds no CA certificate ({exc.strerror or exc})", param_hint="--client-ca-file"
            ) from None
        # Optional: a client may authenticate with a token instead; one it presents is verified.
        options |= {"ssl_ca_certs": client_ca, "ssl_cert_reqs": ssl.CERT_OPTIONAL}
    return options


def _security(
    host: str,
    *,
    token_file: str | None,
    client_ca: str | None,
    anonymous: bool,
    authorization_config: str | None,
    tls: dict[str, Any],
) -> Security:
    try:
        tokens = load_tokens(token_file) if token_file is not None else None
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--token-file") from None
    try:
        authorizer: Authorizer = (
            load_rbac(authorization_config) if authorization_config is not None else AllowAuthenticated()
        )
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--authorization-config") from None
    authenticator = Authenticator(tokens, client_certificates=client_ca is not None, anonymous=anonymous)
    if not loopback(host):
        if not authenticator.secured and not anonymous:
            raise click.UsageError(
                f"--host {host} is not a loopback address, and no credentials are checked: anyone who "
                "reaches it could do anything. Give --token-file or --client-ca-file (or --anonymous "
                "with an --authorization-config granting what strangers may do)."
            )
        if not tls:
            click.secho(
                f"WARNING: serving {host} without TLS: bearer tokens and every document cross the "
                "network in clear text; give --tls-cert-file and --tls-private-key-file.",
                fg="red",
                bold=True,
                err=True,
            )
    return Security(authenticator, authorizer, tls)


def _hash_token(context: click.Context, _: click.Parameter, value: bool) -> None:
    """``--hash-token``: the tokens file's hash of a token read from stdin; nothing is served."""
    if not value or context.resilient_parsing:
        return
    token = sys.stdin.readline().strip() if not sys.stdin.isatty() else click.prompt("token", hide_input=True)
    if len(token) < MIN_TOKEN_LENGTH:
        raise click.BadParameter(
            f"the token is shorter than {MIN_TOKEN_LENGTH} characters: use a random one, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`",
            param_hint="--hash-token",
        )
    click.echo(hash_token(token))
    context.exit(0)


_FILE = click.Path(exists=True, dir_okay=False)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="0: a free port."
)
@click.option(
    "--token-file", type=_FILE, help="Bearer tokens, stored hashed (YAML, or CSV like Kubernetes')."
)
@click.option(
    "--client-ca-file", type=_FILE, help="Accept TLS client certificates this CA signed (CN user, O groups)."
)
@click.option("--tls-cert-file", type=_FILE, help="Serve HTTPS with this certificate (PEM)...")
@click.option("--tls-private-key-file", type=_FILE, help="...and its private key (PEM).")
@click.option("--anonymous", is_flag=True, help="Let requests without credentials in, as system:anonymous.")
@click.option(
    "--authorization-config",
    type=_FILE,
    help="RBAC roles and bindings (YAML); default: every authenticated user may do everything.",
)
@click.option(
    "--hash-token",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_hash_token,
    help="Print the tokens file's hash of a token read from stdin, and exit.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(1),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Larger request bodies are refused (413) unread.",
)
@click.option(
    "--max-requests-inflight",
    type=click.IntRange(0),
    default=400,
    show_default=True,
    help="Requests in flight in all, watches aside (0: no cap).",
)
@click.option(
    "--max-requests-inflight-per-client",
    type=click.IntRange(0),
    default=100,
    show_default=True,
    help="Requests in flight per user (per address when anonymous), watches aside.",
)
@click.option(
    "--requests-per-second",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="A rate limit per client (0: none).",
)
@click.option(
    "--burst",
    type=click.IntRange(0),
    default=0,
    help="Requests a client may send at once [default: twice --requests-per-second].",
)
@click.option(
    "--request-header-timeout",
    type=click.FloatRange(0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a request may take to send its headers.",
)
@click.option(
    "--request-body-timeout",
    type=click.FloatRange(0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds a request may take to send its body.",
)
@click.option(
    "--response-write-timeout",
    type=click.FloatRange(0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds a client may take nothing of a response before it is dropped.",
)
@click.option(
    "--keep-alive-timeout",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="Seconds an idle connection stays open.",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(0),
    default=30.0,
    show_default=True,
    help="Seconds a stop waits for requests in flight.",
)
@click.option("--run", is_flag=True, help="Run the controllers in this process too (as reconcile run does).")
@click.pass_obj
def serve(  # noqa: PLR0917 - click passes one parameter per option
    settings: Any,
    host: str,
    port: int,
    token_file: str | None,
    client_ca_file: str | None,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    anonymous: bool,
    authorization_config: str | None,
    max_body_bytes: int,
    max_requests_inflight: int,
    max_requests_inflight_per_client: int,
    requests_per_second: float,
    burst: int,
    request_header_timeout: float,
    request_body_timeout: float,
    response_write_timeout: float,
    keep_alive_timeout: int,
    shutdown_timeout: float,
    run: bool,
) -> None:
    """Serve the HTTP API (Kubernetes' REST conventions: kubectl works against it)."""
    tls = _tls(tls_cert_file, tls_private_key_file, client_ca_file)
    security = _security(
        host,
        token_file=token_file,
        client_ca=client_ca_file,
        anonymous=anonymous,
        authorization_config=authorization_config,
        tls=tls,
    )
    limits = LimitSettings(
        max_body_bytes=max_body_bytes,
        body_timeout=request_body_timeout,
        max_inflight=max_requests_inflight,
        max_inflight_per_client=max_requests_inflight_per_client,
        requests_per_second=requests_per_second,
        burst=burst,
    )
    timeouts = Timeouts(request_header_timeout, keep_alive_timeout, shutdown_timeout, response_write_timeout)
    asyncio.run(_serve(settings, host, port, security=security, limits=limits, timeouts=timeouts, run=run))
