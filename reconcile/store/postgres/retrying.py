"""Faults on PostgreSQL: how the store tries again when the server goes away, and how a
commit whose outcome was lost is found out.

What is worth another try is :func:`~.addressing.transient`: a lost or refused
connection, a server shutting down, crashed or starting up, too many connections.
Everything else (bad SQL, a constraint, a fencing refusal) is raised at once, and so is
a read-only server (a standby, a primary demoted by a failover): that may last for hours,
so the write fails at once with :class:`~reconcile.errors.StoreUnavailableError` naming
it and the caller backs off (the engine's rate-limited retry) instead of a call hanging.

:func:`retrying` runs a call until it returns, fails for good, or :data:`PATIENCE`
seconds have passed: exponential backoff with jitter from 50 ms, at most 2 s apart, each
attempt on a connection made anew (:class:`Link` for the store's own connections, the
pool's for reads). Then the last error is raised, translated by the caller
(:func:`~.addressing.errors`) into StoreUnavailableError.

A commit cut off while its ``COMMIT`` was on the wire may or may not have happened. It is
never guessed: each commit writes an idempotency key (a random token) into
``reconcile_commits`` in its own transaction (in the statement that appends its events,
:mod:`.committing`), and after the loss the
writer asks the server which it was (:func:`committed`): found, the batch's results are
the ones it computed (the real revisions); not found, the batch runs again. Asking is
an ``INSERT`` of the same key: while the lost transaction still runs on the server, the
insert waits on its key until it ends, so the answer is never read too early. Each
writer keeps only its latest key: the next commit deletes the one before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import tenacity

from reconcile.errors import ReconcileError
from reconcile.store.postgres.addressing import connect_raw, read_only, scrub, transient

__all__ = ["LONGEST_WAIT", "PATIENCE", "Link", "after_failure", "committed", "retrying"]

LOG = logging.getLogger("reconcile.store")

T = TypeVar("T")

#: Seconds a call keeps trying a lost server before it fails (StoreUnavailableError).
PATIENCE = 30.0
#: Seconds the probe of a lost commit waits for it to end before asking again.
_PROBE_WAIT = 5
#: The first wait between attempts, and the longest.
_FIRST_WAIT, LONGEST_WAIT = 0.05, 2.0


def _said(url: str, where: str) -> Callable[[BaseException, int, float], None]:
    def say(exc: BaseException, number: int, wait: float) -> None:
        reason = scrub(f"{type(exc).__name__}: {exc}", url)
        level = logging.WARNING if number == 1 else logging.INFO
        LOG.log(level, "%s: lost the server (%s); trying again in %.2fs", where, reason, wait)

    return say


def _on_retry(url: str, where: str) -> Callable[[tenacity.RetryCallState], None]:
    say = _said(url, where)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        if exc is not None:
            say(exc, state.attempt_number + 1, wait)

    return before_sleep


async def retrying(
    call: Callable[[], Awaitable[T]], *, url: str, where: str, patience: float = PATIENCE
) -> T:
    """``call()``, tried again after each transient failure (see the module's story) for
    up to ``patience`` seconds; the last error raised as it is (the caller translates)."""
    try:
        return await call()  # the common case: no retrying machinery on the way
    except Exception as exc:
        if not transient(exc) or patience <= 0:
            raise
        _said(url, where)(exc, 1, _FIRST_WAIT)
    await asyncio.sleep(_FIRST_WAIT)
    async for attempt in tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(transient),
        wait=tenacity.wait_exponential(multiplier=_FIRST_WAIT * 2, max=LONGEST_WAIT)
        + tenacity.wait_random(0, _FIRST_WAIT),
        stop=tenacity.stop_after_delay(patience),
        before_sleep=_on_retry(url, where),
        reraise=True,
    ):
        with attempt:
            return await call()
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


def after_failure(connection: Any, exc: BaseException) -> BaseException | None:
    """What a failure ``exc`` on ``connection`` leaves: the connection ended unless the
    failure left it usable (an error the server reported, or one of ours raised by a
    mutation), and the error to raise instead, when the connection turned out lost
    under an error that does not say so (None: raise ``exc``)."""
    import asyncpg  # noqa: PLC0415 - imported with the backend only

    lost = connection.is_closed()
    clean = isinstance(exc, ReconcileError | asyncpg.PostgresError)
    if lost or transient(exc) or read_only(exc) or not clean:
        connection.terminate()
    if lost and not transient(exc):
        return ConnectionResetError(f"the connection was lost ({type(exc).__name__}: {exc})")
    return None


class Link:
    """One connection of the store's own (the writer's) that comes back after a fault:
    :meth:`get` connects when there is none (or it was ended)."""

    def __init__(self, url: str, connection: Any = None) -> None:
        self._url = url
        self.connection: Any = connection

    async def get(self) -> Any:
        """The connection, made anew if it was lost."""
        if self.connection is None or self.connection.is_closed():
            self.connection = None
            self.connection = await connect_raw(self._url)
        return self.connection

    @property
    def pid(self) -> int:
        """The server process of the connection (0: none now)."""
        return 0 if self.connection is None else int(self.connection.get_server_pid())


async def committed(conn: Any, token: str) -> bool:
    """Whether the transaction that wrote ``token`` committed, once it has ended: the
    probe's insert of the same key waits for a transaction still running on it, and
    is rolled back whatever it finds."""
    import asyncpg  # noqa: PLC0415 - imported with the backend only

    transaction = conn.transaction()
    await transaction.start()
    try:
        # A lost transaction the server has not seen end yet (a silent network): asked
        # again after a backoff rather than waited on without end.
        await conn.execute(f"SET LOCAL lock_timeout = '{_PROBE_WAIT}s'")
        fresh = await conn.fetchval(
            "INSERT INTO reconcile_commits (token, first_revision, last_revision) VALUES ($1, 0, 0) "
            "ON CONFLICT (token) DO NOTHING RETURNING true",
            token,
        )
    except asyncpg.LockNotAvailableError:
        await transaction.rollback()
        raise TimeoutError("the commit whose answer was lost is still running on the server") from None
    except BaseException:
        if not conn.is_closed():
            with contextlib.suppress(Exception):
                await transaction.rollback()
        raise
    await transaction.rollback()
    return not fresh
