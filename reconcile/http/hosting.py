"""What ``reconcile serve`` serves the API over: the store alone, or (``--run``) the
store with the controllers running in the same process.

Without ``--run`` the API only records what clients declare, and a ``reconcile run``
elsewhere makes it so. With it, :func:`hosted` starts a
:class:`~reconcile.runtime.Runtime` on the same store, in the same event loop, as
``reconcile run`` builds it from the same global options (``--db``, the providers'
config such as the files provider's ``--root``, ``--import``): a File applied through
kubectl is written to disk by this process. The API's client shares the runtime's open
store (one connection pool, one group commit, one watch) and writes as the CLI's
client would (``--as``, ``--field-manager``), so ``history`` reads the same with or
without ``--run``. The runtime's health joins the API's ``/readyz`` and ``/health``.

Stopping: the runtime holds SIGINT and SIGTERM (as ``reconcile run`` does); uvicorn,
which captures them too, finishes serving, then the ``async with`` drains the
controllers (in-flight reconciles get :data:`SHUTDOWN_DEADLINE` seconds) and closes
the store: the process exits 0. The runtime's handlers are what uvicorn puts back and
re-raises the signal to after it stops, so that signal no longer kills the process
before the drain.

This package may not import the CLI; the settings are taken as :class:`HostSettings`,
the shape of the CLI's settings object that click leaves in its context.
"""

from __future__ import annotations

import contextlib
import pkgutil
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from reconcile.api import DEFAULT_MANAGER, Client
from reconcile.errors import LockedError, ReconcileError
from reconcile.model import KindRegistry
from reconcile.runtime import Health, Operator, Runtime

__all__ = ["SHUTDOWN_DEADLINE", "Backing", "HostSettings", "hosted"]

#: Seconds in-flight reconciles get to finish when the server stops (``reconcile run``'s
#: default ``--shutdown-deadline``).
SHUTDOWN_DEADLINE = 10.0


class HostSettings(Protocol):
    """What :func:`hosted` needs of the CLI's settings (click's ``context.obj``)."""

    @property
    def db(self) -> str:
        """The store's URL or path (``--db``)."""

    @property
    def kinds(self) -> KindRegistry:
        """The installed kinds and those of the modules ``--import`` names."""

    @property
    def provider_config(self) -> Mapping[str, Mapping[str, Any]]:
        """Each provider's config (``-P``, ``--root``, ``--provider-config``)."""

    @property
    def imports(self) -> Sequence[str]:
        """The modules ``--import`` names (``module`` or ``module:attribute``)."""

    @property
    def user(self) -> str | None:
        """Who the writes are by (``--as``)."""

    @property
    def field_manager(self) -> str | None:
        """The field manager the writes are recorded under (``--field-manager``)."""

    def client(
        self, *, create: bool = False, read_only: bool = False
    ) -> contextlib.AbstractAsyncContextManager[Client]:
        """A client on the store the global options name."""


@attrs.frozen
class Backing:
    """What the API serves over: a client on the store and, with ``--run``, the
    runtime's health (for ``ApiState.runtime_health``)."""

    client: Client
    runtime_health: Callable[[], Health] | None = None


def _imported_operators(specs: Sequence[str]) -> list[Operator]:
    """The operators among what ``--import`` names (``sites:operator``); the CLI has
    already imported each (for its kinds), so resolving them again is a lookup."""
    return [value for value in map(pkgutil.resolve_name, specs) if isinstance(value, Operator)]


@contextlib.asynccontextmanager
async def hosted(settings: HostSettings, *, run: bool = False) -> AsyncIterator[Backing]:
    """The store ``settings`` name, opened (created if need be) for the API; with
    ``run``, the controllers running on it too, stopped (a drain) before it closes."""
    if not run:
        async with settings.client(create=True) as client:
            yield Backing(client)
        return
    async with settings.client(create=True):
        pass  # the CLI's own check of --db (a bad one is its usage error) and the store made
    runtime = Runtime(
        settings.db,
        provider_config=settings.provider_config,
        operators=_imported_operators(settings.imports) if settings.imports else None,
        kinds=settings.kinds if settings.imports else None,
        shutdown_deadline=SHUTDOWN_DEADLINE,
        handle_signals=True,
        gc_tuning=True,  # the server owns its process, as reconcile run does
    )
    try:
        await runtime.start()
    except LockedError as exc:
        message = (
            f"another runner is reconciling {settings.db}: {exc.holder} "
            "(stop it first, or serve without --run)"
        )
        raise ReconcileError(message) from exc
    try:
        shared = runtime.client
        client = Client(
            shared.store,
            settings.kinds,
            clock=shared.clock,
            provider_config=settings.provider_config,
            manager=settings.field_manager or DEFAULT_MANAGER,
            user=settings.user,
        )
        yield Backing(client, runtime.health)
    finally:
        await runtime.close()
