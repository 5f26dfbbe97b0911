"""``patch``: change one object by a merge patch (RFC 7386, the default) or a JSON patch
(RFC 6902), as ``kubectl patch --type merge|json`` does.

Either patch applies to the object's document, the stored body ``get -o yaml`` shows
(``{"spec": {"size": 2}}``; ``[{"op": "replace", "path": "/spec/size", "value": 2}]``),
and what it changes is written on the version read, through admission
(:mod:`reconcile.cli.changing`). Strategic merge patches are Kubernetes' own (they know
each list's merge key from Go struct tags) and have no meaning here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from reconcile.api.merging import merge_patch
from reconcile.api.patching import json_patch
from reconcile.cli.changing import Target, change_object, field_manager_option, with_manager
from reconcile.cli.completing import complete_kinds, complete_names
from reconcile.cli.failing import BadInput
from reconcile.cli.main import cli, run_async
from reconcile.cli.naming import type_and_name
from reconcile.cli.settings import Settings

__all__ = ["PATCH_MANAGER", "parse_patch"]

#: The field manager of ``patch`` when none is given (kubectl's is ``kubectl-patch``).
PATCH_MANAGER = "reconcile-patch"

_EXAMPLES = {
    "merge": '{"spec": {"size": 2}, "metadata": {"labels": {"tier": "web"}}}',
    "json": '[{"op": "replace", "path": "/spec/size", "value": 2}]',
}


def parse_patch(text: str, patch_type: str, *, source: str = "-p") -> Any:
    """The patch in ``text`` (JSON, or YAML, which includes JSON), checked for its
    shape: a mapping for a merge patch, a list of operations for a JSON patch."""
    try:
        patch = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInput(f"{source}: not JSON or YAML ({' '.join(str(exc).split())})") from None
    if patch_type == "merge" and not isinstance(patch, dict):
        raise BadInput(f"{source}: a merge patch is a mapping, such as {_EXAMPLES['merge']}")
    if patch_type == "json" and not isinstance(patch, list):
        raise BadInput(f"{source}: a JSON patch is a list of operations, such as {_EXAMPLES['json']}")
    return patch


@cli.command(short_help="Change one object by a merge patch or a JSON patch.")
@click.argument("kind", shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-p", "--patch", "patch_text", help="The patch, in JSON (or YAML).")
@click.option(
    "--patch-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding the patch (instead of -p).",
)
@click.option(
    "--type",
    "patch_type",
    type=click.Choice(("merge", "json")),
    default="merge",
    show_default=True,
    help="merge: RFC 7386 merge patch; json: RFC 6902 JSON patch.",
)
@field_manager_option(PATCH_MANAGER)
@click.pass_obj
def patch(
    settings: Settings,
    *,
    kind: str,
    name: str | None,
    namespace: str,
    patch_text: str | None,
    patch_file: Path | None,
    patch_type: str,
    verb_manager: str | None,
) -> None:
    """Change one object (KIND NAME or KIND/NAME) by a merge patch or a JSON patch of
    its document: spec, labels and annotations, checked by admission, written on the
    version read (redone if the object changed meanwhile)."""
    settings = with_manager(settings, verb_manager, PATCH_MANAGER)
    found_kind, found_name = type_and_name(kind, name)
    if found_kind is None or found_name is None:
        raise BadInput("which object? give KIND NAME or KIND/NAME")
    if (patch_text is None) == (patch_file is None):
        raise BadInput(f"give the patch with -p (or --patch-file), such as -p '{_EXAMPLES[patch_type]}'")
    if patch_file is not None:
        try:
            patch_text = patch_file.read_text()
        except OSError as exc:
            raise BadInput(f"--patch-file: {patch_file}: cannot read ({exc.strerror})") from None
    assert patch_text is not None
    source = "-p" if patch_file is None else f"--patch-file {patch_file}"
    parsed = parse_patch(patch_text, patch_type, source=source)
    run_async(
        _patch(settings, found_kind, found_name, namespace=namespace, parsed=parsed, patch_type=patch_type)
    )


async def _patch(
    settings: Settings, kind: str, name: str, *, namespace: str, parsed: Any, patch_type: str
) -> None:
    async with settings.client() as client:
        target = Target(client.kinds.resolve(kind), name, namespace)
        if patch_type == "json":
            written = await change_object(client, target, lambda document: json_patch(document, parsed))
        else:
            written = await change_object(client, target, lambda document: merge_patch(document, parsed))
    click.echo(f"{target.label} patched" if written else f"{target.label} patched (no change)")
