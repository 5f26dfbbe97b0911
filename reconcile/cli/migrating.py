"""``migrate``: copy the store ``--db`` names, its whole history, into an empty store of
either backend (SQLite to PostgreSQL when one machine is no longer enough, and back).

The copy itself is the store layer's (:mod:`reconcile.store.copying`, through the store
contract alone); this command names the two stores, reports progress on stderr, and
says what was copied and checked. Refusals (a source that does not exist, a target that
is the source or holds anything, a runner at work, a URL that is malformed or out of
reach) exit 2 with nothing written; a failure during the copy exits 1 and leaves the
target empty (its one transaction rolled back); a copy that, read back, does not match
the source exits 1 too, saying so (the target then holds it: empty it and retry).
"""

from __future__ import annotations

import time

import click

from reconcile.cli.failing import BadInput, Failure
from reconcile.cli.main import cli, run_async
from reconcile.cli.settings import Settings
from reconcile.errors import StoreError
from reconcile.store.urls import URL_FORMS

__all__: list[str] = []

#: Seconds between two progress lines.
_EVERY = 1.0


class _Progress:
    """Progress lines on stderr: at most one a second, and each stage's last."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage == "checking":
            click.echo(f"checking the copy: reading back {total:,} events", err=True)
            return
        if done < total and now - self._last < _EVERY:
            return
        self._last = now
        click.echo(f"copying {stage}: {done:,}/{total:,}", err=True)


@cli.command()
@click.option(
    "--to",
    "target",
    required=True,
    metavar="URL",
    help=f"The empty store to copy into: {URL_FORMS}.",
)
@click.option(
    "--batch", type=click.IntRange(1, 100_000), default=2000, show_default=True, help="Rows per batch."
)
@click.pass_obj
def migrate(settings: Settings, target: str, batch: int) -> None:
    """Copy the store (--db), its whole history, into an empty store (--to), SQLite or
    PostgreSQL, then check the copy: counts, checksums, verify. Needs no runner at work
    on either."""
    run_async(_migrate(settings, target, batch))


async def _migrate(settings: Settings, target: str, batch: int) -> None:
    from reconcile.store.copying import (  # noqa: PLC0415 - only for this command
        CopyMismatchError,
        CopyRefusedError,
        migrate,
    )

    source = settings.store
    try:
        report = await migrate(settings.db, target, batch=batch, progress=_Progress())
    except CopyRefusedError as exc:
        raise BadInput(str(exc)) from exc
    except CopyMismatchError as exc:
        raise Failure(
            str(exc), "the target holds a copy that does not match: empty it and migrate again"
        ) from exc
    except StoreError as exc:
        raise Failure(str(exc), "nothing was copied: the target's transaction was rolled back") from exc
    header = report.header
    settings_part = f", {len(header.settings)} remembered settings" if header.settings else ""
    click.echo(
        f"copied {source.where} -> {_where(target)}: {header.events:,} events up to revision "
        f"{header.revision:,} (horizon {header.horizon:,}), {header.objects:,} objects "
        f"({header.live:,} live){settings_part} in {report.seconds:.1f}s"
    )
    click.echo(
        f"checked: counts and meta equal, events sha256 {report.events_checksum[:16]}, "
        f"objects sha256 {report.objects_checksum[:16]} on both sides; the copy verifies"
    )
    if report.source_moved:
        click.echo(
            f"warning: the source moved on by {report.source_moved:,} revisions during the copy; "
            "those writes are not in the copy (migrate again into an empty store)",
            err=True,
        )


def _where(url: str) -> str:
    """The target as messages name it (a PostgreSQL URL's password masked)."""
    from reconcile.store import locate_store  # noqa: PLC0415

    return locate_store(url).where
