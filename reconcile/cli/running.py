"""``run``: the supervisor on the command line.

``reconcile run`` serves until SIGINT or SIGTERM, printing what the engine does; the
store's watch picks up what ``apply`` and ``delete`` in other terminals write within
milliseconds. ``reconcile run --once`` converges and exits: 0 only when every object is
Ready for its current generation and nothing is left deleting, 1 when ``--timeout``
passes first (naming what is not Ready and why). Either way a signal starts a graceful
shutdown: in-flight reconciles get ``--shutdown-deadline`` seconds to finish, and what is
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
from reconcile.cli.main import cli, isatty, run_async
from reconcile.cli.reading import render_objects
from reconcile.cli.rendering import event_detail, readiness
from reconcile.cli.settings import Settings
from reconcile.errors import CorruptError, LockedError, StoreError
from reconcile.model import Event, EventType, Resource
from reconcile.runtime import Runtime

__all__ = ["RunOptions", "idle", "pending"]

AnyResource = Resource[Any, Any]
_CHECK_EVERY = 0.05  # seconds between convergence checks; reads only the caches
_QUIET_TYPES = frozenset({EventType.STATUS_CHANGED})


def pending(runtime: Runtime) -> tuple[list[AnyResource], int]:
    """The cached objects not Ready yet (or still deleting), and how many objects there are."""
    waiting: list[AnyResource] = []
    total = 0
    for controller in runtime.controllers.values():
        for obj in controller.informer.list():
            total += 1
            ready, _, _ = readiness(obj)
            if ready != "True" or obj.metadata.deletion_timestamp is not None:
                waiting.append(obj)
    return waiting, total


def idle(runtime: Runtime) -> bool:
    """No controller has a key queued or in flight (delayed polls and retries aside): the
    first pass over what the caches listed at start has finished."""
    for controller in runtime.controllers.values():
        stats = controller.queue.statistics()
        if stats.depth or stats.processing:
            return False
    return True


class _Progress:
    """A rich bar on a terminal; a plain ``ready N/M`` line per change otherwise."""

    def __init__(self, rich: bool) -> None:
        self.rich = rich
        self.shown: tuple[int, int] | None = None
        self._bar: Any = None
        self._task: Any = None

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

    def update(self, ready: int, total: int) -> None:
        if (ready, total) == self.shown:
            return
        self.shown = (ready, total)
        if self._bar is not None:
            self._bar.update(self._task, completed=ready, total=total)
        else:
            click.echo(f"ready {ready}/{total}")


def _corruption(runtime: Runtime) -> CorruptError | None:
    """The first corrupt body an informer met: retrying will not help, so --once stops."""
    return next((c.informer.corrupt for c in runtime.controllers.values() if c.informer.corrupt), None)


def _stuck(runtime: Runtime, waiting: list[AnyResource]) -> list[AnyResource]:
    """The objects the engine gave up on (a terminal error, a permanent failure, not
    ours) and scheduled no retry for: they change only with a new spec or a fix outside."""
    gave_up = [c.gave_up for c in runtime.controllers.values() if c.gave_up]
    return [o for o in waiting if any(o.key in g for g in gave_up)]


def _unsynced(runtime: Runtime) -> list[str]:
    """The kinds whose cache has not loaded yet."""
    return [c.informer.kind.kind for c in runtime.controllers.values() if not c.informer.synced.is_set()]


async def _converge(runtime: Runtime, timeout: float, progress: _Progress) -> bool:
    """Wait until everything is Ready, the deadline passes or a signal asks to stop; the
    caches loading is part of the wait (a store that cannot be listed must not make it
    endless), and a corrupt body ends it at once."""
    deadline = time.monotonic() + timeout
    while not runtime.stop_requested:
        started = time.monotonic()
        corrupt = _corruption(runtime)
        if corrupt is not None:
            raise Failure(str(corrupt), "reconcile verify --deep lists every event that cannot be decoded")
        if not _unsynced(runtime):
            waiting, total = pending(runtime)
            progress.update(total - len(waiting), total)
            if idle(runtime) and (not waiting or len(_stuck(runtime, waiting)) == len(waiting)):
                return not waiting  # all Ready, or what is not will not change by waiting
        if started >= deadline:
            return False
        # A scan of a large cache costs milliseconds: keep it under ~5% of the time.
        await asyncio.sleep(max(_CHECK_EVERY, 20 * (time.monotonic() - started)))
    return False


async def _print_actions(runtime: Runtime, echo: Callable[[str], None]) -> None:
    client = runtime.client
    async for event in client.watch(since=await client.revision()):
        if not isinstance(event, Event) or event.type in _QUIET_TYPES:
            continue
        key = event.key
        detail = event_detail(event).splitlines()
        summary = f" {detail[0]}" if detail else ""
        when = event.time.strftime("%H:%M:%S")
        echo(f"{when} {key.kind} {key.namespace}/{key.name} {event.type} ({event.actor}){summary}")


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


async def _run(settings: Settings, run_options: RunOptions) -> bool:
    once, timeout, quiet = run_options.once, run_options.timeout, run_options.quiet
    poll_interval = run_options.poll_interval
    options: dict[str, Any] = {} if poll_interval is None else {"poll_interval": poll_interval}
    path = settings.database_path()
    runtime = Runtime(
        settings.db,
        provider_config=settings.provider_config,
        workers=run_options.workers,
        shutdown_deadline=run_options.shutdown_deadline,
        provider_timeout=run_options.provider_timeout or None,
        runner_lock="wait" if run_options.standby else "fail",
        handle_signals=True,
        freeze_gc=True,  # the CLI owns its process: keep the collector off the cache
        **options,
    )
    try:
        await runtime.start()
    except StoreError as exc:
        raise BadInput(f"--db: {exc}") from exc
    except LockedError as exc:
        raise Failure(
            f"another runner is reconciling {path}: {exc.holder}",
            "stop it first, or use --standby to take over when it stops",
        ) from exc
    if runtime.stop_requested:  # a signal while standing by
        await runtime.close()
        click.echo(f"reconcile: stopped while standing by; {path} was not reconciled", err=True)
        return True
    printer: asyncio.Task[None] | None = None
    ok = True
    try:
        if not quiet and not (once and isatty()):
            printer = asyncio.create_task(_print_actions(runtime, click.echo))
        if once:
            progress = _Progress(rich=isatty())
            with progress.running():
                ok = await _converge(runtime, timeout, progress)
            _report_once(runtime, ok, timeout)
        else:
            click.echo(f"reconcile: running on {path} (Ctrl-C to stop)", err=True)
            await runtime.run_until_stopped()
            click.echo("reconcile: stopping", err=True)
    finally:
        if printer is not None:
            printer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await printer
        clean = await runtime.close()
        if not clean:
            click.echo(
                "reconcile: some reconciles were abandoned at the deadline; a restart resumes them", err=True
            )
    return ok


def _report_once(runtime: Runtime, ok: bool, timeout: float) -> None:
    """The Ready table, then why --once did not converge: Interrupted (exit 130) after
    a signal, Failure (exit 1) otherwise."""
    waiting, _ = pending(runtime)
    objects = [o for c in runtime.controllers.values() for o in c.informer.list()]
    if objects:
        click.echo(render_objects(runtime.client, objects, "table", namespaces=True, kinds=True))
    if ok:
        return
    if _unsynced(runtime) and not runtime.stop_requested:
        kinds = ", ".join(_unsynced(runtime))
        raise Failure(f"not converged after {timeout:g} s: the store could not be listed for {kinds}")
    failures = {k: v for c in runtime.controllers.values() for k, v in c.failures.items()}
    reasons = [_why(o, failures.get(o.key)) for o in waiting[:20]]
    more = [f"... and {len(waiting) - 20} more"] if len(waiting) > 20 else []  # noqa: PLR2004
    if runtime.stop_requested:
        raise Interrupted(f"interrupted: {len(waiting)} not Ready", *reasons, *more)
    if waiting and len(_stuck(runtime, waiting)) == len(waiting):
        first = f"{len(waiting)} not Ready, and no retry is scheduled (they need a new spec or a fix outside)"
        raise Failure(first, *reasons, *more)
    raise Failure(f"not converged after {timeout:g} s: {len(waiting)} not Ready", *reasons, *more)


def _why(obj: AnyResource, failure: str | None = None) -> str:
    ready, synced, reason = readiness(obj)
    condition = obj.status.condition("Synced") if hasattr(obj.status, "condition") else None
    message = condition.message.splitlines()[0] if condition is not None and condition.message else ""
    detail = f": {message}" if message and synced != "True" else ""
    if not reason and not detail and failure:
        detail = f": last reconcile failed: {failure}"  # its status could not say so (a full disk)
    return f"{obj.kind} {obj.metadata.namespace}/{obj.metadata.name}: Ready={ready} {reason}{detail}".rstrip()
