"""The ``reconcile`` command: kubectl's conventions over the event log and the runtime.

``main()`` owns failure: every command raises (:class:`Failure`, :class:`BadInput`, or
one of reconcile's errors) and ``main`` turns that into lines on stderr and an exit code
(see :mod:`reconcile.cli.failing`); a traceback only with ``--debug``.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import socket
import sys
import traceback
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from reconcile.cli.commands import COMMANDS, LazyGroup
from reconcile.cli.failing import EXIT_FAILURE, EXIT_INPUT, EXIT_INTERRUPTED, BadInput, Failure, invalid_lines
from reconcile.cli.importing import ENVIRONMENT, imports_from
from reconcile.cli.settings import Settings
from reconcile.errors import InvalidError, NotFoundError, ReconcileError, StoreError
from reconcile.store.urls import URL_FORMS

__all__ = ["cli", "main", "run_async"]


def run_async(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a command's coroutine in a fresh event loop."""
    import asyncio  # noqa: PLC0415 - not for the commands that need no event loop

    return asyncio.run(coroutine)


def _checked_config(
    context: click.Context,
    path: Path | None,
    options: Sequence[str],
    roots: Sequence[str],
    source_roots: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """Each provider's config (:mod:`reconcile.cli.configuring`); what the environment
    and the command line gave checked against the installed providers first."""
    from reconcile.cli.configuring import (  # noqa: PLC0415 - the settings' parser, for every command
        check_settings,
        command_line_settings,
        provider_config,
    )

    config, given = provider_config(
        path, command_line_settings(options), environ=os.environ, roots=roots, source_roots=source_roots
    )
    if given:
        from reconcile.model.discovery import discover_providers  # noqa: PLC0415 - only when settings are given

        providers: dict[str, object] = {provider.name: provider for provider in discover_providers()}
        kinds = context.obj.kinds
        for kind in kinds:
            name = kinds.provider_of(kind)
            if name is not None:
                providers.setdefault(name, None)
        check_settings(config, given, providers)
    return config


#: kubectl's limit on a field manager's name; a user's is held to it too.
_MAX_NAME = 128


def _name(option: str, value: str) -> str:
    """A user or field manager name: one printable line, recorded in every event."""
    if not value.strip():
        raise BadInput(f"{option}: must not be empty")
    if len(value) > _MAX_NAME:
        raise BadInput(f"{option}: must be at most {_MAX_NAME} characters, not {len(value)}")
    if not value.isprintable():
        from reconcile.model.printing import printable  # noqa: PLC0415 - only for this message

        raise BadInput(
            f"{option}: {printable(value, quoted=True)}: must be printable (no control characters)"
        )
    return value


#: The check of a user or field manager name, for the commands that take one too
#: (``apply --field-manager``).
checked_name = _name


def _os_user() -> str:
    """``user@host``: who runs this process, as the OS knows them (the uid when it has no
    name for it, as in a container without a passwd entry)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        name = f"uid {os.getuid()}"
    return f"{name}@{socket.gethostname()}"


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--db",
    envvar="RECONCILE_DB",
    default="reconcile.db",
    show_default=True,
    help=f"The store: {URL_FORMS}. Env: RECONCILE_DB.",
)
@click.option(
    "-P",
    "--provider-setting",
    "provider_settings",
    multiple=True,
    metavar="PROVIDER.KEY=VALUE",
    help="Set a key of a provider's config (repeatable; over RECONCILE_<PROVIDER>__<KEY> and "
    "--provider-config). VALUE is typed as helm's --set: true/false, numbers, [a, b], null "
    "removes the key, quotes keep a string.",
)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder the files provider may write under (repeatable): -P files.roots=DIR, made "
    "absolute. Default: each manifest's folder.",
)
@click.option(
    "--source-root",
    "source_roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder the files provider may read sources from (repeatable): -P files.source_roots=DIR, "
    "made absolute. Default: each manifest's folder.",
)
@click.option(
    "--provider-config",
    envvar="RECONCILE_PROVIDER_CONFIG",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A YAML file mapping provider names to their config. Env: RECONCILE_PROVIDER_CONFIG.",
)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE[:ATTRIBUTE]",
    help="Import a module that declares kinds (its `kinds`: an iterable of Kind, or a provider), "
    "so commands know a service's own kinds. Repeatable. Env: RECONCILE_IMPORT (comma-separated).",
)
@click.option(
    "--as",
    "user",
    metavar="NAME",
    help="Who the writes are by, recorded in each event (history's BY). Default: the OS user "
    "and host (alice@laptop).",
)
@click.option(
    "--field-manager",
    metavar="NAME",
    help="The field manager writes are recorded under (events' actor; who owns applied labels, "
    "annotations and finalizers). Default: reconcile.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(package_name="reconcile-engine", prog_name="reconcile")
@click.pass_context
def cli(  # noqa: PLR0917 - click passes one parameter per global option
    context: click.Context,
    db: str,
    provider_settings: tuple[str, ...],
    roots: tuple[str, ...],
    source_roots: tuple[str, ...],
    provider_config: Path | None,
    imports: tuple[str, ...],
    user: str | None,
    field_manager: str | None,
    debug: bool,
) -> None:
    """Keep files, buckets, DNS records ... at their declared state.

    Declare resources with `apply`, converge them with `run`, and read what happened
    with `get`, `describe` and `history`.
    """
    modules = imports_from(imports, os.environ.get(ENVIRONMENT))
    context.obj = Settings(
        db=db,
        debug=debug,
        imports=modules,
        user=_name("--as", user) if user is not None else _os_user(),
        field_manager=None if field_manager is None else _name("--field-manager", field_manager),
    )
    if modules:
        # Imported now, whatever the command: a module that cannot be is bad input before
        # anything else is looked at (a database, a manifest).
        _ = context.obj.kinds
    context.obj.provider_config = _checked_config(
        context, provider_config, provider_settings, roots, source_roots
    )


@contextlib.contextmanager
def _logging(debug: bool) -> Iterator[None]:
    """The library logs through ``logging``; on the command line its warnings are one
    plain line each on stderr (everything, with the logger's name, under --debug). The
    logger is put back as it was afterwards (main() may run inside another program)."""
    handler = logging.StreamHandler()
    fmt = "%(levelname)s %(name)s: %(message)s" if debug else "warning: %(message)s"
    handler.setFormatter(logging.Formatter(fmt))
    logger = logging.getLogger("reconcile")
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def _report(lines: Sequence[str]) -> None:
    coloured = colour(err=True)
    prefix = click.style("error:", fg="red", bold=True) if coloured else "error:"
    for line in lines:
        click.echo(f"{prefix} {line}", err=True, color=coloured or None)


def colour(*, err: bool = False) -> bool:
    """Whether to colour what goes to stdout (or stderr): a terminal, and no NO_COLOR
    (https://no-color.org) in the environment."""
    stream = sys.stderr if err else sys.stdout
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run one command, return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        with _logging(debug):
            cli.main(args=args, prog_name="reconcile", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (Failure, InvalidError, ReconcileError, OSError, TimeoutError) as exc:
        if debug:
            traceback.print_exc()
        if isinstance(exc, Failure):
            _report(exc.lines)
            return exc.exit_code
        if isinstance(exc, InvalidError):
            _report(invalid_lines(exc))
            return EXIT_INPUT
        if isinstance(exc, NotFoundError | StoreError | ReconcileError):
            _report([str(exc)])
            return EXIT_FAILURE
        if isinstance(exc, TimeoutError):
            _report([str(exc) or "timed out"])
            return EXIT_FAILURE
        _report([f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)])
        return EXIT_FAILURE
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    return 0


def entry() -> None:  # pragma: no cover - the console script
    """``reconcile`` on the command line."""
    sys.exit(main())


def isatty() -> bool:
    """Whether stdout is a terminal (progress bars and colour), unless NO_COLOR/CI say no."""
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
