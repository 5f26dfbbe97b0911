"""The dns provider: its name, its kind, and ``connect(config)`` (see
:mod:`reconcile_providers.dns.config` for the configuration)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import reconcile
from reconcile_providers.dns.records import RECORD_SET

__all__ = ["DnsProvider"]


class DnsProvider:
    """Record sets on authoritative servers, through RFC 2136 updates (``dns.reconcile.dev/v1``)."""

    name = "dns"

    @property
    def kinds(self) -> Sequence[reconcile.Kind]:
        """``RecordSet``."""
        return (RECORD_SET,)

    def check_config(self, config: Mapping[str, Any]) -> None:
        """InvalidError naming each unknown key of ``config`` and an inline secret, without
        reading a secret (what the command line checks before anything is opened;
        ``connect`` checks the whole config and reads the secrets)."""
        from reconcile_providers.dns.config import check_keys  # noqa: PLC0415 - as connect's client: not for listing kinds

        check_keys(config)

    async def connect(self, config: Mapping[str, Any]) -> reconcile.ExternalClient:
        """A client for the configured servers (checked: InvalidError naming a bad key)."""
        from reconcile_providers.dns.client import DnsClient  # noqa: PLC0415 - listing kinds needs no dnspython client

        return DnsClient(config)
