"""A SQLite store's file, not opened: whether it exists, its schema version, its size and
its live names, read with the standard library's ``sqlite3`` alone (no event loop, no
aiosqlite, no connection threads), read-only, creating nothing (see
:class:`~reconcile.store.contract.StoreLocation`).

It is what ``reconcile version`` and shell completion read, so it stays cheap to import:
the schema module and ``sqlite3``, nothing of the backend.
"""

from __future__ import annotations

import contextlib
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from reconcile.errors import StoreError
from reconcile.store.sqlite import schema

__all__ = ["SQLiteLocation", "read_only_uri"]


def read_only_uri(path: Path, *, immutable: bool = False) -> str:
    """The URI SQLite opens ``path`` read-only with (``immutable``: no locking either,
    for a database nobody writes)."""
    options = "mode=ro&immutable=1" if immutable else "mode=ro"
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{options}"


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection on ``path``, which must exist; immutable when SQLite cannot
    read it otherwise (a WAL database in a folder this user may not write, with no
    ``-shm`` file: no writer has it open). sqlite3's errors become StoreError."""
    schema.check_file(path)
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master")
        except sqlite3.OperationalError:
            conn.close()
            conn = sqlite3.connect(read_only_uri(path, immutable=True), uri=True)
        with contextlib.closing(conn):
            yield conn
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot read ({exc})") from exc


class SQLiteLocation:
    """The file a SQLite URL (or plain path) names."""

    __slots__ = ("path", "url")

    def __init__(self, url: str, path: Path) -> None:
        #: The URL (or path) as given.
        self.url = url
        #: The database file, relative as given.
        self.path = path

    def __repr__(self) -> str:
        return f"SQLiteLocation({str(self.path)!r})"

    @property
    def where(self) -> str:
        """The file's path, as given."""
        return str(self.path)

    @property
    def schema_version(self) -> int:
        """The schema version this reconcile writes."""
        return schema.SCHEMA_VERSION

    def exists(self) -> bool:
        """Whether the file exists."""
        return self.path.exists()

    def stored_schema(self) -> int:
        """The version in the file's ``reconcile_schema`` table."""
        with _reading(self.path) as conn:
            try:
                row = conn.execute("SELECT max(version) FROM reconcile_schema").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: not a reconcile store ({exc})") from exc
        if row is None or not isinstance(row[0], int):
            raise StoreError(f"{self.path}: reconcile_schema table holds no version")
        return row[0]

    def size(self) -> int:
        """The file's bytes with its write-ahead log's."""
        path = self.path
        return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())

    def live_names(
        self, api_group: str, kind: str, namespace: str, *, prefix: str = "", limit: int = 200
    ) -> list[str]:
        """Live names from ``prefix`` on, in the projection's index order (that of
        Python's strings: SQLite compares text by its UTF-8 bytes), until one does not
        start with it."""
        if not self.path.exists():
            return []
        names: list[str] = []
        with _reading(self.path) as conn:
            rows = conn.execute(
                "SELECT name FROM objects WHERE api_group = ? AND kind = ? AND namespace = ? "
                "AND name >= ? AND live ORDER BY name",
                (api_group, kind, namespace, prefix),
            )
            for (name,) in rows:
                if len(names) >= limit or not name.startswith(prefix):
                    break
                names.append(name)
        return names
