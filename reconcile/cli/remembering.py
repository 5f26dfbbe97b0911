"""Each provider's config, remembered by the store it was applied to.

An ``apply`` that stored every document remembers, for each provider whose kinds it
applied, the config it applied them with (built by :mod:`reconcile.cli.configuring`
from ``-P``, the environment and ``--provider-config``; ``--root`` and ``--source-root``
are the command line's short forms of the files provider's ``roots`` and
``source_roots``): the store keeps it beside its log
(``Client.engine.remember``, as ``provider:NAME``). ``apply``, ``diff`` and ``plan`` take what
the store remembers for every key of a provider's config they were not given, and say
so; given a value that differs, they warn, and an ``apply`` that succeeds with it
remembers it instead.

Without this, ``diff -f examples/files/`` given no ``--root`` showed every path moving
(each manifest's folder is the default root), and ``apply`` refused each object with an
"immutable, delete it and apply it again" hint that would have deleted the live site.

A store applied to by an earlier release remembers no config; its File and Directory
objects still record the root their paths were confined to (``spec.root``), and those
roots are used until an ``apply`` remembers the files provider's config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import attrs
import click

from reconcile.cli.reading import list_all
from reconcile.cli.settings import Settings

if TYPE_CHECKING:
    from reconcile.api import Client
    from reconcile.api.bulk import Applied
    from reconcile.cli.declaring import Declared

__all__ = ["remember_applied", "remembered_roots", "with_remembered_config"]

#: The provider whose roots the command line's --root and --source-root give.
_FILES = "files"
#: The keys of the files provider's config that have a short form on the command line.
_SHORT_FORMS = {"roots": "--root", "source_roots": "--source-root"}
#: What a remembered provider config is named in the store.
_PREFIX = "provider:"


async def remembered_roots(client: Client) -> list[str]:
    """The roots the store's File and Directory objects were confined to, sorted (what
    a store applied to before the config was remembered knows of it)."""
    kinds = [kind for kind in client.kinds if client.kinds.provider_of(kind) == _FILES]
    if not kinds:
        return []
    objects = await list_all(client, kinds, None, None)
    return sorted({root for obj in objects if isinstance(root := getattr(obj.spec, "root", None), str)})


async def _remembered(settings: Settings) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """What the store remembers, by provider, and the same with the roots of an earlier
    release's store's objects for the files provider when it remembers none."""
    if not settings.store.exists():
        return {}, {}
    async with settings.client(read_only=True) as client:
        stored = {
            name.removeprefix(_PREFIX): dict(value)
            for name, value in (await client.engine.remembered()).items()
            if name.startswith(_PREFIX) and isinstance(value, Mapping)
        }
        known = dict(stored)
        if _FILES not in known and (roots := await remembered_roots(client)):
            known[_FILES] = {"roots": roots}
    return stored, known


def _is_folders(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _folders(value: object) -> list[str] | None:
    """A list of folders as a list (one folder, as ``-P files.roots=DIR`` gives it, as a
    list of one); None for anything else."""
    if isinstance(value, str):
        return [value]
    return value if _is_folders(value) else None


def _same(given: object, remembered: object) -> bool:
    """Equal values; lists of folders equal when they are the same folders (one folder
    the same as a list of it)."""
    given_folders, remembered_folders = _folders(given), _folders(remembered)
    if (
        given_folders is not None
        and remembered_folders is not None
        and (isinstance(given, list) or isinstance(remembered, list))
    ):
        real = [os.path.realpath(folder) for folder in given_folders]
        return real == [os.path.realpath(folder) for folder in remembered_folders]
    return given == remembered


def _shown(provider: str, key: str, value: object) -> str:
    """How a setting is named to the user: ``--root /srv/site``, ``s3.region "eu"``."""
    folders = _folders(value)
    if provider == _FILES and key in _SHORT_FORMS and folders is not None:
        return f"{_SHORT_FORMS[key]} {', '.join(folders)}"
    return f"{provider}.{key} {json.dumps(value)}"


def _another(provider: str, key: str) -> str:
    if provider == _FILES and key in _SHORT_FORMS:
        return _SHORT_FORMS[key].removeprefix("--").replace("-", " ")
    return f"{provider}.{key}"


async def with_remembered_config(settings: Settings) -> Settings:
    """``settings`` with, for each provider, the config keys the store remembers that
    were not given (said on stderr); a given value that differs is kept, with a warning.
    ``settings.remembered`` holds what the store remembered, for :func:`remember_applied`."""
    stored, known = await _remembered(settings)
    if not known:
        return settings
    where = settings.store.where
    config = {name: dict(value) for name, value in settings.provider_config.items()}
    for provider, remembered in sorted(known.items()):
        given = config.get(provider, {})
        for key, value in sorted(remembered.items()):
            shown = _shown(provider, key, value)
            if key in given:
                if not _same(given[key], value):
                    click.echo(
                        f"warning: the objects in {where} were applied with {shown}; "
                        f"this applies with another {_another(provider, key)}",
                        err=True,
                    )
                continue
            if provider not in stored and _is_folders(value) and len(value) > 1:
                # An earlier release's objects, applied with several roots.
                click.echo(
                    f"warning: the objects in {where} were applied with several roots "
                    f"({', '.join(value)}); give --root to say which a relative path means",
                    err=True,
                )
            click.echo(f"reconcile: using {shown}, which the stored objects were applied with", err=True)
            config[provider] = given = {**given, key: value}
    return attrs.evolve(settings, provider_config=config, remembered=stored)


async def remember_applied(
    client: Client, settings: Settings, declared: Sequence[Declared], results: Sequence[Applied]
) -> None:
    """After an apply that stored every document: have the store remember the config of
    each provider whose kinds it applied, where it differs from what it remembered."""
    stored = ("created", "configured", "unchanged")
    if any(result.outcome not in stored for result in results[: len(declared)]):
        return
    providers = {
        provider for d in declared if (provider := client.kinds.provider_of(d.admitted.kind)) is not None
    }
    for provider in sorted(providers):
        config = settings.provider_config.get(provider)
        if not config or config == settings.remembered.get(provider):
            continue
        try:
            json.dumps(config)
        except (TypeError, ValueError):
            continue  # a value JSON cannot hold (a YAML date): given each time, not remembered
        await client.engine.remember(_PREFIX + provider, dict(config))
