"""The files provider: its name, its kinds, and ``connect(config)``.

Config (``provider_config["files"]``, or ``reconcile --root DIR`` on the command line):

``roots``
    The folders this provider may write under (a list, or one path). At admission, a
    relative ``path`` resolves against the first; an absolute one must lie inside one.
    Without roots, admission uses the folder of the manifest file. A runner given roots
    also refuses (Synced=False) objects admitted under a root outside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import reconcile
from reconcile_providers.files.configuring import check_config
from reconcile_providers.files.kinds import KINDS

__all__ = ["FilesProvider"]


class FilesProvider:
    """Local files and directories (``files.reconcile.dev/v1``)."""

    name = "files"

    @property
    def kinds(self) -> Sequence[reconcile.Kind]:
        """``Directory`` and ``File``."""
        return KINDS

    def check_config(self, config: Mapping[str, Any]) -> None:
        """InvalidError naming each bad key of ``config`` (what the command line checks
        before anything is opened; ``connect`` checks the same)."""
        check_config(config)

    async def connect(self, config: Mapping[str, Any]) -> reconcile.ExternalClient:
        """A client confined to ``config["roots"]`` when given (checked: InvalidError
        naming a bad key)."""
        from reconcile_providers.files.client import FilesClient  # noqa: PLC0415 - listing kinds needs no client

        check_config(config)
        return FilesClient(config)
