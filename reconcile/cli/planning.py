"""``plan``: what ``run`` would do, found by observing the outside world and acting on
nothing (Terraform's ``plan``; ``diff`` stays the spec-to-spec comparison).

Without ``-f`` it plans the stored objects; with ``-f`` the manifests as ``apply`` would
store them (an object not stored yet gets a fresh identity, so a resource that exists
already is reported as not ours, as a run would find it). The providers are connected
and asked to ``observe`` only; the database is opened read-only.

``-out FILE`` saves the plan of ``-f``'s manifests for ``apply FILE``, which applies
exactly it or refuses (see :mod:`reconcile.cli.saving`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from reconcile.api import Client
from reconcile.api.decoding import Decoder
from reconcile.cli.declaring import Declared, admit_all, applied_body, current_of, origin, read_documents
from reconcile.cli.failing import BadInput, Failure
from reconcile.cli.main import cli, run_async
from reconcile.cli.reading import list_all
from reconcile.cli.remembering import with_remembered_config
from reconcile.cli.rendering import as_json, table
from reconcile.cli.saving import SavedDocument, SavedPlan, now, save_plan
from reconcile.cli.settings import Settings
from reconcile.controller.ladder import CreatePendingUnknown, InvalidPolicy
from reconcile.controller.planning import ACTIONS, CHANGES, Planned, plan
from reconcile.model import Kind
from reconcile.model.discovery import discover_providers
from reconcile.model.external import ExternalClient, bind_store
from reconcile.model.printing import printable
from reconcile.model.resource import AnyResource

__all__ = ["show_plan"]

_NEW_UID = "00000000-0000-0000-0000-000000000000"  # no external resource carries this mark
#: Observes in flight at once, by default: ``run``'s reconciles per kind. One at a time,
#: ``plan`` was slower than ``run --once`` on the same objects (300 S3 objects against
#: moto_server: 1.76 s one at a time, 1.48 s with 16, as long as a converged run).
WORKERS = 16


@attrs.define
class _Snapshot:
    """What a plan of manifests was made against, for ``-out``: the store's revision
    (read before the objects) and each declared object's version (None: absent)."""

    revision: int = 0
    declared: list[Declared] = attrs.Factory(list)
    versions: list[int | None] = attrs.Factory(list)


@cli.command(name="plan")
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    help="Plan these manifests as apply would store them (default: the stored objects). Repeatable.",
)
@click.option("-o", "--output", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option("--exit-code", is_flag=True, help="Exit 1 when the plan changes anything.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds one observe may take.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=WORKERS,
    show_default=True,
    help="Observes in flight at once (run's --workers, the same default).",
)
@click.option(
    "-out",
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Save the plan of -f's manifests to this file: `reconcile apply FILE` applies exactly it, "
    "or refuses if the state moved since.",
)
@click.pass_obj
def plan_command(  # noqa: PLR0917 - click passes one parameter per option
    settings: Settings,
    filenames: tuple[str, ...],
    output: str,
    exit_code: bool,
    timeout: float,
    workers: int,
    out: Path | None,
) -> None:
    """Show what run would do (create, update with the diff, delete, adopt), observing only."""
    if out is not None and not filenames:
        raise BadInput("-out saves the plan of manifests: give them with -f")
    show_plan(
        settings, filenames, output=output, exit_code=exit_code, timeout=timeout, workers=workers, out=out
    )


def show_plan(
    settings: Settings,
    filenames: Sequence[str],
    *,
    output: str = "table",
    exit_code: bool = False,
    timeout: float = 60.0,
    workers: int = WORKERS,
    out: Path | None = None,
) -> None:
    """Plan, print, and fail (exit 1) on an object that cannot be observed, or with
    ``exit_code`` on a plan that changes something (``plan``, ``apply --plan``). With
    ``out``, save it (not when an object could not be observed: that plan is not whole)."""
    snapshot = _Snapshot()
    planned = run_async(_plan(settings, filenames, timeout, workers, snapshot))
    if output == "json":
        click.echo(as_json([_data(p) for p in planned]))
    else:
        _print(planned)
    errors = [p for p in planned if p.action == "error"]
    if errors:
        raise Failure(
            *(f"{_name(p)}: {'run stops' if _stops(p) else 'cannot observe'}: {p.detail}" for p in errors)
        )
    if out is not None:
        _save(out, snapshot, planned)
        click.echo(f"Saved the plan to {out}: `reconcile apply {out}` applies exactly it.", err=True)
    if exit_code and any(p.action in CHANGES for p in planned):
        raise Failure


def _absolute(path: Path | None) -> Path | None:
    """A manifest's file as a path that means the same from another folder."""
    return None if path is None else path.absolute()


def _save(out: Path, snapshot: _Snapshot, planned: Sequence[Planned]) -> None:
    documents = tuple(
        SavedDocument(d.document, _absolute(origin(d.document)), d.admitted.body, version)
        for d, version in zip(snapshot.declared, snapshot.versions, strict=True)
    )
    save_plan(out, SavedPlan(snapshot.revision, now(), documents, tuple(_data(p) for p in planned)))


async def _plan(
    settings: Settings,
    filenames: Sequence[str],
    timeout: float,
    workers: int = WORKERS,
    snapshot: _Snapshot | None = None,
) -> list[Planned]:
    snapshot = _Snapshot() if snapshot is None else snapshot
    if filenames:
        documents = read_documents(filenames)
        settings = await with_remembered_config(settings)
        declared = snapshot.declared = admit_all(settings.admission(), documents)
        snapshot.versions = [None] * len(declared)
    if not settings.store.exists():
        if not filenames:
            return []
        objects = [_as_new(settings, d.admitted.body) for d in declared]
        return await _observe_all(settings, objects, timeout=timeout, workers=workers)
    async with settings.client(read_only=True) as client:
        if filenames:
            snapshot.revision = await client.revision()  # before the objects: see saving
            currents = [await current_of(client, d) for d in declared]
            snapshot.versions = [None if c is None else c.metadata.resource_version for c in currents]
            manager = settings.field_manager
            objects = [_as_applied(client, d, c, manager) for d, c in zip(declared, currents, strict=True)]
        else:
            objects = await list_all(client, list(client.kinds), None, None)
        identity, key = await client.engine.store_identity(), await client.engine.store_mark_key()
    return await _observe_all(settings, objects, timeout=timeout, workers=workers, identity=identity, key=key)


def _fresh(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "metadata": {**body["metadata"], "uid": _NEW_UID, "generation": 1}}


def _as_new(settings: Settings, body: dict[str, Any]) -> AnyResource:
    """A declared object as a create would store it (a uid nothing outside carries)."""
    return Decoder(settings.kinds).resource(
        {**body, "metadata": {**body["metadata"], "uid": _NEW_UID, "generation": 1}}
    )


def _as_applied(
    client: Client, declared: Any, current: AnyResource | None, manager: str | None = None
) -> AnyResource:
    """A declared object as apply would leave it: the stored one brought to the
    declaration by the apply's own rule (``Engine.applied_body``: server-side apply
    keeps other managers' fields); the declared spec when that apply would be refused
    (the refusal is apply's to say)."""
    if current is None:
        return client.decode(_fresh(declared.admitted.body))
    return client.decode(applied_body(client, declared, current, manager))


async def _observe_all(
    settings: Settings,
    objects: Sequence[AnyResource],
    *,
    timeout: float,
    workers: int,
    identity: str = "",
    key: bytes = b"",
) -> list[Planned]:
    """What a run would do for each object, its provider's client bound to the store
    (``identity`` and the store's secret ``key``: its marks are then judged as the
    runner's would be). Up to ``workers`` observes are in flight at once, as a run's
    reconciles are (a plan spends its time waiting on the outside world); the plan keeps
    the objects' order."""
    registry = settings.kinds
    providers = {p.name: p for p in discover_providers()}
    clients: dict[str, ExternalClient] = {}
    work: list[tuple[AnyResource, Kind, str]] = []
    try:
        for obj in objects:
            kind: Kind | None = registry.get(obj.api_version, obj.kind)
            name = None if kind is None else registry.provider_of(kind)
            if kind is None or name is None or name not in providers:
                continue  # not a managed kind here: nothing a run would do for it
            if name not in clients:
                clients[name] = await providers[name].connect(settings.provider_config.get(name, {}))
                bind_store(clients[name], identity, key)
            work.append((obj, kind, name))
        slots = asyncio.Semaphore(workers)

        async def one(obj: AnyResource, kind: Kind, name: str) -> Planned:
            async with slots:
                try:
                    async with asyncio.timeout(timeout):
                        return await plan(obj, clients[name], kind)
                except TimeoutError:
                    return Planned(obj.key, "error", f"observe did not answer within {timeout:g} s")

        return list(await asyncio.gather(*(one(*item) for item in work)))
    finally:
        for external in clients.values():
            with contextlib.suppress(Exception):
                await external.close()


def _stops(planned: Planned) -> bool:
    """Whether an error is where a run would stop (not a failed observe)."""
    return isinstance(planned.step, InvalidPolicy | CreatePendingUnknown)


def _name(planned: Planned) -> str:
    key = planned.key
    return f"{key.kind} {printable(key.namespace)}/{printable(key.name)}"


def _data(planned: Planned) -> dict[str, str]:
    key = planned.key
    return {
        "action": planned.action,
        "kind": key.kind,
        "apiGroup": key.api_group,
        "namespace": key.namespace,
        "name": key.name,
        "detail": planned.detail,
    }


def _print(planned: Sequence[Planned]) -> None:
    rows = []
    for item in planned:
        first, *rest = (item.detail or "").splitlines() or [""]
        rows.append(
            [item.action, item.key.kind, printable(item.key.namespace), printable(item.key.name), first]
        )
        rows.extend(["", "", "", "", f"  {line}"] for line in rest)
    if rows:
        click.echo(table(["ACTION", "KIND", "NAMESPACE", "NAME", "DETAIL"], rows))
    counts = {action: sum(1 for p in planned if p.action == action) for action in ACTIONS}
    summary = (
        f"Plan: {counts['create']} to create, {counts['update']} to update, {counts['delete']} to delete, "
        f"{counts['adopt']} to adopt, {counts['orphan']} to orphan; {counts['nothing']} unchanged"
    )
    extra = [f"{counts['refuse']} not ours (left alone)"] if counts["refuse"] else []
    stops = sum(1 for p in planned if p.action == "error" and _stops(p))
    extra += [f"{counts['error'] - stops} could not be observed"] if counts["error"] - stops else []
    extra += [f"{stops} where a run stops"] if stops else []
    click.echo(summary + "".join(f", {e}" for e in extra) + ".")
