"""``python -m reconcile``: the command line."""

from reconcile.cli import entry

entry()
