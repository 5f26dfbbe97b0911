"""``label`` and ``annotate``: set or remove an object's labels and annotations, with
kubectl's arguments and rules.

``reconcile label file/index tier=web app-`` sets ``tier`` and removes ``app``. A key
that already has another value is not changed without ``--overwrite`` (kubectl's "'tier'
already has a value (db), and --overwrite is false"); setting the value it already has
changes nothing and is no error, so a script may run the same line twice. Removing a key
that is not there says so and goes on. Keys and values are checked by admission, as in
a manifest. Each object is changed on the version read (:mod:`reconcile.cli.changing`):
a change made meanwhile is read and the command's change made again on it, unless
``--resource-version`` pins the version (then it is a conflict, exit 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import click

from reconcile.cli.changing import Target, change_object, field_manager_option, targets, with_manager
from reconcile.cli.completing import complete_kinds
from reconcile.cli.failing import BadInput
from reconcile.cli.main import cli, run_async
from reconcile.cli.settings import Settings
from reconcile.model.printing import printable

__all__ = ["MetadataChange", "parse_changes"]


@attrs.frozen
class MetadataChange:
    """What ``label`` or ``annotate`` was asked: keys to set, keys to remove."""

    field: str  # "labels" or "annotations"
    set: Mapping[str, str]
    remove: tuple[str, ...]
    overwrite: bool

    @property
    def noun(self) -> str:
        """``label`` or ``annotation``."""
        return self.field.removesuffix("s")

    def refusals(self, current: Mapping[str, Any]) -> list[str]:
        """Why the change may not be made to these labels (annotations): each value it
        would replace without ``overwrite``."""
        if self.overwrite:
            return []
        return [
            f"{printable(key, quoted=True)} already has a value ({printable(current[key])}), "
            "and --overwrite is false"
            for key, value in self.set.items()
            if key in current and current[key] != value
        ]

    def apply(self, document: dict[str, Any]) -> dict[str, Any]:
        """The document with the change made; BadInput for a value that would be
        replaced without ``overwrite``."""
        current: dict[str, Any] = dict(document["metadata"].get(self.field) or {})
        refused = self.refusals(current)
        if refused:
            raise BadInput(*refused)
        for key in self.remove:
            if key not in current:
                click.echo(f"{self.noun} {printable(key, quoted=True)} not found.", err=True)
            current.pop(key, None)
        current.update(self.set)
        document["metadata"][self.field] = current
        return document


def parse_changes(tokens: Sequence[str], field: str, *, overwrite: bool) -> MetadataChange:
    """``KEY=VALUE`` (set) and ``KEY-`` (remove) arguments."""
    noun = field.removesuffix("s")
    values: dict[str, str] = {}
    removed: list[str] = []
    for token in tokens:
        if "=" in token:
            key, _, value = token.partition("=")
            if not key:
                raise BadInput(f"invalid {noun} spec: {printable(token)} (expected KEY=VALUE or KEY-)")
            values[key] = value
        elif token.endswith("-") and len(token) > 1:
            removed.append(token[:-1])
        else:
            raise BadInput(f"invalid {noun} spec: {printable(token)} (expected KEY=VALUE or KEY-)")
    both = sorted(set(values) & set(removed))
    if both:
        raise BadInput(
            f"can not both modify and remove {noun} {printable(both[0], quoted=True)} in one command"
        )
    return MetadataChange(field, values, tuple(removed), overwrite)


def _is_change(token: str) -> bool:
    # An object name is a DNS-1123 name: it has no "=" and never ends with "-".
    return "=" in token or token.endswith("-")


def _split(arguments: Sequence[str]) -> tuple[list[str], list[str]]:
    names = [token for token in arguments if not _is_change(token)]
    given = [token for token in arguments if _is_change(token)]
    first_change = next((i for i, token in enumerate(arguments) if _is_change(token)), len(arguments))
    if any(not _is_change(token) for token in arguments[first_change:]):
        raise BadInput("give the objects first, then the changes: KIND NAME... KEY=VALUE... KEY-...")
    return names, given


def _command(field: str, past: str, manager: str) -> Any:
    noun = field.removesuffix("s")

    @click.argument("kind", shell_complete=complete_kinds)
    @click.argument("arguments", nargs=-1, metavar="[NAME]... KEY=VALUE... KEY-...")
    @click.option("-n", "--namespace", default="default", show_default=True)
    @click.option("--overwrite", is_flag=True, help=f"Allow changing the value of an existing {noun}.")
    @click.option("-l", "--selector", help="The objects of KIND whose labels match (app=web,tier!=db).")
    @click.option("--all", "everything", is_flag=True, help="Every object of KIND in the namespace.")
    @click.option(
        "--resource-version",
        type=int,
        help="Change the object only if it is at this version (one object only).",
    )
    @field_manager_option(manager)
    @click.pass_obj
    def command(
        settings: Settings,
        *,
        kind: str,
        arguments: tuple[str, ...],
        namespace: str,
        overwrite: bool,
        selector: str | None,
        everything: bool,
        resource_version: int | None,
        verb_manager: str | None,
    ) -> None:
        settings = with_manager(settings, verb_manager, manager)
        names, given = _split(arguments)
        if not given:
            raise BadInput(f"no {noun}s to change: give KEY=VALUE to set, KEY- to remove")
        if everything and selector is not None:
            raise BadInput("give -l SELECTOR or --all, not both")
        change = parse_changes(given, field, overwrite=overwrite)
        run_async(
            _change(
                settings,
                kind,
                names,
                change,
                namespace=namespace,
                selector="" if everything else selector,
                resource_version=resource_version,
                past=past,
            )
        )

    return command


async def _change(
    settings: Settings,
    kind: str,
    names: Sequence[str],
    change: MetadataChange,
    *,
    namespace: str,
    selector: str | None,
    resource_version: int | None,
    past: str,
) -> None:
    async with settings.client() as client:
        found: list[Target] = await targets(client, kind, names, namespace=namespace, selector=selector)
        if resource_version is not None and len(found) != 1:
            raise BadInput("--resource-version: one object only")
        if not found:
            click.echo(f"No resources found in namespace {printable(namespace, quoted=True)}.", err=True)
        # Every object is looked at before the first is changed, so that a refusal (or
        # one that is not there) leaves all of them as they were; a change made by others
        # meanwhile is checked again as each is written.
        refused = []
        for target in found:
            obj = await client.get(target.kind, target.name, namespace=target.namespace)
            current = getattr(obj.metadata, change.field)
            refused += [
                f"{target.label}: {line}" if len(found) > 1 else line for line in change.refusals(current)
            ]
        if refused:
            raise BadInput(*refused)
        for target in found:
            written = await change_object(client, target, change.apply, resource_version=resource_version)
            click.echo(f"{target.label} {past}" if written else f"{target.label} not {past}")


label = cli.command(
    name="label",
    short_help="Set or remove labels of objects (KEY=VALUE, KEY-).",
    help="Set (KEY=VALUE) or remove (KEY-) labels of objects: KIND NAME... (or KIND/NAME...), "
    "KIND -l SELECTOR or KIND --all. Changing an existing value needs --overwrite.",
)(_command("labels", "labeled", "reconcile-label"))
annotate = cli.command(
    name="annotate",
    short_help="Set or remove annotations of objects (KEY=VALUE, KEY-).",
    help="Set (KEY=VALUE) or remove (KEY-) annotations of objects: KIND NAME... (or KIND/NAME...), "
    "KIND -l SELECTOR or KIND --all. Changing an existing value needs --overwrite.",
)(_command("annotations", "annotated", "reconcile-annotate"))
