"""What every command shares: the database, the provider configuration, ``--debug``,
and opening a client on them.

The database comes from ``--db``, else ``RECONCILE_DB``, else ``./reconcile.db``.
Provider configuration comes from ``--provider-config FILE`` (a YAML mapping of provider
name to its config) and ``--root DIR`` (the files provider's roots; without any, each
manifest's own folder). Commands that only read refuse a database that does not exist
rather than create an empty one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from reconcile.cli.failing import BadInput, Failure
from reconcile.errors import StoreError
from reconcile.store.urls import parse_sqlite_url

if TYPE_CHECKING:
    from reconcile.api import Client
    from reconcile.api.admission import Admission
    from reconcile.model import KindRegistry

__all__ = ["Settings"]


@attrs.define
class Settings:
    """The global options of one invocation."""

    db: str = "reconcile.db"
    provider_config: Mapping[str, Mapping[str, Any]] = attrs.Factory(dict)
    debug: bool = False
    _kinds: KindRegistry | None = None

    @property
    def kinds(self) -> KindRegistry:
        """The installed kinds (entry points read once per invocation)."""
        if self._kinds is None:
            from reconcile.model import KindRegistry  # noqa: PLC0415 - the commands that need kinds pay for them

            self._kinds = KindRegistry.from_entry_points()
        return self._kinds

    def database_path(self) -> Path:
        """The database file the ``--db`` URL or path names."""
        try:
            path, _ = parse_sqlite_url(self.db)
        except StoreError as exc:
            raise BadInput(f"--db: {exc}") from exc
        return path

    def admission(self) -> Admission:
        """Admission for the installed kinds, without opening the store (so bad input is
        refused before the database is even created)."""
        from reconcile.api.admission import Admission  # noqa: PLC0415 - only the commands that write
        from reconcile.model import make_converter  # noqa: PLC0415

        return Admission(self.kinds, make_converter(), self.provider_config)

    @contextlib.asynccontextmanager
    async def client(self, *, create: bool = False, read_only: bool = False) -> AsyncIterator[Client]:
        """A client on the database; ``create`` allows making a new one; ``read_only``
        (the commands that only read) opens it so that a database this user may not write
        can still be read."""
        from reconcile.api import connect  # noqa: PLC0415 - only the commands that open the store

        path = self.database_path()
        if not create and not path.exists():
            raise Failure(f"no database at {path} (apply something first, or give --db / RECONCILE_DB)")
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(
                    connect(
                        self.db, kinds=self.kinds, provider_config=self.provider_config, read_only=read_only
                    )
                )
            except StoreError as exc:
                raise BadInput(f"--db: {exc}") from exc
            yield client
