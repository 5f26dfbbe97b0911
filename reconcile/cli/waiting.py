"""``wait``: block until objects reach a condition, or are gone, as ``kubectl wait``.

``--for=condition=Ready`` (``=False``, ``=Unknown``: another value; names and values
compare ignoring case, as kubectl's do) or ``--for=delete``. Each object is read, then
watched from the revision read (a watch of the log: no polling, and no change missed
between the read and the watch), until its condition holds or ``--timeout`` (one
deadline for every object) runs out. A condition counts only for the object's current
spec: one stamped with an older generation (``observed_generation``, the condition's or
else the status's) is what the controller said about a spec that is gone, so waiting for
``Ready`` after an ``apply`` waits for the new spec to be Ready, not the old one.

Exit 0 when every object met it (``file.files.reconcile.dev/index condition met``,
``... deleted``); 1 on timeout, naming the object and what was last seen ("timed out
waiting for the condition on file.files.reconcile.dev/index: Ready is False
(ReconcileError: ...)"), or when an object waited for a condition is not there or is
deleted meanwhile. ``--timeout 0`` looks once and does not wait.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

import attrs
import click

from reconcile.api import Client
from reconcile.cli.changing import Target, targets
from reconcile.cli.completing import complete_kinds, complete_names
from reconcile.cli.failing import BadInput, Failure
from reconcile.cli.main import cli, run_async
from reconcile.cli.rendering import one_line
from reconcile.cli.settings import Settings
from reconcile.errors import ExpiredError, NotFoundError
from reconcile.model import EventType
from reconcile.model.printing import printable
from reconcile.model.resource import AnyResource

__all__ = ["Gone", "HasCondition", "parse_duration", "parse_for"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in ``30``, ``30s``, ``1.5m``, ``1m30s``, ``500ms`` or ``2h`` (kubectl's
    durations, and plain seconds as the other commands take)."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        parts = _DURATION.findall(value)
        if not parts or "".join(number + unit for number, unit in parts) != value:
            raise ValueError(f"{text!r} is not a duration such as 30s, 2m or 1m30s") from None
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds < 0:
        raise ValueError(f"{text!r}: must not be negative")
    return seconds


def _timeout(_context: click.Context, _parameter: click.Parameter, value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@attrs.frozen
class HasCondition:
    """``--for=condition=TYPE[=VALUE]``."""

    type: str
    value: str = "True"

    def __str__(self) -> str:
        return f"{self.type}={self.value}"

    def met(self, obj: AnyResource) -> bool:
        """Whether the object has the condition, with the value, for its current spec."""
        return self.seen(obj) is None

    def seen(self, obj: AnyResource) -> str | None:
        """None when met; else what was seen instead, for the timeout's message."""
        status = obj.status
        found = next(
            (c for c in getattr(status, "conditions", ()) if c.type.lower() == self.type.lower()), None
        )
        if found is None:
            return f"it has no {self.type} condition yet"
        generation = obj.metadata.generation
        stamped = found.observed_generation or getattr(status, "observed_generation", 0)
        reason = (
            f" ({found.reason}: {one_line(found.message)})"
            if found.message
            else (f" ({found.reason})" if found.reason else "")
        )
        if found.status.value.lower() != self.value.lower():
            return f"{found.type} is {found.status.value}{reason}"
        if stamped and generation is not None and stamped < generation:
            return (
                f"{found.type} is {found.status.value} for generation {stamped}, "
                f"but the spec is at generation {generation} (not observed yet)"
            )
        return None


@attrs.frozen
class Gone:
    """``--for=delete``."""

    def __str__(self) -> str:
        return "delete"


Wanted = HasCondition | Gone


def parse_for(text: str) -> Wanted:
    """``condition=TYPE[=VALUE]`` or ``delete``."""
    if text.lower() == "delete":
        return Gone()
    what, _, rest = text.partition("=")
    if what.lower() != "condition" or not rest:
        raise BadInput(
            f"--for: {printable(text)}: expected condition=NAME[=VALUE] (such as condition=Ready) or delete"
        )
    name, _, value = rest.partition("=")
    if not name:
        raise BadInput(f"--for: {printable(text)}: no condition name (such as condition=Ready)")
    return HasCondition(name, value or "True")


def _still_there(obj: AnyResource) -> str:
    meta = obj.metadata
    if meta.deletion_timestamp is None:
        return "it is still there, and nothing asked to delete it"
    waiting = ", ".join(meta.finalizers) or "nothing"
    since = meta.deletion_timestamp.isoformat().replace("+00:00", "Z")
    return f"it is still there, deleting since {since}, waiting on finalizers: {waiting} (is a runner up?)"


@attrs.define
class _Seen:
    """The object as last seen (for the timeout's message)."""

    obj: AnyResource


async def wait_one(client: Client, target: Target, wanted: Wanted, deadline: float) -> str:
    """What to print once the object met ``wanted``; Failure on timeout, or when the
    object whose condition it waits for is not there."""
    try:
        seen = _Seen(await client.get(target.kind, target.name, namespace=target.namespace))
    except NotFoundError:
        if isinstance(wanted, Gone):
            return f"{target.label} deleted"
        raise Failure(
            f"{target.label} not found in namespace {printable(target.namespace, quoted=True)}"
        ) from None
    while True:
        if isinstance(wanted, HasCondition) and wanted.met(seen.obj):
            return f"{target.label} condition met"
        try:
            async with asyncio.timeout_at(deadline):
                gone = await _watch(client, target, wanted, seen)
        except TimeoutError:
            what = _still_there(seen.obj) if isinstance(wanted, Gone) else wanted.seen(seen.obj)
            raise Failure(f"timed out waiting for the condition on {target.label}: {what}") from None
        except ExpiredError:
            # The log was compacted past where the watch started: read again, go on.
            try:
                seen.obj = await client.get(target.kind, target.name, namespace=target.namespace)
            except NotFoundError:
                gone = True
            else:
                continue
        if not gone:
            return f"{target.label} condition met"
        if isinstance(wanted, Gone):
            return f"{target.label} deleted"
        raise Failure(f"{target.label} was deleted while waiting for the condition {wanted}")


async def _watch(client: Client, target: Target, wanted: Wanted, seen: _Seen) -> bool:
    """Watch the object from the version seen until it meets the condition (False) or
    is deleted (True), keeping ``seen`` up to date."""
    since = seen.obj.metadata.resource_version or 0
    async for event in client.watch(target.kind, namespace=target.namespace, since=since):
        if event.key.name != target.name:
            continue
        if event.type == EventType.DELETED:
            return True
        if event.object is None:
            continue
        seen.obj = event.object
        if isinstance(wanted, HasCondition) and wanted.met(event.object):
            return False
    raise Failure(f"the watch of {target.label} ended")  # pragma: no cover - a watch is endless


@cli.command(short_help="Wait until objects have a condition, or are deleted.")
@click.argument("kind", shell_complete=complete_kinds)
@click.argument("names", nargs=-1, shell_complete=complete_names)
@click.option(
    "--for",
    "for_",
    required=True,
    help="condition=NAME[=VALUE] (VALUE defaults to True), or delete.",
)
@click.option(
    "--timeout",
    default="30s",
    show_default=True,
    callback=_timeout,
    help="How long to wait for all of them (30s, 2m, 1m30s, or seconds; 0: look once).",
)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-l", "--selector", help="The objects of KIND whose labels match (app=web,tier!=db).")
@click.option("--all", "everything", is_flag=True, help="Every object of KIND in the namespace.")
@click.pass_obj
def wait(
    settings: Settings,
    *,
    kind: str,
    names: tuple[str, ...],
    for_: str,
    timeout: float,
    namespace: str,
    selector: str | None,
    everything: bool,
) -> None:
    """Wait until objects (KIND NAME... or KIND/NAME..., KIND -l SELECTOR, KIND --all)
    have a condition (--for=condition=Ready) or are deleted (--for=delete)."""
    wanted = parse_for(for_)
    if everything and selector is not None:
        raise BadInput("give -l SELECTOR or --all, not both")
    selector = "" if everything else selector
    run_async(
        _wait(settings, kind, names, wanted=wanted, timeout=timeout, namespace=namespace, selector=selector)
    )


async def _wait(
    settings: Settings,
    kind: str,
    names: Sequence[str],
    *,
    wanted: Wanted,
    timeout: float,
    namespace: str,
    selector: str | None,
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    async with settings.client(read_only=True) as client:
        found = await targets(client, kind, names, namespace=namespace, selector=selector)
        if not found:
            raise Failure("no matching resources found")
        for target in found:
            click.echo(await wait_one(client, target, wanted, deadline))
