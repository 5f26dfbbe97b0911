"""``get``: reading objects from the store as tables or documents, never writing it.

``describe``, ``history`` and ``watch`` are in :mod:`reconcile.cli.describing`.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import click

from reconcile.api import Client
from reconcile.cli.completing import complete_kinds, complete_names
from reconcile.cli.failing import BadInput
from reconcile.cli.main import cli, colour, run_async
from reconcile.cli.naming import type_and_name
from reconcile.cli.rendering import (
    age,
    as_json,
    as_yaml,
    column_cells,
    column_widths,
    document_data,
    jsonpath,
    labels_text,
    object_data,
    printer_columns,
    qualified,
    readiness,
    table,
)
from reconcile.cli.settings import Settings
from reconcile.model import Event, Kind, LabelSelector, api_group_of
from reconcile.model.cells import message_cell
from reconcile.model.printing import printable
from reconcile.model.resource import AnyResource

__all__ = ["OUTPUTS"]

OUTPUTS = ("table", "wide", "yaml", "json", "name")


def _output(_context: click.Context, _parameter: click.Parameter, value: str) -> str:
    if value in OUTPUTS or value.startswith("jsonpath="):
        return value
    raise click.BadParameter(f"{value!r} is not one of {', '.join(OUTPUTS)}, or jsonpath=EXPRESSION")


_OUTPUT = click.option(
    "-o",
    "--output",
    default="table",
    show_default=True,
    callback=_output,
    help=f"Output format: {', '.join(OUTPUTS)}, or jsonpath={{.items[*].metadata.name}}.",
)


def now_of(client: Client) -> datetime.datetime:
    """The client clock's now, as an aware UTC datetime (what ages are counted from)."""
    return datetime.datetime.fromtimestamp(client.clock(), datetime.UTC)


@attrs.frozen
class TableOptions:
    """How ``get`` draws its table: ``-o wide``, ``--show-labels``, ``--no-headers``."""

    wide: bool = False
    labels: bool = False
    headers: bool = True
    colour: bool = False


def render_objects(
    client: Client,
    objects: Sequence[AnyResource],
    output: str,
    *,
    namespaces: bool,
    kinds: bool,
    options: TableOptions = TableOptions(),
    min_widths: Sequence[int] = (),
) -> str:
    """Objects as a table (READY, SYNCED, REASON, AGE; with ``wide`` the generations and
    the Synced message too; each column at least ``min_widths`` wide), YAML, JSON or names."""
    if output == "json":
        return as_json(
            {"apiVersion": "v1", "kind": "List", "items": [document_data(client, o) for o in objects]}
        )
    if output == "yaml":
        return as_yaml([document_data(client, o) for o in objects], many=True).rstrip()
    if output == "name":
        return "\n".join(qualified(o.kind, api_group_of(o.api_version), o.metadata.name) for o in objects)
    header, rows = table_rows(client, objects, namespaces=namespaces, kinds=kinds, options=options)
    drawn = table(header, rows, min_widths)
    if options.colour:
        drawn = _coloured(drawn)
    return drawn if options.headers else "\n".join(drawn.splitlines()[1:])


def table_rows(
    client: Client, objects: Sequence[AnyResource], *, namespaces: bool, kinds: bool, options: TableOptions
) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of ``get``'s table, not yet aligned. A table of one kind
    shows the kind's printer columns after NAME (those of a priority above 0 with
    ``wide``), as kubectl shows a CRD's additionalPrinterColumns."""
    now = now_of(client)
    columns = () if kinds else printer_columns(client, objects, wide=options.wide)
    header = [*(["NAMESPACE"] if namespaces else []), *(["KIND"] if kinds else []), "NAME"]
    header += [column.name.upper() for column in columns]
    header += ["READY", "SYNCED", "REASON", "AGE"]
    header += ["GENERATION", "OBSERVED", "MESSAGE"] if options.wide else []
    header += ["LABELS"] if options.labels else []
    rows = []
    for obj in objects:
        ready, synced, reason = readiness(obj)
        row = [*([printable(obj.metadata.namespace)] if namespaces else []), *([obj.kind] if kinds else [])]
        row.append(printable(obj.metadata.name))
        if columns:
            row += column_cells(columns, object_data(client, obj), now)
        row += [
            ready,
            synced,
            reason,
            age(obj.metadata.creation_timestamp, now),
        ]
        if options.wide:
            row += [
                str(obj.metadata.generation),
                str(getattr(obj.status, "observed_generation", "")),
                _message(obj),
            ]
        if options.labels:
            row.append(labels_text(obj.metadata.labels))
        rows.append(row)
    return header, rows


_STATES = {"True": "green", "False": "red", "Unknown": "yellow", "Updating": "yellow"}


def _coloured(drawn: str) -> str:
    """READY and SYNCED values coloured (after alignment, so the columns stay straight)."""
    lines = drawn.splitlines()
    if not lines:
        return drawn
    header = lines[0]
    spans = [(header.index(title), len(title)) for title in ("READY", "SYNCED") if title in header]
    coloured = [header]
    for row in lines[1:]:
        text = row
        for start, _ in sorted(spans, reverse=True):  # right to left: earlier offsets stay valid
            end = text.find(" ", start)
            end = len(text) if end < 0 else end
            word = text[start:end]
            if word in _STATES:
                text = text[:start] + click.style(word, fg=_STATES[word]) + text[end:]
        coloured.append(text)
    return "\n".join(coloured)


def _jsonpath(data: object, output: str) -> str:
    try:
        return jsonpath(data, output.removeprefix("jsonpath="))
    except ValueError as exc:
        raise BadInput(f"-o {exc}") from None


def _message(obj: AnyResource) -> str:
    condition = obj.status.condition("Synced") if hasattr(obj.status, "condition") else None
    return message_cell(condition.message) if condition is not None and condition.message else ""


def sort_objects(client: Client, objects: Sequence[AnyResource], field: str) -> list[AnyResource]:
    """Objects ordered by a field of their stored body, ``.metadata.name`` style (kubectl's
    ``--sort-by`` without JSONPath's brackets); objects lacking it go last."""
    path = [part for part in field.strip("{}").split(".") if part]
    if not path:
        raise BadInput(f"--sort-by: {field!r} names no field; try .metadata.name")

    def value(obj: AnyResource) -> tuple[bool, str]:
        current: Any = object_data(client, obj)
        for part in path:
            current = current.get(part) if isinstance(current, dict) else None
        return current is None, "" if current is None else (
            f"{current:020}" if isinstance(current, int) else str(current)
        )

    return sorted(objects, key=value)


async def list_all(
    client: Client,
    kinds: Sequence[Kind],
    namespace: str | None,
    selector: str | None,
    *,
    freeze: bool = False,
) -> list[AnyResource]:
    """Every object of these kinds, page by page. ``freeze``: each page moved out of the
    collector's way as it comes (see :func:`_kept_out_of_the_collector`)."""
    found: list[AnyResource] = []
    for kind in kinds:
        token = None
        while True:
            page = await client.list(
                kind, namespace=namespace, label_selector=selector, limit=1000, continue_=token
            )
            found.extend(page.items)
            if freeze:
                gc.freeze()
            token = page.continue_
            if not token:
                break
    return found


@contextlib.contextmanager
def _kept_out_of_the_collector() -> Iterator[bool]:
    """For ``get``: what it lists lives until it is shown, and every collection walked
    all of it again (``reconcile get files`` of 100,000 spent most of its time so); each
    page goes into the collector's permanent generation as it comes (what it yields:
    whether to), and back at the end (so nothing stays frozen in a process that goes
    on). Not where something else froze objects already (a Runtime in the same
    process): the end would thaw them too. The runtime's tuning
    (``reconcile.runtime.collecting``) is not loaded here: ``get`` starts without it."""
    if gc.get_freeze_count():
        yield False
        return
    gc.collect()  # (nothing that is garbage already is frozen)
    try:
        yield True
    finally:
        gc.unfreeze()


@cli.command()
@click.argument("kind", required=False, shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@_OUTPUT
@click.option("-l", "--selector", help="Label selector (app=web,tier!=db).")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace.")
@click.option("--no-headers", is_flag=True, help="Leave out the table's header line.")
@click.option("--show-labels", is_flag=True, help="A LABELS column.")
@click.option(
    "--sort-by", help="Order by a field of the stored object, such as .metadata.name or .spec.path."
)
@click.option("-w", "--watch", "follow", is_flag=True, help="After the table, a row per change until Ctrl-C.")
@click.option(
    "--api-version",
    help="Show the objects in this served version of their kind (group/version, or the version: v1alpha1).",
)
@click.pass_obj
def get(
    settings: Settings,
    *,
    kind: str | None,
    name: str | None,
    output: str,
    selector: str | None,
    namespace: str,
    all_namespaces: bool,
    no_headers: bool,
    show_labels: bool,
    sort_by: str | None,
    follow: bool,
    api_version: str | None,
) -> None:
    """List objects (every kind when KIND is omitted), or show one (KIND NAME or KIND/NAME)."""
    kind, name = type_and_name(kind, name)
    namespace_or_all = None if all_namespaces else namespace
    options = TableOptions(wide=output == "wide", labels=show_labels, headers=not no_headers, colour=colour())
    listing = Listing(
        "table" if output == "wide" else output, selector, namespace_or_all, sort_by, options, api_version
    )
    if follow and (name is not None or listing.output != "table"):
        raise BadInput("-w: watches a table of a kind (or of every kind), not one object or another output")
    if api_version is not None and (kind is None or follow):
        raise BadInput("--api-version: shows objects of one KIND, without -w")
    try:
        run_async(_get(settings, kind=kind, name=name, listing=listing, follow=follow))
    except KeyboardInterrupt:
        return  # -w ends with Ctrl-C


@attrs.frozen
class Listing:
    """What ``get`` lists and how it shows it."""

    output: str
    selector: str | None
    namespace: str | None
    sort_by: str | None
    options: TableOptions
    #: The version to show objects in (None: their storage version).
    api_version: str | None = None


def in_version(client: Client, objects: Sequence[AnyResource], api_version: str | None) -> list[AnyResource]:
    """``objects`` in ``api_version`` (``get --api-version``), with a ``warning:`` line
    once when that version is deprecated; an unknown or unserved one is refused (exit 2)."""
    if api_version is None:
        return list(objects)
    converted, said = [], None
    if not objects:  # (still refused when unknown: the flag is checked, not the data)
        return []
    for obj in objects:
        shown, warning = client.decoder.at_version(obj, api_version)
        converted.append(shown)
        said = said or warning
    if said is not None:
        click.echo(f"warning: {said}", err=True)
    return converted


async def _get(
    settings: Settings, *, kind: str | None, name: str | None, listing: Listing, follow: bool = False
) -> None:
    async with settings.client(read_only=True) as client:
        since = await client.revision()
        with _kept_out_of_the_collector() as freeze:
            shown = await _show(client, kind=kind, name=name, listing=listing, freeze=freeze)
        if follow:
            await _follow(client, kind, since, listing, shown)


async def _follow(
    client: Client, kind: str | None, since: int, listing: Listing, shown: Sequence[AnyResource]
) -> None:
    """``get -w``: a row (no header) per change of a matching object, until interrupted,
    lined up with the table drawn before it (a row drawn alone would take its own widths:
    a short name shifted every column after it left of its header)."""
    wanted = LabelSelector.parse(listing.selector)
    rows = attrs.evolve(listing.options, headers=False)
    resolved = None if kind is None else client.kinds.resolve(kind)
    everywhere, kinds = listing.namespace is None, kind is None
    header, drawn = table_rows(client, shown, namespaces=everywhere, kinds=kinds, options=rows)
    widths = column_widths([header, *drawn])
    async for event in client.watch(resolved, namespace=listing.namespace, since=since):
        if not isinstance(event, Event) or event.object is None:
            continue
        if not wanted.matches(event.object.metadata.labels):
            continue
        row = render_objects(
            client,
            [event.object],
            "table",
            namespaces=everywhere,
            kinds=kinds,
            options=rows,
            min_widths=widths,
        )
        click.echo(row, color=rows.colour or None)


async def _show(
    client: Client, *, kind: str | None, name: str | None, listing: Listing, freeze: bool = False
) -> Sequence[AnyResource]:
    """Print what ``get`` lists; return the objects of the table drawn (none otherwise)."""
    output, selector, namespace = listing.output, listing.selector, listing.namespace
    if listing.api_version is not None and kind is not None:
        resolved = client.kinds.resolve(kind)
        wanted = listing.api_version
        client.kinds.lookup_version(
            wanted if "/" in wanted else f"{resolved.api_group}/{wanted}", resolved.kind
        )
    if name is not None:
        assert kind is not None
        obj = await client.get(kind, name, namespace=namespace or "default")
        (obj,) = in_version(client, [obj], listing.api_version)
        if output.startswith("jsonpath="):
            click.echo(_jsonpath(object_data(client, obj), output))
        elif output == "json":
            click.echo(as_json(document_data(client, obj)))
        elif output == "yaml":
            click.echo(as_yaml(document_data(client, obj)).rstrip())
        else:
            click.echo(
                render_objects(client, [obj], output, namespaces=False, kinds=False, options=listing.options),
                color=listing.options.colour or None,
            )
        return ()
    kinds = list(client.kinds) if kind is None else [client.kinds.resolve(kind)]
    objects = in_version(
        client, await list_all(client, kinds, namespace, selector, freeze=freeze), listing.api_version
    )
    if kind is None:
        skipped = await client.unknown_kinds()
        if skipped:
            listed = ", ".join(f"{name} ({count})" for name, count in skipped)
            click.echo(f"skipped objects of kinds no installed provider declares: {listed}", err=True)
    if not objects and output in ("table", "name"):
        where = "any namespace" if namespace is None else f"namespace {printable(namespace, quoted=True)}"
        click.echo(f"No resources found in {where}.", err=True)
        return ()
    if listing.sort_by:
        objects = sort_objects(client, objects, listing.sort_by)
    if output.startswith("jsonpath="):
        items = [object_data(client, o) for o in objects]
        click.echo(_jsonpath({"apiVersion": "v1", "kind": "List", "items": items}, output))
        return ()
    click.echo(
        render_objects(
            client,
            objects,
            output,
            namespaces=namespace is None,
            kinds=kind is None,
            options=listing.options,
        ),
        color=listing.options.colour or None,  # click strips colour off a terminal otherwise
    )
    return objects
