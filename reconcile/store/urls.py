"""Store URLs: ``sqlite:///relative.db``, ``sqlite:////absolute.db``, or a plain path;
``postgresql://user:password@host:5432/database`` (or ``postgres://``) for PostgreSQL,
whose query string holds asyncpg's connection options (``sslmode=require``...) and server
settings (``search_path=NAME``: the store in a schema of its own); see
:mod:`reconcile.store.postgres`. A PostgreSQL URL's password is never shown: messages and
the store's ``url`` mask it.

Options ride in the query string: ``sqlite:///state.db?synchronous=NORMAL&busy_timeout=10``
(also ``cache_mib``, SQLite's page cache per connection, 64 by default).

SQLite's in-memory database (``:memory:``) is refused with the reason: it belongs to one
connection, and the store opens several (a writer, readers for its watchers), each of
which would see an empty database of its own ("no such table: meta"); and a command line
whose every command is a process of its own would lose everything between ``apply`` and
``run``. Tests use a file in a temporary folder, as the project's own do.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconcile.errors import StoreError

if TYPE_CHECKING:
    from reconcile.store.contract import EventStore, StoreLocation

__all__ = ["URL_FORMS", "locate_store", "open_store", "parse_sqlite_url"]

#: The URLs a store may be named by, as the command line's ``--db`` help says.
URL_FORMS = "a SQLite path or URL (sqlite:///relative.db), or postgresql://user@host:5432/database"
#: The schemes of PostgreSQL URLs.
_POSTGRES_SCHEMES = ("postgresql", "postgres")

_SQLITE_OPTIONS = {"synchronous": str, "busy_timeout": float, "cache_mib": int}


_IN_MEMORY = ":memory:"


def _file(path: str, url: str) -> Path:
    if path == _IN_MEMORY:
        message = (
            f"{url}: an in-memory database cannot hold a reconcile store: it lives in one "
            "connection of one process, and the store opens several (and every reconcile "
            "command is a process of its own); give a file path (a temporary one for tests)"
        )
        raise StoreError(message)
    return Path(path)


def parse_sqlite_url(url: str) -> tuple[Path, dict[str, Any]]:
    """Split a SQLite URL (or plain path) into the file path and backend options;
    StoreError for a malformed URL or ``:memory:``."""
    if "://" not in url:
        return _file(url, url), {}
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "sqlite":
        raise StoreError(f"unsupported store URL scheme {parts.scheme!r} (supported: sqlite, postgresql)")
    path = urllib.parse.unquote(parts.path)
    if parts.netloc:
        raise StoreError(f"{url}: a SQLite URL has no host; write sqlite:///relative or sqlite:////absolute")
    if not path or path == "/":
        raise StoreError(f"{url}: no database path")
    options: dict[str, Any] = {}
    for name, value in urllib.parse.parse_qsl(parts.query):
        if name not in _SQLITE_OPTIONS:
            raise StoreError(f"{url}: unknown option {name!r} (known: {', '.join(_SQLITE_OPTIONS)})")
        try:
            options[name] = _SQLITE_OPTIONS[name](value)
        except ValueError:
            raise StoreError(f"{url}: option {name} has an invalid value {value!r}") from None
    # sqlite:///state.db -> "/state.db" relative; sqlite:////abs.db -> "//abs.db" absolute.
    return _file(path[1:], url), options


def _is_postgres(url: str | Path) -> bool:
    return isinstance(url, str) and url.partition("://")[0].lower() in _POSTGRES_SCHEMES and "://" in url


def locate_store(url: str | Path) -> StoreLocation:
    """The store a URL names, not opened (:class:`~reconcile.store.contract.StoreLocation`):
    what can be asked of it without opening it. StoreError for a URL no backend takes."""
    if _is_postgres(url):
        from reconcile.store.postgres.location import PostgresLocation  # noqa: PLC0415

        return PostgresLocation(str(url))
    # Imported here: reading a URL (the command line's --db) needs no backend.
    from reconcile.store.sqlite.location import SQLiteLocation  # noqa: PLC0415

    path, _ = parse_sqlite_url(str(url))
    return SQLiteLocation(str(url), path)


async def open_store(url: str | Path, **options: Any) -> EventStore:
    """Open the store a URL names; keyword options override those in the URL."""
    if _is_postgres(url):
        from reconcile.store.postgres.backend import PostgresStore  # noqa: PLC0415

        return await PostgresStore(str(url), **options).open()
    # Imported here: reading a URL (the command line's --db) needs no backend.
    from reconcile.store.sqlite.backend import SQLiteStore  # noqa: PLC0415

    path, parsed = parse_sqlite_url(str(url))
    store = SQLiteStore(path, **{**parsed, **options})
    return await store.open()
