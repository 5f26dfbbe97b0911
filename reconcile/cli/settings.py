"""What every command shares: the database, the provider configuration, ``--debug``,
and opening a client on them.

Kinds are the installed providers' and those of the modules ``--import`` names.
Writes are recorded as by ``--as`` (default the OS user and host) through the field
manager ``--field-manager`` (default ``reconcile``, the manager every earlier release's
CLI wrote under: another would leave the labels and annotations those applies own
without a manager to remove them); ``history`` shows both.
The database comes from ``--db``, else ``RECONCILE_DB``, else ``./reconcile.db``.
Provider configuration comes from ``-P PROVIDER.KEY=VALUE`` (``--root DIR`` is ``-P
files.roots=DIR``), the environment's ``RECONCILE_<PROVIDER>__<KEY>`` and
``--provider-config FILE`` (a YAML mapping of provider name to its config), in that
order of precedence (:mod:`reconcile.cli.configuring`); ``apply``, ``diff`` and ``plan``
add what the store remembers for the keys none of them gives
(:mod:`reconcile.cli.remembering`). Commands that only read refuse a database that does
not exist rather than create an empty one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from reconcile.cli.failing import BadInput, Failure
from reconcile.cli.importing import import_kinds
from reconcile.errors import StoreError

if TYPE_CHECKING:
    from reconcile.api import Client
    from reconcile.api.admission import Admission
    from reconcile.model import KindRegistry
    from reconcile.store import StoreLocation

__all__ = ["Settings"]


@attrs.define
class Settings:
    """The global options of one invocation."""

    db: str = "reconcile.db"
    provider_config: Mapping[str, Mapping[str, Any]] = attrs.Factory(dict)
    debug: bool = False
    #: The modules ``--import`` (and ``RECONCILE_IMPORT``) name: their kinds join the
    #: installed ones (:mod:`reconcile.cli.importing`).
    imports: tuple[str, ...] = ()
    #: Who the writes are by: ``--as`` (default the OS user and host, ``alice@laptop``).
    user: str | None = None
    #: The field manager the writes are recorded under: ``--field-manager`` (None: the
    #: client's default, ``reconcile``).
    field_manager: str | None = None
    #: The provider configs the store remembered when the command began, by provider
    #: (:mod:`reconcile.cli.remembering`): what an apply compares its own with.
    remembered: Mapping[str, Mapping[str, Any]] = attrs.Factory(dict)
    _kinds: KindRegistry | None = None
    _location: StoreLocation | None = None

    @property
    def kinds(self) -> KindRegistry:
        """The installed kinds and the imported modules' (entry points read and modules
        imported once per invocation, when a command first needs them)."""
        if self._kinds is None:
            from reconcile.model import KindRegistry  # noqa: PLC0415 - the commands that need kinds pay for them

            registry = KindRegistry.from_entry_points()
            self._kinds = import_kinds(registry, self.imports) if self.imports else registry
        return self._kinds

    @property
    def store(self) -> StoreLocation:
        """The store the ``--db`` URL or path names, not opened: whether it exists, where
        it is (``store.where``, as messages name it), what it holds without opening it."""
        if self._location is None:
            from reconcile.store import locate_store  # noqa: PLC0415 - only the commands that name a store

            try:
                self._location = locate_store(self.db)
            except StoreError as exc:
                raise BadInput(f"--db: {exc}") from exc
        return self._location

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
        from reconcile.api import DEFAULT_MANAGER, connect  # noqa: PLC0415 - only the commands that open the store

        store = self.store
        if not create and not store.exists():
            raise Failure(
                f"no database at {store.where} (apply something first, or give --db / RECONCILE_DB)"
            )
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(
                    connect(
                        self.db,
                        kinds=self.kinds,
                        provider_config=self.provider_config,
                        manager=self.field_manager or DEFAULT_MANAGER,
                        user=self.user,
                        read_only=read_only,
                    )
                )
            except StoreError as exc:
                raise BadInput(f"--db: {exc}") from exc
            yield client
