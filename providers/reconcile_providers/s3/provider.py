"""The s3 provider: its name, its kinds, and ``connect(config)`` (see
:mod:`reconcile_providers.s3.config` for the configuration and the AWS chain)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import reconcile
from reconcile_providers.s3.config import S3Config, check_chain
from reconcile_providers.s3.kinds import BUCKET
from reconcile_providers.s3.objects import OBJECT

__all__ = ["S3Provider"]


class S3Provider:
    """Buckets on any S3-compatible endpoint (``s3.reconcile.dev/v1``)."""

    name = "s3"

    @property
    def kinds(self) -> Sequence[reconcile.Kind]:
        """``Bucket`` and ``Object``."""
        return (BUCKET, OBJECT)

    def check_config(self, config: Mapping[str, Any]) -> None:
        """InvalidError naming each bad key of ``config``, without reading anything (what
        the command line checks before anything is opened; ``connect`` also checks the
        AWS chain's files)."""
        S3Config.from_mapping(config)

    async def connect(self, config: Mapping[str, Any]) -> reconcile.ExternalClient:
        """A client for the configured endpoint (checked: InvalidError naming a bad key,
        a profile no shared file holds, or a shared file that cannot be parsed)."""
        from reconcile_providers.s3.client import S3Client  # noqa: PLC0415 - listing kinds needs no client

        check_chain(S3Config.from_mapping(config))
        return S3Client(config)
