"""A PostgreSQL store, not opened (:class:`~reconcile.store.contract.StoreLocation`):
whether the database holds one, its schema version, its size and live names, each asked
over a short connection of its own, reading only and creating nothing.

The protocol is synchronous (``reconcile version`` and shell completion have no event
loop); each question runs asyncpg on a loop of its own in a thread of its own.
"""

from __future__ import annotations

from typing import Any

from reconcile.errors import StoreError
from reconcile.store.postgres import schema
from reconcile.store.postgres.addressing import check_url, connect, errors, masked, run_blocking

__all__ = ["PostgresLocation"]


class PostgresLocation:
    """The database (and schema) a PostgreSQL URL names."""

    __slots__ = ("_dsn", "url")

    def __init__(self, url: str) -> None:
        check_url(url)
        self._dsn = url
        #: The URL as given (which open_store opens).
        self.url = url

    def __repr__(self) -> str:
        return f"PostgresLocation({self.where!r})"

    @property
    def where(self) -> str:
        """The URL, its password masked."""
        return masked(self._dsn)

    @property
    def schema_version(self) -> int:
        """The schema version this reconcile writes."""
        return schema.SCHEMA_VERSION

    async def _ask(self, question: Any, *, missing: Any = None) -> Any:
        import asyncpg  # noqa: PLC0415

        try:
            connection = await connect(self._dsn)
        except StoreError as exc:
            if missing is not None and isinstance(exc.__context__, asyncpg.InvalidCatalogNameError):
                return missing
            raise
        try:
            with errors(self._dsn):
                return await question(connection)
        finally:
            await connection.close()

    def exists(self) -> bool:
        """Whether the schema holds a reconcile store (False for a database that does
        not exist)."""

        async def question(conn: Any) -> bool:
            return bool(await conn.fetchval("SELECT to_regclass('reconcile_meta') IS NOT NULL"))

        return bool(run_blocking(lambda: self._ask(question, missing=False)))

    def stored_schema(self) -> int:
        """The schema version the store holds (StoreError when it is not a store)."""

        async def question(conn: Any) -> int:
            if not await conn.fetchval("SELECT to_regclass('reconcile_meta') IS NOT NULL"):
                raise StoreError(f"{self.where}: not a reconcile store")
            version = await conn.fetchval("SELECT value FROM reconcile_meta WHERE key = 'schema_version'")
            if version is None:
                raise StoreError(f"{self.where}: reconcile_meta holds no schema version")
            return int(version)

        return int(run_blocking(lambda: self._ask(question)))

    def size(self) -> int:
        """The bytes the store's tables and indexes take (0 when there is none)."""

        async def question(conn: Any) -> int:
            value = await conn.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                "AND c.relkind = 'r' AND c.relname LIKE 'reconcile\\_%'"
            )
            return int(value)

        return int(run_blocking(lambda: self._ask(question, missing=0)))

    def live_names(
        self, api_group: str, kind: str, namespace: str, *, prefix: str = "", limit: int = 200
    ) -> list[str]:
        """Live names that start with ``prefix``, in order, at most ``limit``."""

        async def question(conn: Any) -> list[str]:
            if not await conn.fetchval("SELECT to_regclass('reconcile_objects') IS NOT NULL"):
                return []
            rows = await conn.fetch(
                "SELECT name FROM reconcile_objects WHERE api_group = $1 AND kind = $2 AND namespace = $3 "
                "AND name >= $4 AND live AND starts_with(name, $4) ORDER BY name LIMIT $5",
                api_group,
                kind,
                namespace,
                prefix,
                limit,
            )
            return [str(row[0]) for row in rows]

        return list(run_blocking(lambda: self._ask(question, missing=[])))
