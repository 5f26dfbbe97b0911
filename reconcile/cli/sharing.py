"""``status``: who runs on a store, and which shards each runner holds.

With ``reconcile run --sharding`` on a PostgreSQL store, several runners share the keys
by shard leases (:mod:`reconcile.store.fencing`); ``reconcile status`` reads the lease
table (without writing) and prints each live runner with the shards it holds, the free
or expired shards, and how many writes were refused by their fence so far. On a store
nobody shards (SQLite, or PostgreSQL with one runner), it says so. A server that takes
no writes now (a standby, ``default_transaction_read_only``) is said first.
"""

from __future__ import annotations

from typing import Any

import click

from reconcile.cli.main import cli, run_async
from reconcile.cli.rendering import as_json
from reconcile.cli.settings import Settings

__all__ = ["status"]


def _ranges(shards: list[int]) -> str:
    """``0-3,7,9-10``: shard numbers, runs collapsed."""
    parts: list[str] = []
    for shard in sorted(shards):
        if parts and shard == int(parts[-1].rsplit("-", 1)[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{shard}"
        else:
            parts.append(str(shard))
    return ",".join(parts)


@cli.command()
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def status(settings: Settings, /, output: str) -> None:
    """Show the runners sharing this store and the shards each holds."""
    run_async(_status(settings, output))


async def _status(settings: Settings, output: str) -> None:
    async with settings.client(read_only=True) as client:
        table = await client.store.shard_table()
        refusal = await client.store.write_refusal()
    if refusal is not None and output != "json":
        click.echo(f"writes refused: {refusal}; runners wait until it takes writes again")
    if table is None:
        if output == "json":
            click.echo(as_json({"sharding": None, "writeRefusal": refusal}))
        else:
            click.echo("no shard leases: one runner at a time (the runner lock)")
        return
    held = table.by_holder()
    free = [lease.shard for lease in table.leases if lease.holder is None or lease.expires_in <= 0]
    if output == "json":
        document: dict[str, Any] = {
            "shards": len(table.leases),
            "runners": [
                {"runner": runner, "about": about, "shards": held.get(runner, [])}
                for runner, about in table.runners.items()
            ],
            "unheld": free,
            "fencedWrites": table.refused,
            "writeRefusal": refusal,
            "leases": [
                {"shard": s.shard, "holder": s.holder, "epoch": s.epoch, "expiresIn": round(s.expires_in, 3)}
                for s in table.leases
            ],
        }
        click.echo(as_json(document))
        return
    click.echo(f"{len(table.leases)} shards, {len(table.runners)} live runner(s)")
    for runner, about in table.runners.items():
        mine = held.get(runner, [])
        click.echo(f"  {runner} ({about}): {len(mine)} shards {_ranges(mine)}".rstrip())
    if free:
        click.echo(f"  not held: {len(free)} shards {_ranges(free)}")
    click.echo(f"fenced writes refused so far: {table.refused}")
