"""The roots a store was applied with, remembered by its objects.

Every File and Directory records the root its path was confined to (``spec.root``). So
``apply`` and ``diff`` given no ``--root`` do not fall back to each manifest's folder
when the store already holds such objects: they use the root those objects were applied
with, and say so. Given a ``--root`` that differs, they warn. Without this, ``diff -f
examples/files/`` showed every path moving, and ``apply`` refused each object with an
"immutable, delete it and apply it again" hint that would have deleted the live site.
"""

from __future__ import annotations

import os

import attrs
import click

from reconcile.cli.reading import list_all
from reconcile.cli.settings import Settings

__all__ = ["remembered_roots", "with_remembered_roots"]

_PROVIDER = "files"


async def remembered_roots(settings: Settings) -> list[str]:
    """The roots the store's File and Directory objects were confined to, sorted."""
    if not settings.store.exists():
        return []
    async with settings.client(read_only=True) as client:
        kinds = [kind for kind in client.kinds if client.kinds.provider_of(kind) == _PROVIDER]
        if not kinds:
            return []
        objects = await list_all(client, kinds, None, None)
    return sorted({root for obj in objects if isinstance(root := getattr(obj.spec, "root", None), str)})


def _real(roots: list[str]) -> list[str]:
    return sorted(os.path.realpath(root) for root in roots)


async def with_remembered_roots(settings: Settings) -> Settings:
    """``settings`` with the files provider's roots the store remembers when none were
    given (said on stderr), or as given, with a warning when they differ."""
    remembered = await remembered_roots(settings)
    if not remembered:
        return settings
    files = dict(settings.provider_config.get(_PROVIDER, {}))
    given = files.get("roots")
    shown = ", ".join(remembered)
    if given:
        if _real(given) != remembered:
            click.echo(
                f"warning: the objects in {settings.store.where} were applied with --root {shown}; "
                "this applies with another root",
                err=True,
            )
        return settings
    if len(remembered) > 1:
        click.echo(
            f"warning: the objects in {settings.store.where} were applied with several roots ({shown}); "
            "give --root to say which a relative path means",
            err=True,
        )
    click.echo(f"reconcile: using --root {shown}, which the stored objects were applied with", err=True)
    config = {**settings.provider_config, _PROVIDER: {**files, "roots": remembered}}
    return attrs.evolve(settings, provider_config=config)
