"""What the DNS server says, or does not, failing only what it is about, against BIND9: a
change its update-policy refuses, sent in one UPDATE message with many innocent ones,
fails alone (the message's changes are sent again one by one); a server frozen with
SIGSTOP under a few hundred record sets is noticed at once, every waiting change fails
within its deadline naming the server, and all converge once it answers again."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dns_server import Bind, bind_server
from test_dns import ByHand, _condition, by_hand, record_set, running, stored, token
from test_files_provider import until_async

from reconcile import PermanentError, Runtime
from reconcile.testing import FakeClock
from reconcile_providers.dns import DnsProvider
from reconcile_providers.dns.client import DnsClient

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


async def _until(runtime: Runtime, holds: Callable[[list[Any]], bool], seconds: float) -> float:
    """Poll the RecordSets until ``holds(objects)``, within ``seconds`` (else fail saying
    what was last seen); how long it took."""
    started = time.monotonic()
    deadline = started + seconds
    while True:
        objects = (await runtime.client.list("recordset")).items
        if holds(objects):
            return time.monotonic() - started
        if time.monotonic() > deadline:
            synced = [o.status.condition("Synced") for o in objects]
            seen = sorted({(c.status.value, c.message[:120]) for c in synced if c is not None})[:5]
            pytest.fail(f"not within {seconds:g} s; conditions seen: {seen}")
        await asyncio.sleep(0.05)  # (a poll of the condition, not a wait for a result)


def _converged(generation: int) -> Callable[[list[Any]], bool]:
    def holds(objects: list[Any]) -> bool:
        return all(
            o.metadata.generation == generation
            and o.status.observed_generation == generation
            and (c := o.status.condition("Synced")) is not None
            and c.status.value == "True"
            for o in objects
        )

    return holds


class TestAFrozenServer:
    """A server that stops answering (SIGSTOP), noticed at once."""

    async def test_every_waiting_change_fails_within_its_deadline_naming_the_server(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """300 record sets converged on a named this test started; SIGSTOP, then a change
        to every one: each fails within twice the configured timeout of the change (the
        message ahead, and its own), Synced naming the server that stopped answering,
        which is logged once; after SIGCONT every one converges."""
        count, timeout = 300, 1.0
        caplog.set_level(logging.WARNING, logger="reconcile_providers.dns")
        with bind_server() as bind:
            monkeypatch.setenv("TSIG_SECRET", bind.secret)
            runtime = Runtime(
                tmp_path / "state.db",
                providers=[DnsProvider()],
                provider_config={"dns": bind.config(timeout=timeout)},
                poll_interval=3600,
                resync_period=None,
            )
            by_hand = ByHand(bind)
            async with runtime:
                await runtime.client.apply_many(
                    [
                        record_set(f"f{i}", "A", [f"192.0.2.{i % 250 + 1}"], label=f"f{i}")
                        for i in range(count)
                    ]
                )
                await _until(runtime, _converged(1), 120)
                os.kill(bind.pid, signal.SIGSTOP)
                try:
                    await runtime.client.apply_many(
                        [
                            record_set(f"f{i}", "A", [f"198.51.100.{i % 250 + 1}"], label=f"f{i}")
                            for i in range(count)
                        ]
                    )
                    server = f"DNS server {bind.address}:{bind.port} is unreachable: no answer in 1 s"

                    def all_failed(objects: list[Any]) -> bool:
                        return len(objects) == count and all(
                            (c := o.status.condition("Synced")) is not None
                            and c.status.value == "False"
                            and server in c.message
                            for o in objects
                        )

                    took = await _until(runtime, all_failed, 60)
                    assert took < 2 * timeout + 3.0, f"{took:.1f} s before every change had failed"
                    stopped = [r for r in caplog.records if "stopped answering" in r.getMessage()]
                    assert len(stopped) == 1, "noticed once, for the server"
                finally:
                    os.kill(bind.pid, signal.SIGCONT)
                await _until(runtime, _converged(2), 120)
            for i in (0, 149, 299):
                assert await by_hand.records(f"f{i}", "A") == [f"198.51.100.{i % 250 + 1}"]
