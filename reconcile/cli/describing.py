"""``describe``, ``history`` and ``watch``: one object's story, and the log as it grows."""

from __future__ import annotations

from collections.abc import Sequence

import click

from reconcile.cli.completing import complete_kinds, complete_names
from reconcile.cli.failing import BadInput
from reconcile.cli.main import cli, run_async
from reconcile.cli.naming import type_and_name
from reconcile.cli.reading import now_of
from reconcile.cli.rendering import (
    age,
    as_json,
    as_json_line,
    as_yaml,
    event_data,
    event_detail,
    labels_text,
    object_data,
    one_line,
    table,
    who,
)
from reconcile.cli.settings import Settings
from reconcile.model import Event
from reconcile.model.printing import printable

__all__ = ["render_history"]


@cli.command()
@click.argument("kind", shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--events", "event_count", type=int, default=10, show_default=True, help="Recent events shown.")
@click.pass_obj
def describe(settings: Settings, kind: str, name: str | None, namespace: str, event_count: int) -> None:
    """Spec, status, conditions and recent events of one object (KIND NAME or KIND/NAME)."""
    run_async(_describe(settings, *_one(kind, name), namespace, event_count))


def _one(kind: str, name: str | None) -> tuple[str, str]:
    found_kind, found_name = type_and_name(kind, name)
    if found_kind is None or found_name is None:
        raise BadInput("which object? give KIND NAME or KIND/NAME")
    return found_kind, found_name


def _indent(text: str, by: int = 2) -> str:
    return "\n".join(" " * by + line for line in text.splitlines())


async def _describe(settings: Settings, kind: str, name: str, namespace: str, event_count: int) -> None:
    async with settings.client(read_only=True) as client:
        obj = await client.get(kind, name, namespace=namespace)
        history = await client.history(kind, name, namespace=namespace)
        meta, data = obj.metadata, object_data(client, obj)
        now = now_of(client)
        lines = [
            f"Name:              {printable(meta.name)}",
            f"Namespace:         {printable(meta.namespace)}",
            f"Kind:              {obj.kind}",
            f"API Version:       {obj.api_version}",
            f"UID:               {meta.uid}",
            f"Generation:        {meta.generation}",
            f"Resource Version:  {meta.resource_version}",
            f"Created:           {data['metadata']['creationTimestamp']}",
        ]
        if meta.deletion_timestamp is not None:
            lines.append(f"Deleting since:    {data['metadata']['deletionTimestamp']}")
        lines += [
            f"Labels:            {labels_text(meta.labels)}",
            f"Finalizers:        {', '.join(meta.finalizers) or '<none>'}",
            "Annotations:" + ("       <none>" if not meta.annotations else ""),
            *(f"  {k}: {v}" for k, v in sorted(meta.annotations.items())),
            "Spec:",
            _indent(as_yaml(data["spec"]).rstrip()),
            "Status:",
            f"  Observed Generation:  {getattr(obj.status, 'observed_generation', '<none>')}",
        ]
        extra = {
            k: v for k, v in (data["status"] or {}).items() if k not in ("observedGeneration", "conditions")
        }
        if any(extra.values()):
            lines.append(_indent(as_yaml(extra).rstrip()))
        conditions = getattr(obj.status, "conditions", ())
        lines.append("Conditions:" + ("  <none>" if not conditions else ""))
        if conditions:
            rows = [
                (
                    c.type,
                    c.status.value,
                    c.reason,
                    age(c.last_transition_time, now),
                    one_line(c.message) if c.message else "",
                )
                for c in conditions
            ]
            lines.append(_indent(table(("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"), rows)))
        lines.append("Events:" + ("  <none>" if not history else ""))
        recent = history[-event_count:] if event_count > 0 else []
        rows = [
            (str(e.revision), age(e.time, now), e.type, who(e), _first_line(event_detail(e))) for e in recent
        ]
        if rows:
            lines.append(_indent(table(("REVISION", "AGE", "TYPE", "BY", "DETAIL"), rows)))
        click.echo("\n".join(lines))


def _first_line(text: str, width: int = 100) -> str:
    first = text.splitlines()[0] if text else ""
    more = "  (...)" if "\n" in text else ""
    return (first if len(first) <= width else first[: width - 3] + "...") + more


@cli.command()
@click.argument("kind", shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option(
    "-o", "--output", type=click.Choice(("table", "yaml", "json")), default="table", show_default=True
)
@click.pass_obj
def history(settings: Settings, kind: str, name: str | None, namespace: str, output: str) -> None:
    """The event log of one object (KIND NAME or KIND/NAME): who changed what, when, and
    what was done about it."""
    run_async(_history(settings, *_one(kind, name), namespace, output))


def render_history(events: Sequence[Event]) -> str:
    """One row per event; a multi-line detail (a diff) continues, indented, below."""
    header = ("REVISION", "TIME", "TYPE", "BY", "DETAIL")
    rows = []
    continuation: dict[int, list[str]] = {}
    for index, event in enumerate(events):
        detail = event_detail(event).splitlines() or [""]
        time = event.time.strftime("%Y-%m-%d %H:%M:%S")
        rows.append((str(event.revision), time, event.type, who(event), detail[0]))
        if len(detail) > 1:
            continuation[index] = detail[1:]
    lines = table(header, rows).splitlines()
    out = [lines[0]]
    if rows:
        offset = lines[0].index("DETAIL")
        for index, line in enumerate(lines[1:]):
            out.append(line)
            out.extend(" " * offset + extra for extra in continuation.get(index, ()))
    return "\n".join(out)


async def _history(settings: Settings, kind: str, name: str, namespace: str, output: str) -> None:
    async with settings.client(read_only=True) as client:
        events = await client.history(kind, name, namespace=namespace)
        if output == "json":
            click.echo(as_json([event_data(e) for e in events]))
        elif output == "yaml":
            click.echo(as_yaml([event_data(e) for e in events]).rstrip())
        else:
            click.echo(render_history(events))


@cli.command()
@click.argument("kind", required=False)
@click.option("-n", "--namespace", help="Only this namespace (default: all).")
@click.option(
    "--since",
    type=int,
    default=None,
    help="Replay the events after this revision (0: all of them; default: only new events).",
)
@click.option("-o", "--output", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.pass_obj
def watch(
    settings: Settings, kind: str | None, namespace: str | None, since: int | None, output: str
) -> None:
    """Print events as they are appended, until interrupted (JSON lines with -o json)."""
    if since is not None and since < 0:
        raise BadInput("--since: must be >= 0")
    try:
        run_async(_watch(settings, kind, namespace, since, output))
    except KeyboardInterrupt:
        return


async def _watch(
    settings: Settings, kind: str | None, namespace: str | None, since: int | None, output: str
) -> None:
    async with settings.client(read_only=True) as client:
        start = await client.revision() if since is None else since
        async for event in client.watch(kind, namespace=namespace, since=start):
            if not isinstance(event, Event):
                continue
            if output == "json":
                click.echo(as_json_line(event_data(event)))
            else:
                key = event.key
                detail = _first_line(event_detail(event))
                when = event.time.strftime("%H:%M:%S")
                where = f"{key.kind}/{printable(key.namespace)}/{printable(key.name)}"
                line = f"{event.revision:>8}  {when}  {where}  {event.type}  {who(event)}  {detail}"
                click.echo(line.rstrip())
