"""``orphans``: external resources this store made that no object declares any more.

How they come about: the store was restored from a backup older than some creates, or
an object's row was dropped by hand. Each provider that can list what carries this
store's mark (``ListingOwned``; the dns provider by a TSIG-signed zone transfer) is asked;
a mark whose uid no live object has is an orphan, unless the log says that object was
deleted with deletion policy Orphan (then it was left on purpose, and is never deleted
here). ``--delete`` deletes the orphans, each only while it still carries the same mark.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

import click

from reconcile.api.client import Client
from reconcile.cli.completing import complete_kinds
from reconcile.cli.failing import BadInput, Failure
from reconcile.cli.main import cli, run_async
from reconcile.cli.rendering import as_json, table
from reconcile.cli.settings import Settings
from reconcile.errors import IncompleteListingError, InvalidError, ReconcileError
from reconcile.model import Kind
from reconcile.model.discovery import discover_providers
from reconcile.model.events import ActionType
from reconcile.model.external import ExternalClient, ListingOwned, bind_store, client_of

__all__: list[str] = []


@cli.command()
@click.argument("kind", required=False, shell_complete=complete_kinds)
@click.option("--delete", is_flag=True, help="Delete the orphans (never what was orphaned on purpose).")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per kind's listing.")
@click.option("-o", "--output", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.pass_obj
def orphans(settings: Settings, kind: str | None, delete: bool, timeout: float, output: str) -> None:
    """External resources this store made that no object declares any more (a store
    restored from an older backup): listed, and with --delete deleted. Only providers
    that can list what carries the store's mark take part (dns)."""
    if timeout <= 0:
        raise BadInput("--timeout: must be > 0")
    kinds = list(settings.kinds)
    if kind is not None:
        try:
            kinds = [settings.kinds.resolve(kind)]
        except InvalidError as exc:
            raise BadInput(str(exc)) from None
    run_async(
        _orphans(settings, kinds, delete=delete, timeout=timeout, output=output, named=kind is not None)
    )


async def _orphans(
    settings: Settings, kinds: list[Kind], *, delete: bool, timeout: float, output: str, named: bool
) -> None:
    providers = {p.name: p for p in discover_providers()}
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    clients: dict[str, ExternalClient] = {}
    async with settings.client() as client:
        identity, key = await client.engine.store_identity(), await client.engine.store_mark_key()
        try:
            for kind in kinds:
                name = settings.kinds.provider_of(kind)
                if name is None or name not in providers:
                    continue
                if name not in clients:
                    clients[name] = await providers[name].connect(settings.provider_config.get(name, {}))
                    bind_store(clients[name], identity, key)
                external = client_of(clients[name], kind)
                if not isinstance(external, ListingOwned):
                    if named:
                        msg = f"{kind.kind}: its provider ({name}) cannot list what this store made"
                        raise BadInput(msg)
                    continue
                await _kind_orphans(client, external, kind, rows, problems, delete=delete, timeout=timeout)
        finally:
            for external in clients.values():
                with contextlib.suppress(Exception):
                    await external.close()
    if output == "json":
        click.echo(as_json(rows))
    elif rows:
        click.echo(table(("KIND", "EXTERNAL", "UID", "STATE"), [tuple(r.values()) for r in rows]))
        states = collections.Counter(row["state"] for row in rows)
        summary = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
        hint = "; --delete deletes the orphans" if states["orphan"] else ""
        click.echo(f"{summary} (store {identity}){hint}")
    else:
        click.echo(f"no orphans found (store {identity})")
    if problems:
        raise Failure("; ".join(problems))


async def _kind_orphans(
    client: Client,
    external: ListingOwned,
    kind: Kind,
    rows: list[dict[str, Any]],
    problems: list[str],
    *,
    delete: bool,
    timeout: float,
) -> None:
    """One kind's orphans into ``rows`` (deleted first with ``delete``); what failed
    into ``problems``."""
    try:
        async with asyncio.timeout(timeout):
            owned = await external.list_owned(kind)
    except TimeoutError:
        problems.append(f"{kind.kind}: the listing did not finish within {timeout:g} s")
        return
    except IncompleteListingError as exc:
        problems.append(f"{kind.kind}: {exc}")
        owned = exc.found  # what could be listed is still shown (and deleted if asked)
    except ReconcileError as exc:
        problems.append(f"{kind.kind}: {exc}")
        return
    live = {obj.metadata.uid for obj in (await client.list(kind)).items}
    found = [item for item in owned if item.uid not in live]
    kept = await client.maintenance.uids_with_event([item.uid for item in found], ActionType.ORPHANED)
    for item in found:
        state = "orphaned on purpose" if item.uid in kept else "orphan"
        if delete and state == "orphan":
            try:
                await external.delete_owned(kind, item)
                state = "deleted"
            except ReconcileError as exc:
                problems.append(f"{kind.kind} {item.external}: {exc}")
                state = "left"
        rows.append({"kind": kind.kind, "external": item.external, "uid": item.uid, "state": state})
