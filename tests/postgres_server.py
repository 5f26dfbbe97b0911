"""The PostgreSQL server on 127.0.0.1:5432 (user postgres, trust auth) the tests share:
one database per test session with a unique name, dropped at its end, and a fresh schema
in it for each test (``?search_path=`` in the URL puts the store there), which costs a
few milliseconds where a database would cost a checkpoint.

Under ``CI=true`` an unreachable server fails the run; elsewhere the PostgreSQL tests are
skipped loudly (see :func:`servers.unavailable`). ``RECONCILE_TEST_POSTGRES`` overrides
the server URL (without a database)."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import uuid
from collections.abc import Iterator

import asyncpg
from servers import unavailable

SERVER = os.environ.get("RECONCILE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


class Database:
    """A database of this test session, and a new schema in it on each :meth:`new_url`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.url = f"{SERVER}/{name}"
        self._numbers = itertools.count(1)

    def new_url(self) -> str:
        """The URL of a new, empty schema of its own."""
        schema = f"t{next(self._numbers)}"
        _run(self.url, f"CREATE SCHEMA {schema}")
        return f"{self.url}?search_path={schema}"


async def execute(url: str, *statements: str) -> None:
    """Run ``statements`` on the database (and schema) ``url`` names."""
    connection = await asyncpg.connect(url, timeout=10)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def _run(url: str, *statements: str) -> None:
    """Run statements on a loop of their own in a thread of their own: a fixture may be
    set up while a test's event loop runs."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(execute(url, *statements))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def session_database(needed_by: str) -> Iterator[Database]:
    """Create a database with a unique name, yield it, drop it (with its connections)."""
    name = f"reconcile_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        _run(f"{SERVER}/postgres", f"CREATE DATABASE {name}")
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        unavailable("PostgreSQL", needed_by, f"{SERVER}: {exc}")
    try:
        yield Database(name)
    finally:
        _run(f"{SERVER}/postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
