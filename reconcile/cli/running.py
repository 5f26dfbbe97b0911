"""``run``: the supervisor on the command line.

``reconcile run`` serves until SIGINT or SIGTERM, printing what the engine does; the
store's watch picks up what ``apply`` and ``delete`` in other terminals write within
milliseconds. ``reconcile run --once`` converges and exits: 0 only when every object was
observed in this run and is Synced and Ready for its current generation, and nothing is
left deleting (paused objects aside); 1 otherwise, once nothing more will change or
``--timeout`` passes first, naming each object that is not and why. Either way a signal starts a graceful
shutdown: in-flight reconciles get ``--shutdown-deadline`` seconds to finish (with ``--once``, no
more than what is left of ``--timeout``: the command ends within it), and what is
abandoned is safe (the log and the create markers make a restart resume).

Progress is a rich progress bar on a terminal and a plain line per change otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import click

from reconcile.cli.failing import BadInput, Failure, Interrupted
from reconcile.cli.importing import imported_operators
from reconcile.cli.main import cli, isatty, run_async
from reconcile.cli.reading import render_objects
from reconcile.cli.rendering import event_detail, one_line, readiness
from reconcile.cli.settings import Settings
from reconcile.errors import CorruptError, ExpiredError, LockedError, StoreError
from reconcile.model import Event, EventType
from reconcile.model.printing import printable
from reconcile.model.resource import AnyResource
from reconcile.runtime import Convergence, Runtime

__all__ = ["RunOptions", "print_actions"]

_SHOW_EVERY = 0.1  # seconds between two progress lines (or redraws)
_QUIET_TYPES = frozenset({EventType.STATUS_CHANGED})


class _Progress:
    """A rich bar on a terminal; a plain ``ready N/M`` line per change otherwise."""

    def __init__(self, rich: bool) -> None:
        self.rich = rich
        self.shown: tuple[int, int] | None = None
        self._bar: Any = None
        self._task: Any = None
        self._at = 0.0

    @contextlib.contextmanager
    def running(self) -> Iterator[_Progress]:
        if not self.rich:
            yield self
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

        with Progress(
            TextColumn("converging"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("Ready"),
            TimeElapsedColumn(),
        ) as bar:
            self._bar = bar
            self._task = bar.add_task("converging", total=None)
            yield self

    def update(self, ready: int, total: int, *, final: bool = False) -> None:
        if (ready, total) == self.shown:
            return
        if total == 0:
            return  # the caches still loading, or nothing declared (said once, at the end)
        now = time.monotonic()
        if not final and self.shown is not None and now - self._at < _SHOW_EVERY:
            return  # called at every move of a convergence: a line or a redraw at most this often
        self.shown, self._at = (ready, total), now
        if self._bar is not None:
            self._bar.update(self._task, completed=ready, total=total)
        else:
            click.echo(f"ready {ready}/{total}")


async def _converge(runtime: Runtime, timeout: float, progress: _Progress) -> Convergence | None:
    """Wait until everything is Ready or settled short of it (the Runtime's
    ``wait_converged``), the deadline passes, or a signal asks to stop (None then); the
    caches loading is part of the wait, and a corrupt body ends it at once."""
    converging = asyncio.ensure_future(runtime.wait_converged(timeout=timeout, progress=progress.update))
    stopping = asyncio.ensure_future(runtime.wait_stop_requested())
    try:
        await asyncio.wait({converging, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not converging.done():
            return None
        try:
            state = converging.result()
        except TimeoutError:
            return None
        except CorruptError as exc:
            raise Failure(
                str(exc), "reconcile verify --deep lists every event that cannot be decoded"
            ) from exc
        progress.update(state.ready, state.total, final=True)
        return state
    finally:
        for task in (converging, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def print_actions(runtime: Runtime, echo: Callable[[str], None], *, since: int | None = None) -> None:
    """Print each action the store records after revision ``since`` (default: from now)
    until cancelled. A compaction that overtakes the printer (``reconcile compact`` under
    churn: the watch's next page is gone) says which revisions were lost on stderr and
    goes on from the compaction horizon, the way an informer relists; a printer has
    nothing to list, only its place to find again."""
    client = runtime.client
    cursor = await client.revision() if since is None else since
    while True:
        try:
            async for event in client.watch(since=cursor):
                if not isinstance(event, Event):
                    continue
                cursor = event.revision
                if event.type not in _QUIET_TYPES:
                    _print_action(event, echo)
        except ExpiredError as exc:
            click.echo(
                f"reconcile: revisions {cursor + 1} to {exc.horizon - 1} were compacted before they "
                f"were printed; printing on from {exc.horizon}",
                err=True,
            )
            cursor = exc.horizon - 1
        else:
            return  # the store closed


def _print_action(event: Event, echo: Callable[[str], None]) -> None:
    key = event.key
    first, *rest = event_detail(event).splitlines() or [""]
    summary = f" {first}" if first else ""
    when = event.time.strftime("%H:%M:%S")
    where = f"{printable(key.namespace)}/{printable(key.name)}"
    echo(f"{when} {key.kind} {where} {event.type} ({event.actor}){summary}")
    for line in rest:  # the whole message (a diff, an error's report), indented below
        echo(f"    {line}")


@cli.command()
@click.option("--once", is_flag=True, help="Converge, print the result and exit (0 only when all is Ready).")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds --once waits.")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Reconciles in flight per kind.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0.1),
    help="Seconds between drift checks of a Ready object.  [default: the kind's own, else 60]",
)
@click.option(
    "--shutdown-deadline",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds in-flight work gets on stop.",
)
@click.option(
    "--provider-timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds one provider call may take before it counts as a transient failure (0: no limit).",
)
@click.option(
    "--standby",
    is_flag=True,
    help="If another runner holds this database, wait and take over when it stops (instead of failing).",
)
@click.option(
    "--sharding",
    is_flag=True,
    envvar="RECONCILE_SHARDING",
    help="Share the work with the other runners on this PostgreSQL database by shard leases "
    "(instead of one runner at a time). Env: RECONCILE_SHARDING.",
)
@click.option(
    "--lease-duration",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    envvar="RECONCILE_LEASE_DURATION",
    help="Seconds a shard lease lasts unless renewed (with --sharding). Env: RECONCILE_LEASE_DURATION.",
)
@click.option(
    "--renew-interval",
    type=click.FloatRange(min=0.05),
    default=5.0,
    show_default=True,
    envvar="RECONCILE_RENEW_INTERVAL",
    help="Seconds between renewals of the leases (with --sharding). Env: RECONCILE_RENEW_INTERVAL.",
)
@click.option(
    "--shards",
    type=click.IntRange(1, 65536),
    envvar="RECONCILE_SHARDS",
    help="Shards of the store, when this runner makes its lease table (fixed from then on).  "
    "[default: 64] Env: RECONCILE_SHARDS.",
)
@click.option("-q", "--quiet", is_flag=True, help="Do not print the engine's actions.")
@click.pass_obj
def run(settings: Settings, /, **options: Any) -> None:
    """Run the controllers: observe, create, update, delete until actual equals declared."""
    if not run_async(_run(settings, RunOptions(**options))):
        raise Failure


@attrs.frozen
class RunOptions:
    """The options of ``reconcile run``."""

    once: bool = False
    timeout: float = 300.0
    workers: int = 16
    poll_interval: float | None = None
    shutdown_deadline: float = 10.0
    provider_timeout: float = 60.0
    standby: bool = False
    quiet: bool = False
    sharding: bool = False
    lease_duration: float = 15.0
    renew_interval: float = 5.0
    shards: int | None = None


async def _run(settings: Settings, run_options: RunOptions) -> bool:
    once, timeout, quiet = run_options.once, run_options.timeout, run_options.quiet
    # --once's --timeout bounds the whole command: converging waits what is left of it
    # after starting, and the shutdown gets what is left after that (at most
    # --shutdown-deadline): reconciles cut short are safe, as at any deadline.
    deadline = time.monotonic() + timeout
    poll_interval = run_options.poll_interval
    options: dict[str, Any] = {} if poll_interval is None else {"poll_interval": poll_interval}
    where = settings.store.where
    runtime = Runtime(
        settings.db,
        provider_config=settings.provider_config,
        # --import MODULE:OPERATOR: the operator's controllers run beside the installed ones.
        operators=imported_operators(settings.imports) if settings.imports else None,
        kinds=settings.kinds if settings.imports else None,
        workers=run_options.workers,
        shutdown_deadline=run_options.shutdown_deadline,
        provider_timeout=run_options.provider_timeout or None,
        runner_lock="wait" if run_options.standby else "fail",
        handle_signals=True,
        gc_tuning=True,  # the CLI owns its process: tune the collector for its caches
        sharding=run_options.sharding,
        lease_duration=run_options.lease_duration,
        renew_interval=run_options.renew_interval,
        shards=run_options.shards,
        **options,
    )
    try:
        await runtime.start()
    except StoreError as exc:
        raise BadInput(f"--db: {exc}") from exc
    except ValueError as exc:  # --renew-interval not shorter than --lease-duration
        raise BadInput(str(exc)) from exc
    except LockedError as exc:
        raise Failure(
            f"another runner is reconciling {where}: {exc.holder}",
            "stop it first, or use --standby to take over when it stops",
        ) from exc
    if runtime.stop_requested:  # a signal while standing by
        await runtime.close()
        click.echo(f"reconcile: stopped while standing by; {where} was not reconciled", err=True)
        return True
    printer: asyncio.Task[None] | None = None
    ok = True
    lost: LockedError | None = None
    try:
        if not quiet and not (once and isatty()):
            printer = asyncio.create_task(print_actions(runtime, click.echo))
        if once:
            progress = _Progress(rich=isatty())
            with progress.running():
                state = await _converge(runtime, max(0.0, deadline - time.monotonic()), progress)
            ok = state is not None and state.converged
            lost = runtime.lock_lost
            if lost is None:
                _report_once(runtime, state, timeout)
        else:
            lost = await _serve(runtime, where)
    finally:
        if printer is not None:
            printer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await printer
        left = max(0.0, deadline - time.monotonic())
        clean = await runtime.close(deadline=min(run_options.shutdown_deadline, left) if once else None)
        if not clean and runtime.lock_lost is None:
            click.echo(
                "reconcile: some reconciles were abandoned at the deadline; a restart resumes them", err=True
            )
    if lost is not None:
        raise Failure(
            str(lost),
            f"{lost.holder} reconciles the store now; start this one again with --standby to take over "
            "when it stops",
        )
    return ok


async def _serve(runtime: Runtime, where: str) -> LockedError | None:
    """Run until stopped (a signal); the runner lock's loss, if that is what stopped it
    (as a lost leader election stops a controller manager)."""
    sharing = runtime.sharding
    if sharing is not None:
        click.echo(
            f"reconcile: runner {sharing.runner} holds {len(sharing.held)} of {sharing.count} shards",
            err=True,
        )
    click.echo(f"reconcile: running on {where} (Ctrl-C to stop)", err=True)
    try:
        await runtime.run_until_stopped()
    except LockedError as exc:
        return exc
    click.echo("reconcile: stopping", err=True)
    return None


def _report_once(runtime: Runtime, state: Convergence | None, timeout: float) -> None:
    """The Ready table, then why --once did not converge: Interrupted (exit 130) after
    a signal, Failure (exit 1) otherwise."""
    now = runtime.convergence() if state is None else state
    objects = [o for c in runtime.controllers.values() for o in c.informer.list()]
    if objects:
        click.echo(render_objects(runtime.client, objects, "table", namespaces=True, kinds=True))
    if state is not None and state.converged:
        if state.total == 0:
            click.echo("nothing declared: no objects to reconcile (apply some first)")
        return
    waiting = list(now.waiting)
    if now.unsynced and not runtime.stop_requested:
        kinds = ", ".join(now.unsynced)
        raise Failure(f"not converged after {timeout:g} s: the store could not be listed for {kinds}")
    reasons = [_why(o, now.failures.get(o.key), unobserved=o.key in now.unobserved) for o in waiting[:20]]
    more = [f"... and {len(waiting) - 20} more"] if len(waiting) > 20 else []  # noqa: PLR2004
    if runtime.stop_requested:
        raise Interrupted(f"interrupted: {len(waiting)} not converged", *reasons, *more)
    if state is not None and state.settled:
        first = (
            f"{len(waiting)} not Synced and Ready, and no retry is scheduled "
            "(they need a new spec or a fix outside)"
        )
        raise Failure(first, *reasons, *more)
    raise Failure(f"not converged after {timeout:g} s: {len(waiting)} not Synced and Ready", *reasons, *more)


def _why(obj: AnyResource, failure: str | None = None, *, unobserved: bool = False) -> str:
    """One object's line in the report: its conditions and why it is not converged."""
    ready, synced, reason = readiness(obj)
    condition = obj.status.condition("Synced") if hasattr(obj.status, "condition") else None
    message = one_line(condition.message) if condition is not None and condition.message else ""
    detail = f": {message}" if message and synced != "True" else ""
    if not detail and failure:
        detail = f": last reconcile failed: {failure}"  # its status could not say so (a full disk)
    elif not detail and unobserved:
        detail = ": not observed in this run (its status is from before)"
    where = f"{printable(obj.metadata.namespace)}/{printable(obj.metadata.name)}"
    return f"{obj.kind} {where}: Ready={ready} Synced={synced}{f' {reason}' if reason else ''}{detail}"
