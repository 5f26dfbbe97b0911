"""Ownership marks that cannot be forged, against the BIND fixture: nothing is written
inside the ownership namespace (refused at admission with the field path, and by the
client at run time), and only a mark signed with the store's secret makes a record set
ours, so a mark somebody typed (through a manifest, or with nsupdate), copied, or wrote
before marks were signed takes nothing over."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import attrs
import pytest
from dns_server import ZONE, Bind
from test_dns import DEADLINE, ByHand, by_hand, record_set, stored, token
from test_files_provider import until_async

from reconcile import InvalidError, KindRegistry, PermanentError, Runtime, connect
from reconcile.model.external import bind_store
from reconcile.testing import FakeClock
from reconcile_providers.dns import RECORD_SET, DnsProvider
from reconcile_providers.dns.client import DnsClient

__all__ = ["by_hand"]  # (the fixture, imported to be found)


def _synced(runtime: Runtime, name: str, *texts: str) -> Any:
    """Whether the object's Synced condition holds every one of ``texts``."""

    async def holds() -> bool:
        synced = (await runtime.client.get("recordset", name)).status.condition("Synced")
        return synced is not None and all(text in synced.message for text in texts)

    return holds


class TestTheOwnershipNamespace:
    """No record set is written where the marks live."""

    @pytest.mark.parametrize(
        "name",
        ["_reconcile.victim", "_RECONCILE.Victim", "_reconcile.victim.example.test.", "x._reconcile.victim"],
    )
    async def test_refused_at_apply_with_the_field_path(self, tmp_path: Path, name: str) -> None:
        """A RecordSet named inside ``_reconcile``, in any spelling: spec.name and why,
        nothing stored."""
        forged = record_set(name, "TXT", ["heritage=reconcile,owner=0,type=A,uid=1"], label="forged")
        async with connect(tmp_path / "a.db", kinds=KindRegistry([RECORD_SET])) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(forged)
            assert await client.revision() == 0
        [error] = caught.value.errors
        assert error.path == "spec.name"
        assert "inside the ownership namespace (_reconcile)" in error.message

    async def test_the_configured_prefix_is_refused_at_apply(self, tsig: Bind, tmp_path: Path) -> None:
        """With the provider config at hand, its ``owner_prefix`` is the namespace refused."""
        config = {"dns": tsig.config(owner_prefix="_own")}
        async with connect(tmp_path / "a.db", provider_config=config) as client:
            with pytest.raises(InvalidError, match=r"spec.name: .*inside the ownership namespace \(_own\)"):
                await client.apply(record_set("_own.victim", "TXT", ["x"], label="forged"))
            assert await client.revision() == 0
            await client.apply(record_set("_reconcile-not.victim", "TXT", ["x"], label="fine"))

    @pytest.mark.parametrize(
        ("option", "value"), [("owner_prefix", "a.b"), ("owner_prefix", ""), ("owner_id", "x,uid=1")]
    )
    def test_a_prefix_or_owner_that_would_break_the_marks_is_refused(
        self, tsig: Bind, option: str, value: str
    ) -> None:
        """An owner_prefix that is not one label, or an owner_id holding a mark's field
        separators: the config's error names the key."""
        with pytest.raises(InvalidError, match=f"dns.{option}"):
            DnsClient(tsig.config(**{option: value}))

    async def test_the_client_refuses_to_write_there(
        self, tsig: Bind, tmp_path: Path, by_hand: ByHand
    ) -> None:
        """Create, update, delete and adopt of a record set inside the namespace (an object
        stored before admission refused it): PermanentError, nothing sent."""
        t = token()
        [obj] = await stored(tmp_path, [record_set(f"v-{t}", "TXT", ["forged"], label="forged")])
        inside = attrs.evolve(obj, spec=attrs.evolve(obj.spec, name=f"_reconcile.v-{t}"))
        client = DnsClient(tsig.config())
        try:
            for call in (
                client.create(inside),
                client.update(inside, await client.observe(inside)),
                client.delete(inside),
                client.adopt(inside),
            ):
                with pytest.raises(PermanentError, match=r"inside the ownership namespace \(_reconcile\)"):
                    await call
            assert client.statistics()["messages"] == 0
        finally:
            await client.close()
        assert await by_hand.records(f"_reconcile.v-{t}", "TXT") == []


class TestForgedMarks:
    """A mark is ours only when this store signed it."""

    async def test_a_forged_mark_takes_nothing_over(
        self, tsig: Bind, tmp_path: Path, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """Issue 26's scenario: somebody else's ``victim`` A record; a RecordSet for it
        (NotOwned) and a RecordSet of type TXT at ``<prefix>.victim`` holding
        ``heritage=reconcile,owner=<store id>,type=A,uid=<its uid>``, both stored (under a
        prefix the apply could not check): the forged one fails at run time, writing
        nothing; the same mark written by hand, with or without a made-up MAC, takes
        nothing over either: NotOwned, the records untouched, left on delete."""
        t = token()
        victim = f"victim-{t}"
        fqdn = f"{victim}.{ZONE}"
        await by_hand.update(lambda m: m.add(fqdn, 300, "A", "203.0.113.5"))
        db = tmp_path / "state.db"
        async with connect(db, kinds=KindRegistry([RECORD_SET])) as client:
            identity = await client.engine.store_identity()
            taker = await client.apply(record_set(victim, "A", ["192.0.2.66"], label="taker"))
            uid = taker.metadata.uid
            forged_text = f"heritage=reconcile,owner={identity},type=A,uid={uid}"
            await client.apply(record_set(f"_own.{victim}", "TXT", [forged_text], label="forger"))
        runtime = Runtime(
            db,
            providers=[DnsProvider()],
            provider_config={"dns": tsig.config(owner_prefix="_own")},
            clock=clock,
            wall_clock=clock,
            poll_interval=60,
            resync_period=None,
            provider_timeout=None,
        )
        async with runtime:
            await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
            await until_async(clock, _synced(runtime, "forger", "inside the ownership namespace (_own)"))
            await until_async(clock, _synced(runtime, "taker", "not created by this object"))
            assert await by_hand.records(f"_own.{victim}", "TXT") == []
            for forged in (forged_text, f"{forged_text},mac={'0' * 32}"):
                await by_hand.update(
                    lambda m, text=forged: m.replace(f"_own.{fqdn}", 300, "TXT", f'"{text}"')
                )
                # NotOwned is terminal: an annotation's change has it looked at again.
                touch = {"metadata": {"annotations": {"test/touch": forged[-8:]}}}
                await runtime.client.patch("recordset", "taker", touch)
                await until_async(clock, _synced(runtime, "taker", f"{uid} without this store's signature"))
            assert await by_hand.records(victim, "A") == ["203.0.113.5"]
            await runtime.client.delete("recordset", "taker")

            async def gone() -> bool:
                names = [o.metadata.name for o in (await runtime.client.list("recordset")).items]
                return "taker" not in names

            await until_async(clock, gone)
        assert await by_hand.records(victim, "A") == ["203.0.113.5"]

    async def test_a_mark_signed_by_another_store_is_not_ours(self, tsig: Bind, tmp_path: Path) -> None:
        """Two clients bound to the same identity with different secrets: what one
        created, the other observes as not its own, and will not delete."""
        from reconcile import NotOwnedError  # noqa: PLC0415

        [obj] = await stored(tmp_path, [record_set(f"two-{token()}", "A", ["192.0.2.1"])])
        ours, theirs = DnsClient(tsig.config()), DnsClient(tsig.config())
        bind_store(ours, "0123456789abcdef", b"a" * 32)
        bind_store(theirs, "0123456789abcdef", b"b" * 32)
        try:
            await ours.create(obj)
            assert (await ours.observe(obj)).owner == obj.metadata.uid
            seen = await theirs.observe(obj)
            assert seen.owner == f"{obj.metadata.uid} without this store's signature"
            with pytest.raises(NotOwnedError):
                await theirs.delete(obj)
            assert (await ours.observe(obj)).exists
        finally:
            await ours.close()
            await theirs.close()

    def test_bind_store_passes_the_key_only_to_clients_that_take_it(self) -> None:
        """A client written before the key (``bind_store(identity)``) is still bound; one
        that takes the key gets it."""
        calls: list[tuple[Any, ...]] = []

        class Old:
            def bind_store(self, identity: str) -> None:
                calls.append((identity,))

        class New:
            def bind_store(self, identity: str, key: bytes = b"") -> None:
                calls.append((identity, key))

        bind_store(Old(), "id", b"secret")
        bind_store(New(), "id", b"secret")
        bind_store(object(), "id", b"secret")
        assert calls == [("id",), ("id", b"secret")]
