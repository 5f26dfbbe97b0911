"""PostgreSQL store URLs: ``postgresql://user:password@host:port/database?options``
(``postgres://`` too), how they are checked, shown and connected to.

The URL goes to asyncpg as given, so every connection option asyncpg takes in the query
string passes through (``sslmode``, ``sslrootcert``, ``connect_timeout``...; any other
name is a server setting, ``search_path=reconcile`` puts the store in a schema of its
own). Nothing else in the store sees the password: :func:`masked` is the URL as every
message and the store's ``url`` show it (``postgresql://user:***@host:5432/db``), and
:func:`connect` translates asyncpg's and the socket's errors into StoreError with that
URL and the password scrubbed from the reason too.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from reconcile.errors import StoreError, StoreUnavailableError

__all__ = [
    "SCHEMES",
    "check_url",
    "connect",
    "connect_raw",
    "errors",
    "masked",
    "read_only",
    "run_blocking",
    "transient",
]

T = TypeVar("T")

#: The URL schemes this backend takes.
SCHEMES = ("postgresql", "postgres")
#: Seconds a connection attempt may take unless the URL says (``connect_timeout=``).
_CONNECT_TIMEOUT = 10.0


def masked(url: str) -> str:
    """The URL with its password, if any, replaced by ``***``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None:
        userinfo, _, hostinfo = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}:***@{hostinfo}")
    if "password=" in parts.query:  # libpq's other place for it
        query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
        parts = parts._replace(query=query)
    return urllib.parse.urlunsplit(parts)


def _password(url: str) -> str | None:
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password or dict(urllib.parse.parse_qsl(parts.query)).get("password")
    except ValueError:
        return None
    return urllib.parse.unquote(password) if password else None


def scrub(text: str, url: str) -> str:
    """``text`` with the URL's password (raw and percent-encoded) replaced by ``***``."""
    password = _password(url)
    if password:
        for form in {password, urllib.parse.quote(password, safe="")}:
            text = text.replace(form, "***")
    return text


def check_url(url: str) -> None:
    """StoreError (password masked) for a URL asyncpg could not make sense of: a bad
    port, no host."""
    try:
        parts = urllib.parse.urlsplit(url)
        if "," not in parts.netloc:  # several hosts (h1:5432,h2:5432): asyncpg checks each
            _ = parts.port  # ValueError for a port that is not a number in range
    except ValueError as exc:
        raise StoreError(f"{scrub(masked_safely(url), url)}: malformed URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise StoreError(f"{masked(url)}: not a PostgreSQL URL")
    if not parts.netloc.rpartition("@")[2] and "host=" not in parts.query:
        raise StoreError(f"{masked(url)}: no host (write postgresql://user@host:5432/database)")


def masked_safely(url: str) -> str:
    """:func:`masked`, or the scheme and host part cut at the ``@`` for a URL too broken
    to parse (its password could be anywhere before it)."""
    try:
        return masked(url)
    except ValueError:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}" if "@" in rest else url


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the server was lost or is not there yet, and the same call may
    succeed on a new connection: a socket error or timeout, a connection asyncpg lost or
    found closed (class 08), a server shutting down, crashed or starting up (57P01,
    57P02, 57P03), too many connections (53300). Bad SQL, a constraint, a read-only
    server and a fencing refusal are not: trying them again changes nothing."""
    import asyncpg  # noqa: PLC0415 - imported with the backend only

    if isinstance(exc, OSError | TimeoutError | asyncpg.PostgresConnectionError):
        return True
    if isinstance(
        exc,
        asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError
        | asyncpg.CannotConnectNowError
        | asyncpg.TooManyConnectionsError,
    ):
        return True
    # A call on a connection that was closed under it (asyncpg's own words).
    return isinstance(exc, asyncpg.InterfaceError) and "connection is closed" in str(exc)


def read_only(exc: BaseException) -> bool:
    """Whether ``exc`` is a write refused by a read-only server (25006): a standby, a
    primary demoted by a failover, or ``default_transaction_read_only``."""
    import asyncpg  # noqa: PLC0415

    return isinstance(exc, asyncpg.ReadOnlySQLTransactionError)


@contextlib.contextmanager
def errors(url: str, doing: str = "") -> Iterator[None]:
    """Translate asyncpg's and the socket's errors into StoreError naming the masked URL
    (the cause kept, its text scrubbed of the password): StoreUnavailableError for a
    server that is unreachable, restarting or read-only."""
    import asyncpg  # noqa: PLC0415 - imported with the backend only

    where = masked(url)
    prefix = f"{where}: {doing}" if doing else f"{where}: "
    try:
        yield
    except StoreError:
        raise
    except asyncpg.InvalidPasswordError as exc:
        raise StoreError(f"{prefix}authentication failed ({scrub(str(exc), url)})") from None
    except asyncpg.InvalidAuthorizationSpecificationError as exc:
        raise StoreError(f"{prefix}not allowed to connect ({scrub(str(exc), url)})") from None
    except asyncpg.InvalidCatalogNameError as exc:
        reason = f"{scrub(str(exc), url)}; create it first (createdb), reconcile makes only its tables"
        raise StoreError(f"{prefix}{reason}") from None
    except asyncpg.ReadOnlySQLTransactionError as exc:
        raise StoreUnavailableError(
            f"{prefix}the server is read-only (a standby, or default_transaction_read_only is on): "
            f"{scrub(str(exc), url)}; writes wait until it takes writes again"
        ) from None
    except (OSError, TimeoutError) as exc:
        reason = scrub(str(exc) or type(exc).__name__, url)
        raise StoreUnavailableError(f"{prefix}cannot reach the server ({reason})") from None
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        if transient(exc):
            reason = scrub(str(exc) or type(exc).__name__, url)
            raise StoreUnavailableError(f"{prefix}lost the server ({reason})") from None
        raise StoreError(f"{prefix}{scrub(str(exc), url)}") from None


async def connect(url: str, **options: Any) -> Any:
    """One asyncpg connection (an ``asyncpg.Connection``), errors translated."""
    with errors(url, "cannot connect: "):
        return await connect_raw(url, **options)


async def connect_raw(url: str, **options: Any) -> Any:
    """:func:`connect` with asyncpg's errors as they are: what a caller that tries
    again on a transient one (:mod:`.retrying`) needs to tell them apart."""
    import asyncpg  # noqa: PLC0415

    timeout = _CONNECT_TIMEOUT if "connect_timeout=" not in url else None
    extra = {"timeout": timeout} if timeout is not None else {}
    try:
        return await asyncpg.connect(url, **extra, **options)
    except ValueError as exc:  # asyncpg's own URL checks (an unknown sslmode...)
        raise StoreError(f"{masked(url)}: {scrub(str(exc), url)}") from None


def run_blocking(call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call()`` to its end on an event loop of its own, in a thread of its own, and
    return its result: what the synchronous StoreLocation asks of a server, from a
    program that may or may not be inside an event loop already."""
    outcome: list[Any] = []

    def target() -> None:
        async def main() -> T:
            return await call()

        try:
            outcome.append((True, asyncio.run(main())))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="reconcile-postgres-location", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result
