"""Which module holds each command, so that a command's module is imported only when that
command runs.

``reconcile version`` should not pay for the runtime, the controller and admission that
``run`` and ``apply`` need: importing every command module up front made the CLI start
in half a second. Click's documented lazy-loading pattern: the group knows each command
by name and by where it lives (``"module:attribute"``); ``list_commands`` answers from
the map, ``get_command`` imports the module of the one command asked for. ``--help``
imports them all (it shows each command's short help, which lives in its docstring).

A new command: write it with ``@cli.command()`` in its module as before, and add one line
to :data:`COMMANDS` (a test checks that every entry loads the command of its name).

Other packages add commands through the ``reconcile.commands`` entry-point group (the
same ``module:attribute`` form, as Flask's ``flask.commands``): ``reconcile serve`` comes
so from :mod:`reconcile.http`, the CLI's sibling, which the CLI does not import. A
command of the CLI's own keeps its name against a plugin's.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import click

__all__ = ["COMMANDS", "COMMANDS_GROUP", "LazyGroup", "plugin_commands"]

#: The entry-point group other packages add commands through.
COMMANDS_GROUP = "reconcile.commands"

COMMANDS: Mapping[str, str] = {
    "adopt": "reconcile.cli.applying:adopt",
    "annotate": "reconcile.cli.labelling:annotate",
    "apply": "reconcile.cli.applying:apply",
    "compact": "reconcile.cli.maintaining:compact",
    "completion": "reconcile.cli.completing:completion",
    "delete": "reconcile.cli.applying:delete",
    "describe": "reconcile.cli.describing:describe",
    "diff": "reconcile.cli.applying:diff",
    "edit": "reconcile.cli.editing:edit",
    "explain": "reconcile.cli.maintaining:explain",
    "get": "reconcile.cli.reading:get",
    "history": "reconcile.cli.describing:history",
    "label": "reconcile.cli.labelling:label",
    "migrate": "reconcile.cli.migrating:migrate",
    "migrate-storage": "reconcile.cli.converting:migrate_storage",
    "orphans": "reconcile.cli.orphaning:orphans",
    "patch": "reconcile.cli.patching:patch",
    "plan": "reconcile.cli.planning:plan_command",
    "providers": "reconcile.cli.maintaining:providers",
    "run": "reconcile.cli.running:run",
    "status": "reconcile.cli.sharing:status",
    "verify": "reconcile.cli.maintaining:verify",
    "version": "reconcile.cli.maintaining:version",
    "wait": "reconcile.cli.waiting:wait",
    "watch": "reconcile.cli.describing:watch",
}
"""Every command of ``reconcile``: its name, and the ``module:attribute`` of its
:class:`click.Command`."""


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use, from a name -> location
    map (commands added the usual way, ``@group.command()``, are served too)."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = {**plugin_commands(), **dict(lazy_commands or {})}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, without importing any."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module the first time it is asked for."""
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, name: str) -> None:
        module, _, attribute = self.lazy_commands[name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a wrong map entry
            message = f"{self.lazy_commands[name]} is not a click command"
            raise TypeError(message)
        # The module registered it already (``@cli.command()``); this covers one that
        # builds its command without the decorator.
        self.commands.setdefault(name, command)


def plugin_commands(group: str = COMMANDS_GROUP) -> dict[str, str]:
    """The commands installed packages add: name -> ``module:attribute``."""
    return {entry.name: entry.value for entry in metadata.entry_points(group=group)}
