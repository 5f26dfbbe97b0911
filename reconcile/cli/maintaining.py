"""``providers``, ``explain``, ``verify`` and ``compact``: what is installed, what its
kinds' fields are, and care of the log."""

from __future__ import annotations

import difflib
import importlib.metadata
from typing import TYPE_CHECKING, Any

import attrs
import click

from reconcile.cli.completing import complete_kinds
from reconcile.cli.failing import BadInput, Failure, invalid_lines
from reconcile.cli.main import cli, isatty, run_async
from reconcile.cli.rendering import as_json, table
from reconcile.cli.settings import Settings
from reconcile.errors import InvalidError, StoreError
from reconcile.model import Kind, KindRegistry
from reconcile.model.fields import class_description, default_text, field_description, type_name
from reconcile.model.printing import printable
from reconcile.model.spelling import camel

if TYPE_CHECKING:
    from reconcile.store import StoreLocation

__all__: list[str] = []


@cli.command()
@click.option("-o", "--output", type=click.Choice(("table", "json")), default="table", show_default=True)
def providers(output: str) -> None:
    """The installed providers and the kinds they declare."""
    registry = KindRegistry.from_entry_points()
    rows: list[dict[str, Any]] = [
        {
            "provider": registry.provider_of(kind) or "",
            "kind": kind.kind,
            "apiVersion": kind.api_version,
            "names": sorted(
                kind.names() - {f"{n}.{kind.api_group}" for n in (kind.kind.lower(), kind.plural)}
            ),
            "deterministicIdentity": kind.deterministic_identity,
            "behaviour": kind.behaviour.value,
        }
        for kind in registry
    ]
    if output == "json":
        click.echo(as_json(rows))
        return
    header = ("PROVIDER", "KIND", "API VERSION", "NAMES", "IDENTITY")
    cells = [
        (
            r["provider"],
            r["kind"],
            r["apiVersion"],
            ",".join(r["names"]),
            "deterministic" if r["deterministicIdentity"] else "assigned",
        )
        for r in rows
    ]
    click.echo(table(header, cells))


@cli.command()
@click.option("-o", "--output", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.pass_obj
def version(settings: Settings, output: str) -> None:
    """The version of reconcile, the store's schema version, and the installed providers."""
    store = settings.store  # not opened: no event loop, no backend
    info: dict[str, Any] = {
        "reconcile": importlib.metadata.version("reconcile-engine"),
        "schema": store.schema_version,
        "providers": {},
    }
    if store.exists():
        info["database"] = {"path": store.where, "schema": _stored_schema(store)}
    registry = KindRegistry.from_entry_points()
    for kind in registry:
        info["providers"].setdefault(registry.provider_of(kind) or "", []).append(kind.kind)
    if output == "json":
        click.echo(as_json(info))
        return
    click.echo(
        f"reconcile {info['reconcile']} (distribution reconcile-engine), store schema {info['schema']}"
    )
    if "database" in info:
        click.echo(f"database {store.where}: schema {info['database']['schema']}")
    for name, kinds in sorted(info["providers"].items()):
        click.echo(f"provider {name}: {', '.join(sorted(kinds))}")


def _stored_schema(store: StoreLocation) -> int | str:
    """The schema version a store holds, read without writing."""
    try:
        return store.stored_schema()
    except StoreError:
        return "unreadable (not a reconcile store?)"


@cli.command()
@click.option(
    "--deep", is_flag=True, help="Also decode every event's body, not only each object's current one."
)
@click.pass_obj
def verify(settings: Settings, deep: bool) -> None:
    """Rebuild the current state from the log, compare it with the stored projection, and
    decode every current object (with --deep, every event)."""
    run_async(_verify(settings, deep=deep))


async def _verify(settings: Settings, *, deep: bool) -> None:
    async with settings.client(read_only=True) as client:
        report = await client.verify(deep=deep)
    click.echo(f"{report.events} events, {report.objects} objects")
    if not report.ok:
        raise Failure(*(f"mismatch: {difference}" for difference in report.differences))
    what = "every event decodes" if deep else "every object decodes"
    click.echo(f"ok: the projection matches the log; {what}")


@cli.command()
@click.option("--before", type=int, help="Drop history before this revision (default: all history).")
@click.option(
    "--vacuum",
    is_flag=True,
    help="Then shrink the file: give the freed space back to the filesystem (rewrites the database).",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation on a terminal.")
@click.pass_obj
def compact(settings: Settings, before: int | None, vacuum: bool, yes: bool) -> None:
    """Drop old history; every object's latest state is kept. On a terminal it says how
    many events it will drop and asks first (--yes: do not ask)."""
    if before is not None and before < 1:
        raise BadInput("--before: must be >= 1")
    run_async(_compact(settings, before, vacuum=vacuum, ask=not yes and isatty()))


async def _compact(settings: Settings, before: int | None, *, vacuum: bool, ask: bool) -> None:
    store = settings.store
    async with settings.client() as client:
        revision = await client.revision()
        horizon = revision + 1 if before is None else min(before, revision + 1)
        if ask:
            count = await client.maintenance.compactable(horizon)
            click.confirm(
                f"compact {store.where}: drop {count} events before revision {horizon} for good?",
                abort=True,
            )
        dropped = await client.compact(horizon)
        click.echo(f"dropped {dropped} events before revision {horizon}")
        if vacuum:
            size = store.size()
            await client.maintenance.vacuum()
            click.echo(f"vacuumed {store.where}: {size:,} -> {store.size():,} bytes")


def _default(field: attrs.Attribute[Any]) -> str:
    """The table's column: ``required`` or ``default: "0644"``."""
    value = default_text(field)
    return "required" if value is None else f"default: {value}"


def _field_row(field: attrs.Attribute[Any]) -> tuple[str, str, str, str]:
    return camel(field.name), type_name(field.type), _default(field), field_description(field)


@cli.command()
@click.argument("kind", shell_complete=complete_kinds)
@click.pass_obj
def explain(settings: Settings, kind: str) -> None:
    """The fields of a kind's spec and status (like kubectl explain); KIND.spec.FIELD
    explains one field."""
    registry = settings.kinds
    name, _, path = kind.partition(".spec.")
    try:
        found = registry.resolve(name if path else kind)
    except InvalidError as exc:
        raise BadInput(*invalid_lines(exc)) from None
    if path:
        click.echo(_explain_field(found, path))
        return
    lines = [
        f"KIND:      {found.kind}",
        f"VERSION:   {found.api_version}",
        f"PROVIDER:  {registry.provider_of(found) or '-'}",
        f"NAMES:     {', '.join(sorted(found.names()))}",
        f"IDENTITY:  {'deterministic' if found.deterministic_identity else 'assigned externally'}"
        + (f" ({', '.join(f'spec.{camel(f)}' for f in found.identity)})" if found.identity else ""),
        f"BEHAVIOUR: {found.behaviour.value} ({found.behaviour.promise})",
        f"IMMUTABLE: {', '.join(f'spec.{camel(f)}' for f in found.immutable) or '-'}",
        "",
        "DESCRIPTION:",
        *(f"  {line.strip()}" for line in class_description(found.spec_type).splitlines()),
    ]
    for title, cls in (("SPEC", found.spec_type), ("STATUS", found.status_type)):
        if not attrs.has(cls):
            continue
        rows = [_field_row(f) for f in attrs.fields(cls)]
        lines += [
            "",
            f"{title} FIELDS:",
            *(f"  {line}" for line in table(("FIELD", "TYPE", "", "DESCRIPTION"), rows).splitlines()),
        ]
    lines += _custom_lines(found)
    click.echo("\n".join(lines))


def _custom_lines(kind: Kind) -> list[str]:
    """What a kind adds to ``explain`` beyond its fields: its printer columns (what
    ``get`` shows), its admission chain, in the order it runs, and its versions."""
    lines: list[str] = []
    rows: list[tuple[str, ...]]
    if kind.printer_columns:
        rows = [
            (c.name.upper(), c.json_path, c.type, str(c.priority), c.description or "-")
            for c in kind.printer_columns
        ]
        header = ("COLUMN", "PATH", "TYPE", "PRIORITY", "DESCRIPTION")
        lines += ["", "PRINTER COLUMNS:", *(f"  {line}" for line in table(header, rows).splitlines())]
    if kind.hooks:
        rows = [
            (str(n), h.phase, printable(h.name), h.failure_policy.value, f"{h.timeout:g}s")
            for n, h in enumerate((*kind.mutating_hooks, *kind.validating_hooks), start=1)
        ]
        header = ("#", "PHASE", "HOOK", "FAILURE POLICY", "TIMEOUT")
        lines += ["", "ADMISSION HOOKS:", *(f"  {line}" for line in table(header, rows).splitlines())]
    if kind.versions:
        rows = [(kind.api_version, "yes", "yes", "no")]
        rows += [
            (kind.api_version_of(v), "yes" if v.served else "no", "no", "yes" if v.deprecated else "no")
            for v in kind.versions
        ]
        columns = ("VERSION", "SERVED", "STORAGE", "DEPRECATED")
        lines += ["", "VERSIONS:", *(f"  {line}" for line in table(columns, rows).splitlines())]
    return lines


def _explain_field(kind: Kind, path: str) -> str:
    """``explain File.spec.path``: one field's type, default, values and description."""
    fields = {camel(f.name): f for f in attrs.fields(kind.spec_type)} if attrs.has(kind.spec_type) else {}
    field = fields.get(path)
    if field is None:
        known = ", ".join(fields) or "none"
        hint = [camel(path)] if camel(path) in fields else difflib.get_close_matches(path, fields, n=1)
        also = f' (did you mean "{hint[0]}"?)' if hint else ""
        raise BadInput(f"{kind.kind}.spec has no field {path!r}{also} (its fields: {known})")
    name, type_, _, doc = _field_row(field)
    default = default_text(field) or "none (required)"
    notes = [
        n
        for n, on in (("immutable", field.name in kind.immutable), ("identity", field.name in kind.identity))
        if on
    ]
    return "\n".join(
        [
            f"KIND:     {kind.kind}",
            f"FIELD:    spec.{name} <{type_}>",
            f"DEFAULT:  {default}",
            *([f"NOTES:    {', '.join(notes)}"] if notes else []),
            "",
            "DESCRIPTION:",
            f"  {doc or '-'}",
        ]
    )
