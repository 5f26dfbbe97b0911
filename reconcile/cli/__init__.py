"""The ``reconcile`` command line (click), on top of the runtime and the API.

``main()`` runs one command and returns its exit code. Each command's module is imported
when that command runs (see :mod:`reconcile.cli.commands`), so ``reconcile version``
starts without the runtime ``reconcile run`` needs.
"""

from reconcile.cli.main import cli, entry, main

__all__ = ["cli", "entry", "main"]
