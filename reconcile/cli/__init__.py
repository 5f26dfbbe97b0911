"""The ``reconcile`` command line (click), on top of the runtime and the API.

Importing it registers every command; ``main()`` runs one and returns its exit code.
"""

from reconcile.cli import (
    applying,
    completing,
    editing,
    labelling,
    maintaining,
    orphaning,
    patching,
    planning,
    reading,
    running,
    waiting,
)
from reconcile.cli.main import cli, entry, main

__all__ = [
    "applying",
    "cli",
    "completing",
    "editing",
    "entry",
    "labelling",
    "main",
    "maintaining",
    "orphaning",
    "patching",
    "planning",
    "reading",
    "running",
    "waiting",
]
