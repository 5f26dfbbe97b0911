"""What the DNS server says, failing only what it is about, against BIND9: a change its
update-policy refuses, sent in one UPDATE message with many innocent ones, fails alone
(the message's changes are sent again one by one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dns_server import Bind
from test_dns import ByHand, _condition, by_hand, record_set, running, stored, token
from test_files_provider import until_async

from providers.dns.client import DnsClient
from reconcile import PermanentError, Runtime
from reconcile.testing import FakeClock

__all__ = ["by_hand", "running"]  # (fixtures, imported to be found)


class TestOneRefusedChange:
    """REFUSED for one change of a combined message fails that change only."""

    async def test_the_innocents_of_its_message_are_applied(
        self, tsig: Bind, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """29 creates and one of a name the update-policy refuses, in one message: the
        server REFUSES it; sent again one by one, the 29 are applied, and only the refused
        one fails (permanently, naming the policy)."""
        t = token()
        manifests = [record_set(f"ok{i}-{t}", "A", [f"192.0.2.{i + 1}"]) for i in range(29)]
        manifests.insert(11, record_set(f"bad-{t}.refused", "A", ["192.0.2.200"], label="bad"))
        objects = await stored(tmp_path, manifests)
        client = DnsClient(tsig.config(batch_window=0.5, batch_max=100))
        try:
            results = await asyncio.gather(*(client.create(o) for o in objects), return_exceptions=True)
        finally:
            await client.close()
        failed = {i: r for i, r in enumerate(results) if isinstance(r, BaseException)}
        assert list(failed) == [11], failed
        assert isinstance(failed[11], PermanentError)
        assert "REFUSED" in str(failed[11])
        assert "update-policy" in str(failed[11])
        assert client.statistics()["messages"] == 1 + 30  # the combined one, then each alone
        for i in range(29):
            assert await by_hand.records(f"ok{i}-{t}", "A") == [f"192.0.2.{i + 1}"]
        assert await by_hand.records(f"bad-{t}.refused", "A") == []

    async def test_through_the_runtime_the_innocents_converge(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """40 record sets and one refused, applied together: the 40 become Ready, the
        refused one says REFUSED in Synced, terminally."""
        t = token()
        manifests = [
            record_set(f"in{i}-{t}", "AAAA", [f"2001:db8::{i + 1:x}"], label=f"in{i}") for i in range(40)
        ]
        manifests.insert(20, record_set(f"x-{t}.refused", "AAAA", ["2001:db8::bad"], label="refused"))
        results = await running.client.apply_many(manifests)
        assert all(r.outcome == "created" for r in results)
        for i in range(40):
            await until_async(clock, _condition(running, f"in{i}", "Ready"))
        await until_async(clock, _condition(running, "refused", "Synced", "ReconcileError"))
        synced = (await running.client.get("recordset", "refused")).status.condition("Synced")
        assert synced is not None
        assert "REFUSED" in synced.message
        assert await by_hand.records(f"in7-{t}", "AAAA") == ["2001:db8::8"]
