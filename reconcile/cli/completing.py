"""Shell completion: ``reconcile completion bash|zsh|fish`` prints the script (click's,
for the ``reconcile`` console script) that a shell's startup file sources, as
``kubectl completion`` does; besides commands and options, it completes kind names and
object names.

Completion runs without the commands' callbacks, so it reads what it needs itself: the
kinds from the installed providers, the names from the store ``--db`` (or
``RECONCILE_DB``) names, read-only and without creating it, and without opening it as the
commands do (:class:`~reconcile.store.StoreLocation`: no event loop on each TAB).
"""

from __future__ import annotations

import os

import click
from click.shell_completion import CompletionItem, get_completion_class

from reconcile.cli.main import cli
from reconcile.errors import ReconcileError, StoreError
from reconcile.model import KindRegistry
from reconcile.store import locate_store

__all__ = ["SHELLS", "complete_kinds", "complete_names"]

SHELLS = ("bash", "zsh", "fish")
#: The variable click's scripts set to ask the program for completions (``_{PROG}_COMPLETE``).
_COMPLETE_VARIABLE = "_RECONCILE_COMPLETE"


def complete_kinds(
    _context: click.Context, _parameter: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The names of the installed kinds that start with what was typed."""
    registry = KindRegistry.from_entry_points()
    names = sorted(
        {name for kind in registry for name in (kind.kind.lower(), kind.plural, *kind.short_names)}
    )
    return [CompletionItem(name) for name in names if name.startswith(incomplete.lower())]


def complete_names(
    context: click.Context, _parameter: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The names of the stored objects of the kind typed before, starting with what was typed."""
    kind_name = context.params.get("kind")
    if not isinstance(kind_name, str) or "/" in kind_name:
        return []
    try:
        kind = KindRegistry.from_entry_points().resolve(kind_name)
    except ReconcileError:
        return []
    root = context.find_root()
    db = root.params.get("db") or os.environ.get("RECONCILE_DB") or "reconcile.db"
    namespace = context.params.get("namespace") or "default"
    try:
        store = locate_store(str(db))
        if not store.exists():
            return []
        names = store.live_names(kind.api_group, kind.kind, namespace, prefix=incomplete)
    except StoreError:
        return []
    return [CompletionItem(name) for name in names]


@cli.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish. Load it from the shell's
    startup file: `source <(reconcile completion bash)` in ~/.bashrc, `source <(reconcile
    completion zsh)` in ~/.zshrc, `reconcile completion fish | source` in
    ~/.config/fish/config.fish."""
    completer = get_completion_class(shell)
    assert completer is not None  # click registers all three
    click.echo(completer(cli, {}, "reconcile", _COMPLETE_VARIABLE).source())
