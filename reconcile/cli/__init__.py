"""The ``reconcile`` command line (click), on top of the runtime and the API.

Importing it registers every command; ``main()`` runs one and returns its exit code.
"""

from reconcile.cli import applying, maintaining, orphaning, planning, reading, running
from reconcile.cli.main import cli, entry, main

__all__ = ["applying", "cli", "entry", "main", "maintaining", "orphaning", "planning", "reading", "running"]
