"""Fixtures: real SQLite files in a temporary folder, a schema of its own on the shared
PostgreSQL server, one store per backend; a Runtime with the files provider on a fake
clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from dns_server import Bind, bind_server
from postgres_server import Database, session_database

from reconcile import Client, KindRegistry, Runtime
from reconcile.store import EventStore, SQLiteStore, open_store
from reconcile.testing import FakeClock, example_kinds
from reconcile_providers.files import FilesProvider

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A database file path in a fresh folder."""
    return tmp_path / "state.db"


@pytest.fixture
def clock() -> FakeClock:
    """A clock the test moves by hand."""
    return FakeClock()


@pytest.fixture
def kinds() -> KindRegistry:
    """The example kinds (Widget, RecordSet)."""
    return example_kinds()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Database]:
    """The session's database on the shared PostgreSQL server (dropped at the end)."""
    yield from session_database("the PostgreSQL store's tests")


@pytest.fixture
def postgres_url(postgres: Database) -> str:
    """The URL of a fresh, empty schema in this session's database."""
    return postgres.new_url()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, db_path: Path) -> str:
    """A URL of each backend naming an empty store: a SQLite file, a PostgreSQL schema."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{db_path}"


@pytest.fixture
async def store(store_url: str, clock: FakeClock) -> AsyncIterator[EventStore]:
    """An open store of each backend, on a real database."""
    if store_url.startswith("sqlite:"):
        async with SQLiteStore(store_url.removeprefix("sqlite:///"), clock=clock) as opened:
            yield opened
        return
    opened = await open_store(store_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def client(store: EventStore, kinds: KindRegistry, clock: FakeClock) -> Client:
    """A client over the store, with the example kinds and the fake clock."""
    return Client(store, kinds, clock=clock)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The folder the provider may write under."""
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture
async def running(root: Path, tmp_path: Path) -> Any:
    """A Runtime with the files provider on a fake clock."""
    clock = FakeClock()
    runtime = Runtime(
        tmp_path / "state.db",
        providers=[FilesProvider()],
        provider_config={"files": {"roots": [str(root)], "source_roots": [str(tmp_path)]}},
        clock=clock,
        wall_clock=clock,
        poll_interval=60.0,
        resync_period=None,
    )
    async with runtime:
        yield runtime, clock


@pytest.fixture(scope="session")
def bind() -> Iterator[Bind]:
    """One named for the session, shared by the dns tests (each uses names of its own)."""
    with bind_server() as server:
        yield server


@pytest.fixture
def tsig(bind: Bind, monkeypatch: pytest.MonkeyPatch) -> Bind:
    """The TSIG secret in the environment variable the config names."""
    monkeypatch.setenv("TSIG_SECRET", bind.secret)
    return bind
