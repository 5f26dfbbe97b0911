"""Delegations inside a zone against the BIND fixture: an NS record set below the apex is a
zone cut, whose NS RRset the zone's primary answers only as a referral and below which
everything is occluded. Its record set is read from the referral, its ownership mark
lives beside the cut (``<first label>.<prefix>.<rest>``), where it can be read; what
lies at or below a delegation is refused with an error that says so."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import dns.name
import dns.rdatatype
import dns.zone
import pytest
from dns_server import ZONE, Bind
from test_dns import ByHand, _condition, by_hand, record_set, running, stored, token
from test_files_provider import until_async

from reconcile import NotOwnedError, Owned, Runtime
from reconcile.model.external import bind_store
from reconcile.testing import FakeClock
from reconcile_providers.dns import RECORD_SET
from reconcile_providers.dns.client import DnsClient
from reconcile_providers.dns.marks import mark_name_of, signed_in_zone, signed_mark, subject_of
from reconcile_providers.dns.wire import OccludedError

__all__ = ["by_hand", "running"]  # (the fixtures, imported to be found)

IDENTITY = "0123456789abcdef"


@pytest.fixture
async def client(tsig: Bind) -> AsyncIterator[DnsClient]:
    """A dns client bound to a store (its identity and secret)."""
    ours = DnsClient(tsig.served_config())
    bind_store(ours, IDENTITY, b"k" * 32)
    yield ours
    await ours.close()


def delegation(name: str, *servers: str) -> dict[str, Any]:
    """An NS record set below the apex."""
    return record_set(name, "NS", list(servers or ("ns1.example.net.", "ns2.example.net.")))


class TestTheDelegationsRecordSet:
    """An NS record set below the apex: created, observed, repaired and deleted."""

    async def test_created_observed_up_to_date_and_its_mark_readable(
        self, client: DnsClient, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """Created, it is observed (from the referral) as up to date and ours; its mark
        is at ``<label>._reconcile.<zone>``, answered authoritatively (not occluded)."""
        name = f"sub-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        created = await client.create(obj)
        assert created.observation.observed["records"] == ["ns1.example.net.", "ns2.example.net."]
        seen = await client.observe(obj)
        assert (seen.exists, seen.up_to_date, seen.owner) == (True, True, obj.metadata.uid)
        assert await by_hand.records(name, "NS") == ["ns1.example.net.", "ns2.example.net."]
        marks = await by_hand.records(f"{name}._reconcile", "TXT")  # (ByHand reads AA answers only)
        assert len(marks) == 1
        assert f"type=NS,uid={obj.metadata.uid}" in marks[0]
        assert await by_hand.records(f"_reconcile.{name}", "TXT") == []  # nothing under the cut

    async def test_drift_is_seen_and_repaired(
        self, client: DnsClient, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """A server changed by hand: observe says which, the update puts it back."""
        name = f"drift-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        await client.create(obj)
        await by_hand.update(lambda m: m.replace(f"{name}.{ZONE}", 300, "NS", "ns9.example.net."))
        seen = await client.observe(obj)
        assert (seen.up_to_date, seen.owner) == (False, obj.metadata.uid)
        assert "-ns9.example.net." in seen.diff
        assert "+ns1.example.net." in seen.diff
        repaired = await client.update(obj, seen)
        assert repaired.up_to_date
        assert await by_hand.records(name, "NS") == ["ns1.example.net.", "ns2.example.net."]

    async def test_deleted_with_its_mark(self, client: DnsClient, tmp_path: Path, by_hand: ByHand) -> None:
        """Delete reads the mark beside the cut and removes the records and the mark."""
        name = f"gone-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        await client.create(obj)
        assert not (await client.delete(obj)).exists
        assert await by_hand.records(name, "NS") == []
        assert await by_hand.records(f"{name}._reconcile", "TXT") == []
        assert not (await client.observe(obj)).exists

    async def test_the_apex_ns_keeps_its_mark_at_the_prefix(self) -> None:
        """Only a delegation's mark moves: the apex's NS (no cut) and other types keep
        ``<prefix>.<name>``; a delegation two labels deep keeps its parent's labels."""
        assert mark_name_of("_reconcile", ZONE, "@", "NS").to_text() == f"_reconcile.{ZONE}"
        assert mark_name_of("_reconcile", ZONE, "www", "A").to_text() == f"_reconcile.www.{ZONE}"
        assert mark_name_of("_reconcile", ZONE, "a.b", "NS").to_text() == f"a._reconcile.b.{ZONE}"


class TestThroughTheRuntime:
    """A delegation declared, kept and deleted by the engine."""

    async def test_ready_repaired_and_deleted(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """Ready; changed by hand, put back at the next poll (DriftDetected); deleted with
        its mark."""
        name = f"engine-{token()}"
        await running.apply(delegation(name) | {"metadata": {"name": "sub"}})
        await until_async(clock, _condition(running, "sub", "Ready"))
        await by_hand.update(lambda m: m.replace(f"{name}.{ZONE}", 300, "NS", "ns9.example.net."))
        clock.advance(70)

        async def repaired() -> bool:
            history = await running.client.history("recordset", "sub")
            return await by_hand.records(name, "NS") == ["ns1.example.net.", "ns2.example.net."] and any(
                e.type == "UpdateSucceeded" for e in history
            )

        await until_async(clock, repaired)
        drift = [e for e in await running.client.history("recordset", "sub") if e.type == "DriftDetected"]
        assert "-ns9.example.net." in drift[-1].data["message"]
        await running.client.delete("recordset", "sub")

        async def gone() -> bool:
            return not (await running.client.list("recordset")).items

        await until_async(clock, gone)
        assert await by_hand.records(name, "NS") == []
        assert await by_hand.records(f"{name}._reconcile", "TXT") == []

    async def test_a_delegation_marked_under_its_cut_is_adopted(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """A delegation whose mark an earlier version wrote under its cut (unreadable):
        NotOwned; adopted, it gets a mark beside the cut and is kept."""
        name = f"old-{token()}"
        old = "heritage=reconcile,owner=x,type=NS,uid=y,mac=" + "0" * 32
        await by_hand.update(
            lambda m: (
                m.add(f"{name}.{ZONE}", 300, "NS", "ns1.example.net."),
                m.add(f"_reconcile.{name}.{ZONE}", 300, "TXT", f'"{old}"'),
            )
        )
        await running.apply(delegation(name) | {"metadata": {"name": "old"}})
        await until_async(clock, _condition(running, "old", "Synced", "NotOwned"))
        await running.client.patch(
            "recordset", "old", {"metadata": {"annotations": {"reconcile.dev/adopt": "true"}}}
        )
        await until_async(clock, _condition(running, "old", "Ready"))
        assert await by_hand.records(name, "NS") == ["ns1.example.net.", "ns2.example.net."]
        [mark] = await by_hand.records(f"{name}._reconcile", "TXT")
        assert "type=NS" in mark


class TestNotOurs:
    """A delegation whose mark this store did not sign is not ours."""

    async def test_a_forged_mark_beside_the_cut_is_not_ours(
        self, client: DnsClient, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """Somebody's delegation with a mark naming this store and the object's uid, with
        a made-up MAC: NotOwned, never deleted."""
        name = f"forged-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        uid = obj.metadata.uid
        text = f"heritage=reconcile,owner={IDENTITY},type=NS,uid={uid},mac={'0' * 32}"
        await by_hand.update(
            lambda m: (
                m.add(f"{name}.{ZONE}", 300, "NS", "ns.elsewhere.example."),
                m.add(f"{name}._reconcile.{ZONE}", 300, "TXT", f'"{text}"'),
            )
        )
        seen = await client.observe(obj)
        assert seen.owner == f"{uid} without this store's signature"
        with pytest.raises(NotOwnedError):
            await client.delete(obj)
        assert await by_hand.records(name, "NS") == ["ns.elsewhere.example."]

    async def test_our_signed_line_under_the_cut_is_not_where_the_mark_lives(
        self, client: DnsClient, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """The signed line of this store for the delegation, written under the cut (where
        marks lived before, occluded): observe never reads it (not ours), and orphans do
        not list it."""
        name = f"under-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        subject = subject_of(ZONE, name)
        line = signed_mark(b"k" * 32, IDENTITY, subject, "NS", str(obj.metadata.uid))
        await by_hand.update(
            lambda m: (
                m.add(f"{name}.{ZONE}", 300, "NS", "ns1.example.net."),
                m.add(f"_reconcile.{name}.{ZONE}", 300, "TXT", f'"{line}"'),
            )
        )
        assert (await client.observe(obj)).owner is None
        listed = await client.list_owned(RECORD_SET)
        assert not [o for o in listed if name in o.external]
        copy = dns.zone.from_text(
            f"$ORIGIN {ZONE}\n@ 300 IN SOA a. b. 1 2 3 4 5\n@ 300 IN NS ns.\n"
            f'_reconcile.{name} 300 IN TXT "{line}"\n',
            relativize=False,
        )
        assert list(signed_in_zone(b"k" * 32, copy, ZONE, "_reconcile")) == []


class TestOrphans:
    """``list_owned`` and ``delete_owned`` find a delegation's mark beside the cut."""

    async def test_listed_and_deleted(self, client: DnsClient, tmp_path: Path, by_hand: ByHand) -> None:
        """The delegation is listed with its name and type, and deleted with its mark."""
        name = f"orphan-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        await client.create(obj)
        listed = [o for o in await client.list_owned(RECORD_SET) if name in o.external]
        assert [(o.uid, o.external) for o in listed] == [(str(obj.metadata.uid), f"{name}.{ZONE} NS")]
        await client.delete_owned(RECORD_SET, listed[0])
        assert await by_hand.records(name, "NS") == []
        assert await by_hand.records(f"{name}._reconcile", "TXT") == []

    async def test_a_listing_moved_under_the_cut_deletes_nothing(
        self, client: DnsClient, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """A listing whose mark is not this store's: NotOwned, nothing sent."""
        name = f"made-up-{token()}"
        [obj] = await stored(tmp_path, [delegation(name)])
        await client.create(obj)
        made_up = Owned(
            str(uuid.uuid4()),
            f"{name}.{ZONE} NS",
            {"zone": ZONE, "name": f"{name}.{ZONE}", "type": "NS", "mark": "heritage=reconcile,type=NS"},
        )
        with pytest.raises(NotOwnedError):
            await client.delete_owned(RECORD_SET, made_up)
        assert await by_hand.records(name, "NS") != []


class TestOccluded:
    """What lies at or below a delegation is refused with an error saying where."""

    async def test_a_record_set_below_a_delegation_is_occluded(
        self, client: DnsClient, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """Observe of an A record set below a delegation (written there by hand): the
        error names the delegation; a create there writes nothing and says the same."""
        t = token()
        cut = f"cut-{t}"
        await by_hand.update(lambda m: m.add(f"{cut}.{ZONE}", 300, "NS", "ns1.example.net."))
        await by_hand.update(lambda m: m.add(f"x.{cut}.{ZONE}", 300, "A", "192.0.2.1"))
        below, at = await stored(
            tmp_path,
            [
                record_set(f"x.{cut}", "A", ["192.0.2.1"], label="below"),
                record_set(cut, "A", ["192.0.2.2"], label="at"),
            ],
        )
        occluded = f"x.{cut}.{ZONE} is below the delegation at {cut}.{ZONE}: occluded"
        with pytest.raises(OccludedError, match=occluded.replace(".", r"\.")):
            await client.observe(below)
        with pytest.raises(
            OccludedError, match=f"{cut}.{ZONE} is at the delegation at {cut}.{ZONE}: occluded"
        ):
            await client.create(at)
        zone = by_hand.zone()
        assert [r.rdtype for r in zone.nodes[dns.name.from_text(cut, None)]] == [dns.rdatatype.NS]
        assert dns.name.from_text(f"_reconcile.{cut}", None) not in zone.nodes
