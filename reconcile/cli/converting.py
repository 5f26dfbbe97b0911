"""``migrate-storage``: rewrite a kind's current objects in its storage version (see
:mod:`reconcile.api.migrating`)."""

from __future__ import annotations

import click

from reconcile.cli.completing import complete_kinds
from reconcile.cli.failing import Failure
from reconcile.cli.main import cli, run_async
from reconcile.cli.settings import Settings
from reconcile.model.printing import printable

__all__: list[str] = []


@cli.command("migrate-storage")
@click.argument("kind", shell_complete=complete_kinds)
@click.option("-n", "--namespace", help="Only this namespace (default: all).")
@click.pass_obj
def migrate_storage(settings: Settings, kind: str, namespace: str | None) -> None:
    """Rewrite every object of KIND not in the kind's storage version (written under an
    older version, or an older release's spelling) in the storage version: one
    StorageMigrated event each; running it again writes nothing. The log's history is
    never rewritten (old events are converted when read)."""
    run_async(_migrate(settings, kind, namespace))


async def _migrate(settings: Settings, kind: str, namespace: str | None) -> None:
    # Imported here: the command's module is loaded only when it runs (see commands.py).
    from reconcile.api.migrating import migrate_storage as migrate  # noqa: PLC0415

    found = settings.kinds.resolve(kind)  # (an unknown kind: exit 2, before the store opens)
    async with settings.client() as client:
        done = await migrate(client.store, client.decoder, found, namespace=namespace)
        for key in done.migrated:
            click.echo(f"{found.kind.lower()}/{printable(key.name)} migrated to {found.api_version}")
        click.echo(
            f"{len(done.migrated)} migrated, {done.current} already in {found.api_version}"
            + (f", {len(done.failed)} failed" if done.failed else "")
        )
        if done.failed:
            raise Failure(*(str(error) for _, error in done.failed))
