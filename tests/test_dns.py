"""The dns provider against a real BIND9 (named, started by the session's fixture, TSIG
and update-policy as in production): record sets created, repaired after hand changes
with plain dnspython updates, what is not ours left alone, concurrent changes detected
by the prerequisites, changes batched into few UPDATE messages, bad input refused at
admission, and no TSIG secret anywhere it should not be."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import dns.asyncquery
import dns.message
import dns.name
import dns.query
import dns.rdatatype
import dns.tsig
import dns.update
import dns.zone
import pytest
import yaml
from dns_server import FOREIGN_ZONE, KEY_NAME, ZONE, Bind
from helpers import checkout_path, run_benchmark
from hypothesis import given, settings
from hypothesis import strategies as st
from test_files_provider import until_async

from reconcile import InvalidError, KindRegistry, ObjectKey, Resource, Runtime, connect
from reconcile.cli import main as cli_main
from reconcile.testing import FakeClock, let_run
from reconcile.testing.conformance import CHECKS, Harness
from reconcile_providers.dns import RECORD_SET, DnsProvider
from reconcile_providers.dns.client import DnsClient
from reconcile_providers.dns.records import fqdn_text, parse_record, relative_text

DEADLINE = 30.0


def token() -> str:
    """A name part no other test uses."""
    return secrets.token_hex(4)


def record_set(
    name: str, rtype: str, records: list[str], *, label: str | None = None, **spec: Any
) -> dict[str, Any]:
    """A RecordSet manifest in the test zone."""
    return {
        "apiVersion": RECORD_SET.api_version,
        "kind": "RecordSet",
        "metadata": {"name": label or f"{name}-{rtype.lower()}".replace("_", "u")},
        "spec": {"zone": ZONE, "name": name, "type": rtype, "records": records, **spec},
    }


class ByHand:
    """Plain dnspython, as a person with nsupdate would."""

    def __init__(self, bind: Bind) -> None:
        self.bind = bind
        self.key = dns.tsig.Key(KEY_NAME, bind.secret, dns.tsig.HMAC_SHA256)

    async def update(self, edit: Any) -> None:
        """Send one signed UPDATE made by ``edit(message)``."""
        message = dns.update.UpdateMessage(ZONE)
        message.use_tsig(self.key)
        edit(message)
        response = await dns.asyncquery.tcp(message, self.bind.address, port=self.bind.port, timeout=5)
        assert response.rcode() == 0, response

    async def records(self, name: str, rtype: str) -> list[str]:
        """What the server holds (sorted presentation text); [] for none."""
        request = dns.message.make_query(dns.name.from_text(name, origin=dns.name.from_text(ZONE)), rtype)
        response = await dns.asyncquery.tcp(request, self.bind.address, port=self.bind.port, timeout=5)
        # (A delegation's NS records come back as a referral, in the authority section.)
        wanted = dns.rdatatype.from_text(rtype)
        found = [
            *(r for r in response.answer if r.rdtype == wanted),
            *(r for r in response.authority if rtype == "NS" and r.rdtype == dns.rdatatype.NS),
        ]
        return sorted(r.to_text() for rrset in found for r in rrset)

    def zone(self) -> dns.zone.Zone:
        """The whole zone, names relative (a TSIG-signed AXFR)."""
        return dns.zone.from_xfr(
            dns.query.xfr(self.bind.address, ZONE, port=self.bind.port, keyring=self.key, keyname=KEY_NAME)
        )

    def zone_names(self) -> list[str]:
        """Every name in the zone, relative (a TSIG-signed AXFR)."""
        return [name.to_text() for name in self.zone().nodes]


@pytest.fixture
def by_hand(tsig: Bind) -> ByHand:
    """Plain dnspython against the server."""
    return ByHand(tsig)


@pytest.fixture
async def running(tsig: Bind, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Runtime]:
    """A Runtime with the dns provider on the BIND fixture, on the fake clock."""
    runtime = Runtime(
        tmp_path / "state.db",
        providers=[DnsProvider()],
        provider_config={"dns": tsig.config()},
        clock=clock,
        wall_clock=clock,
        poll_interval=60,
        resync_period=None,
        provider_timeout=None,  # real requests while the tests move the fake clock
    )
    async with runtime:
        await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
        yield runtime


def _condition(runtime: Runtime, name: str, kind: str, reason: str | None = None) -> Any:
    async def holds() -> bool:
        obj = await runtime.client.get("recordset", name)
        condition = obj.status.condition(kind)
        if condition is None:
            return False
        if reason is not None:
            return bool(condition.reason == reason)
        return bool(
            condition.status.value == "True" and obj.status.observed_generation == obj.metadata.generation
        )

    return holds


class TestAdmission:
    """Bad input: the field path and the reason, nothing stored."""

    @pytest.mark.parametrize(
        ("spec", "path", "reason"),
        [
            (
                {"zone": "example.test", "name": "www", "type": "A", "records": ["192.0.2.1"]},
                "spec.zone",
                "absolute",
            ),
            ({"zone": ZONE, "name": "www", "type": "SPF", "records": ["x"]}, "spec.type", "must be one of"),
            (
                {"zone": ZONE, "name": "www", "type": "A", "records": ["192.0.2.300"]},
                "spec.records[0]",
                "A record",
            ),
            (
                {"zone": ZONE, "name": "www", "type": "AAAA", "records": ["192.0.2.1"]},
                "spec.records[0]",
                "AAAA",
            ),
            (
                {"zone": ZONE, "name": "@", "type": "MX", "records": ["70000 mail"]},
                "spec.records[0]",
                "16-bit",
            ),
            (
                {"zone": ZONE, "name": "_sip._tcp", "type": "SRV", "records": ["0 5 99999 sip"]},
                "spec.records[0]",
                "16-bit",
            ),
            (
                {"zone": ZONE, "name": "@", "type": "CAA", "records": ['0 is-sue "x"']},
                "spec.records[0]",
                "alphanumeric",
            ),
            ({"zone": ZONE, "name": "@", "type": "CNAME", "records": ["www"]}, "spec.type", "apex"),
            (
                {"zone": ZONE, "name": "a", "type": "CNAME", "records": ["b", "c"]},
                "spec.records",
                "exactly one",
            ),
            (
                {"zone": ZONE, "name": "www.other.test.", "type": "A", "records": ["192.0.2.1"]},
                "spec.name",
                "outside",
            ),
            (
                {"zone": ZONE, "name": "bad..name", "type": "A", "records": ["192.0.2.1"]},
                "spec.name",
                "not a DNS name",
            ),
            ({"zone": ZONE, "name": "www", "type": "A", "records": []}, "spec.records", "at least one"),
            (
                {
                    "zone": ZONE,
                    "name": "big",
                    "type": "TXT",
                    "records": [f"{i:04d}" + "x" * 996 for i in range(31)],
                },
                "spec.records",
                "at most 30000",
            ),
            (
                {"zone": ZONE, "name": "www", "type": "A", "records": ["192.0.2.1", "192.0.2.1"]},
                "spec.records[1]",
                "duplicate",
            ),
            (
                {"zone": ZONE, "name": "www", "type": "A", "ttl": -1, "records": ["192.0.2.1"]},
                "spec.ttl",
                "between",
            ),
        ],
    )
    async def test_refused(self, tmp_path: Path, spec: dict[str, Any], path: str, reason: str) -> None:
        """Each invalid spec names its field and why; the log stays empty."""
        manifest = {
            "apiVersion": RECORD_SET.api_version,
            "kind": "RecordSet",
            "metadata": {"name": "x"},
            "spec": spec,
        }
        async with connect(tmp_path / "a.db", kinds=KindRegistry([RECORD_SET])) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(manifest)
            assert await client.revision() == 0
        assert any(e.path == path and reason in e.message for e in caught.value.errors), caught.value.errors

    async def test_a_cname_beside_other_data_is_refused_at_apply(self, tmp_path: Path) -> None:
        """A CNAME where another RecordSet declares data at the name, or data where one
        declares a CNAME: refused at apply with the field path, naming the other object,
        nothing stored; other types side by side, and other names, are fine."""
        async with connect(tmp_path / "a.db", kinds=KindRegistry([RECORD_SET])) as client:
            await client.apply(record_set("www", "A", ["192.0.2.1"], label="web"))
            await client.apply(record_set("alias", "CNAME", ["www"], label="alias"))
            revision = await client.revision()
            with pytest.raises(InvalidError) as caught:
                await client.apply(record_set("WWW", "CNAME", ["elsewhere.example.net."], label="late"))
            [error] = caught.value.errors
            assert error.path == "spec.type"
            assert "a CNAME cannot share its name with other data (RFC 1034)" in error.message
            assert "RecordSet default/web declares" in error.message
            with pytest.raises(InvalidError, match=r"spec.type: .*RecordSet default/alias declares"):
                await client.apply(record_set("alias", "TXT", ["hello"], label="note"))
            assert await client.revision() == revision
            await client.apply(record_set("www", "AAAA", ["2001:db8::1"], label="web6"))
            await client.apply(record_set("other", "CNAME", ["www"], label="other"))
            # The same object applied again conflicts with nothing: itself.
            await client.apply(record_set("alias", "CNAME", ["www"], label="alias"))

    async def test_a_bulk_apply_refuses_a_conflict_within_itself(self, tmp_path: Path) -> None:
        """Two documents of one apply that cannot coexist: with check_all_first, the later
        is refused and nothing is written; without, the earlier is written and the later
        refused."""
        pair = [
            record_set("mail", "MX", ["10 mx.example.net."], label="mx"),
            record_set("mail", "CNAME", ["elsewhere.example.net."], label="mail-alias"),
        ]
        async with connect(tmp_path / "a.db", kinds=KindRegistry([RECORD_SET])) as client:
            results = await client.apply_many(pair, check_all_first=True)
            assert [r.outcome for r in results] == ["skipped", "refused"]
            assert "RecordSet default/mx declares" in str(results[1].error)
            assert await client.revision() == 0
            results = await client.apply_many(pair)
            assert [r.outcome for r in results] == ["created", "refused"]
            assert [o.metadata.name for o in (await client.list("recordset")).items] == ["mx"]

    def test_the_cli_exits_2_on_a_cname_conflict(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``reconcile apply -f`` of a CNAME and an A at one name: exit 2, both named with
        the field path, no traceback, nothing stored."""
        manifests = tmp_path / "zone.yaml"
        manifests.write_text(
            yaml.safe_dump_all(
                [
                    record_set("api", "A", ["192.0.2.7"], label="api"),
                    record_set("api", "CNAME", ["www"], label="api-alias"),
                ]
            )
        )
        db = tmp_path / "state.db"
        assert cli_main(["--db", str(db), "apply", "-f", str(manifests)]) == 2
        err = capsys.readouterr().err
        assert "spec.type: a CNAME cannot share its name with other data (RFC 1034)" in err
        assert "RecordSet default/api declares" in err
        assert "Traceback" not in err
        assert cli_main(["--db", str(db), "get", "recordset", "-o", "name"]) == 0
        assert capsys.readouterr().out == ""

    async def test_a_zone_no_server_serves_is_refused_at_apply(self, tsig: Bind, tmp_path: Path) -> None:
        """With the provider config at hand, a zone none of its servers serves is refused
        (nothing stored); the name is stored in canonical spelling."""
        async with connect(tmp_path / "a.db", provider_config={"dns": tsig.config()}) as client:
            with pytest.raises(
                InvalidError, match=r"no server in the dns provider config serves nowhere\.test\."
            ):
                await client.apply(
                    {
                        **record_set("www", "A", ["192.0.2.1"]),
                        "spec": {
                            "zone": "nowhere.test.",
                            "name": "www",
                            "type": "A",
                            "records": ["192.0.2.1"],
                        },
                    }
                )
            assert not (await client.list("recordset")).items
            stored = await client.apply(record_set("WWW.Example.Test.", "a", ["192.0.2.1"], label="canon"))
        assert (stored.spec.zone, stored.spec.name, stored.spec.type) == (ZONE, "www", "A")

    @settings(max_examples=150, deadline=None)
    @given(
        name=st.one_of(
            st.sampled_from(
                ["@", "", "*", "*.a", "A\\.b", "\\065x", "www.Example.Test.", "a.b.example.test."]
            ),
            st.from_regex(r"(\*\.)?[A-Za-z0-9_-]{1,20}(\.[A-Za-z0-9_-]{1,20}){0,3}", fullmatch=True),
        )
    )
    def test_canonical_name_is_dnspython_s_own_spelling(self, name: str) -> None:
        """The canonical relative name (a fast path for plain labels) is what dnspython
        writes for the name relative to the zone, in lower case, ``@`` for the apex; the
        absolute name's text (another fast path) is dnspython's, case kept."""
        origin = dns.name.from_text(ZONE)
        owner = dns.name.from_text(name, origin=origin) if name != "@" else origin
        expected = "@" if owner == origin else owner.relativize(origin).to_text().lower()
        assert relative_text(ZONE, name) == expected
        assert fqdn_text(ZONE, name) == owner.to_text()  # (the observed fqdn: dnspython's spelling)

    def test_config_refuses_an_inline_secret_and_names_no_secret(self) -> None:
        """A secret written in the config is refused; a missing variable is named; the
        error never holds a secret."""
        config = {
            "servers": [{"address": "127.0.0.1", "port": 53, "zones": [ZONE]}],
            "zones": {ZONE: {"key_name": KEY_NAME, "secret": "c2VjcmV0LXNlY3JldA=="}},
        }
        with pytest.raises(InvalidError) as caught:
            DnsClient(config)
        assert "secret_env or secret_file" in str(caught.value)
        assert "c2VjcmV0" not in str(caught.value)
        config["zones"] = {ZONE: {"key_name": KEY_NAME, "secret_env": "NO_SUCH_VARIABLE_HERE"}}
        with pytest.raises(InvalidError, match="NO_SUCH_VARIABLE_HERE is not set"):
            DnsClient(config)


class TestConverging:
    """Through the Runtime against BIND."""

    async def test_every_type_converges_and_answers(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """One record set of each type; the server answers them, each with our mark."""
        t = token()
        manifests = [
            record_set(f"a-{t}", "A", ["192.0.2.1", "192.0.2.2"]),
            record_set(f"a-{t}", "AAAA", ["2001:db8::1"]),
            record_set(f"alias-{t}", "CNAME", [f"a-{t}"]),
            record_set(f"a-{t}", "TXT", ["v=spf1 -all", "x" * 300]),
            record_set(f"a-{t}", "MX", ["10 mail.example.net."]),
            record_set(f"_sip._tcp.{t}", "SRV", ["0 5 5060 sip.example.net."]),
            record_set(f"a-{t}", "CAA", ['0 issue "letsencrypt.org"']),
            record_set(f"sub-{t}", "NS", ["ns1.example.net."]),
            record_set(f"1.{t}", "PTR", ["host.example.net."]),
        ]
        for manifest in manifests:
            await running.apply(manifest)
        for manifest in manifests:
            await until_async(clock, _condition(running, manifest["metadata"]["name"], "Ready"))
        assert await by_hand.records(f"a-{t}", "A") == ["192.0.2.1", "192.0.2.2"]
        assert await by_hand.records(f"alias-{t}", "CNAME") == [f"a-{t}.example.test."]
        txt = await by_hand.records(f"a-{t}", "TXT")
        assert len(txt) == 2
        assert any(r.count('" "') == 1 for r in txt)  # 300 bytes: two strings of at most 255
        marks = await by_hand.records(f"_reconcile.a-{t}", "TXT")
        assert sum("heritage=reconcile" in m for m in marks) == 5

    async def test_hand_changes_are_repaired_with_a_record_level_diff(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """A record changed and one deleted with plain dnspython updates come back at the
        next poll, recorded as DriftDetected with the records that differ."""
        t = token()
        await running.apply(record_set(f"web-{t}", "A", ["192.0.2.10"], label="web"))
        await running.apply(record_set(f"mail-{t}", "MX", ["10 mx.example.net."], label="mail"))
        for label in ("web", "mail"):
            await until_async(clock, _condition(running, label, "Ready"))
        fqdn = f"web-{t}.example.test."
        await by_hand.update(lambda m: m.replace(fqdn, 300, "A", "198.51.100.7"))
        await by_hand.update(lambda m: m.delete(f"mail-{t}.example.test.", "MX"))
        clock.advance(70)

        async def repaired() -> bool:
            # The records back, and the repair recorded (with its outcome, after it).
            history = await running.client.history("recordset", "web")
            return (
                await by_hand.records(f"web-{t}", "A") == ["192.0.2.10"]
                and bool(await by_hand.records(f"mail-{t}", "MX"))
                and any(e.type == "UpdateSucceeded" for e in history)
            )

        await until_async(clock, repaired)
        drift = [e for e in await running.client.history("recordset", "web") if e.type == "DriftDetected"]
        assert "-198.51.100.7" in drift[-1].data["message"]
        assert "+192.0.2.10" in drift[-1].data["message"]

    async def test_a_record_set_not_ours_is_never_touched(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """Records at the name and type that carry no mark of ours: NotOwned, unchanged,
        and deleting the resource leaves them."""
        t = token()
        fqdn = f"theirs-{t}.example.test."
        await by_hand.update(lambda m: m.add(fqdn, 300, "A", "203.0.113.5"))
        await running.apply(record_set(f"theirs-{t}", "A", ["192.0.2.1"], label="theirs"))
        await until_async(clock, _condition(running, "theirs", "Synced", "NotOwned"))
        await running.client.delete("recordset", "theirs")

        async def gone() -> bool:
            return not (await running.client.list("recordset")).items

        await until_async(clock, gone)
        assert await by_hand.records(f"theirs-{t}", "A") == ["203.0.113.5"]

    async def test_adopting_records_on_request(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """With the adopt annotation, records made by hand get our mark, Adopted is
        recorded, and the next reconcile brings them to the spec."""
        t = token()
        await by_hand.update(lambda m: m.add(f"legacy-{t}.example.test.", 300, "A", "203.0.113.8"))
        manifest = record_set(f"legacy-{t}", "A", ["192.0.2.8"], label="legacy")
        manifest["metadata"]["annotations"] = {"reconcile.dev/adopt": "true"}
        await running.apply(manifest)
        await until_async(clock, _condition(running, "legacy", "Ready"))
        assert await by_hand.records(f"legacy-{t}", "A") == ["192.0.2.8"]
        types = [e.type for e in await running.client.history("recordset", "legacy")]
        assert "Adopted" in types

    async def test_delete_removes_the_records_and_the_mark(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """Deleting the resource deletes the RRset and its line of the ownership TXT,
        leaving a sibling record set's line."""
        t = token()
        await running.apply(record_set(f"d-{t}", "A", ["192.0.2.1"], label="d-a"))
        await running.apply(record_set(f"d-{t}", "TXT", ["keep me"], label="d-txt"))
        for label in ("d-a", "d-txt"):
            await until_async(clock, _condition(running, label, "Ready"))
        await running.client.delete("recordset", "d-a")

        async def gone() -> bool:
            return [o.metadata.name for o in (await running.client.list("recordset")).items] == ["d-txt"]

        await until_async(clock, gone)
        assert await by_hand.records(f"d-{t}", "A") == []
        marks = await by_hand.records(f"_reconcile.d-{t}", "TXT")
        assert len(marks) == 1
        assert "type=TXT" in marks[0]

    async def test_a_concurrent_change_is_a_conflict_resolved_on_requeue(
        self, tsig: Bind, by_hand: ByHand, tmp_path: Path
    ) -> None:
        """An update whose observation is stale (somebody changed the RRset between observe
        and update) fails its prerequisite: ConflictError, nothing overwritten; observed
        afresh, the update goes through."""
        from reconcile import ConflictError  # noqa: PLC0415

        t = token()
        [obj] = await stored(tmp_path, [record_set(f"race-{t}", "A", ["192.0.2.1"])])
        client = DnsClient(tsig.config())
        try:
            await client.create(obj)
            seen = await client.observe(obj)
            fqdn = f"race-{t}.example.test."
            await by_hand.update(lambda m: m.replace(fqdn, 300, "A", "198.51.100.9"))
            wanted = attrs.evolve(obj, spec=attrs.evolve(obj.spec, records=["192.0.2.2"]))
            with pytest.raises(ConflictError, match="changed since it was observed"):
                await client.update(wanted, seen)
            assert await by_hand.records(f"race-{t}", "A") == ["198.51.100.9"]
            fresh = await client.observe(wanted)
            after = await client.update(wanted, fresh)
            assert after.up_to_date
            assert await by_hand.records(f"race-{t}", "A") == ["192.0.2.2"]
        finally:
            await client.close()

    async def test_many_changes_share_few_update_messages(self, tsig: Bind, tmp_path: Path) -> None:
        """200 concurrent creates in one zone go in a handful of UPDATE messages; one that
        conflicts fails alone."""
        t = token()
        client = DnsClient(tsig.config(batch_max=100))
        objects = await stored(tmp_path, [record_set(f"n{i}-{t}", "A", ["192.0.2.1"]) for i in range(200)])
        try:
            await ByHand(tsig).update(lambda m: m.add(f"n7-{t}.example.test.", 300, "A", "203.0.113.1"))
            results = await asyncio.gather(*(client.create(o) for o in objects), return_exceptions=True)
        finally:
            await client.close()
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert failed == [7]
        statistics = client.statistics()
        # Two or three combined messages (100 at most each), then, since one combined
        # message failed on n7's prerequisite, its changes one by one.
        assert statistics["messages"] <= 3 + 100
        assert statistics["changes"] >= 200

    async def test_a_cname_and_other_data_never_share_a_name(
        self, running: Runtime, by_hand: ByHand, clock: FakeClock
    ) -> None:
        """A CNAME where other records are, and an A where a CNAME is: the create's
        prerequisites refuse both (BIND would answer NOERROR and ignore them), the
        condition says which rule, and nothing is written."""
        t = token()
        await by_hand.update(lambda m: m.add(f"busy-{t}.example.test.", 300, "TXT", '"somebody\'s"'))
        await by_hand.update(lambda m: m.add(f"alias-{t}.example.test.", 300, "CNAME", "x.example.net."))
        await running.apply(record_set(f"busy-{t}", "CNAME", ["elsewhere.example.net."], label="busy"))
        await running.apply(record_set(f"alias-{t}", "A", ["192.0.2.1"], label="alias"))

        def says(label: str, text: str) -> Any:
            async def holds() -> bool:
                synced = (await running.client.get("recordset", label)).status.condition("Synced")
                return synced is not None and text in synced.message

            return holds

        await until_async(clock, says("busy", "a CNAME cannot share its name with other data"))
        await until_async(clock, says("alias", "holds a CNAME: a A record set cannot share its name"))
        assert await by_hand.records(f"busy-{t}", "CNAME") == []
        assert await by_hand.records(f"alias-{t}", "A") == []
        assert await by_hand.records(f"_reconcile.busy-{t}", "TXT") == []

    async def test_a_noerror_the_zone_does_not_reflect_is_a_clear_failure(
        self, tsig: Bind, tmp_path: Path
    ) -> None:
        """Read back: a server that answers NOERROR to an update it did not apply (as BIND
        does for some updates outside what it allows) is a PermanentError that says so."""
        from reconcile import PermanentError  # noqa: PLC0415

        [obj] = await stored(tmp_path, [record_set(f"ignored-{token()}", "A", ["192.0.2.1"])])

        class Ignoring(DnsClient):
            async def _submit(self, resource: Resource[Any, Any], change: Any) -> None:  # noqa: ARG002
                return None  # the server "answered NOERROR" and changed nothing

        client = Ignoring(tsig.config())
        try:
            found = await client.observe(obj)
            with pytest.raises(PermanentError, match="answered NOERROR, but the zone does not hold"):
                await client.update(obj, found)
        finally:
            await client.close()

    @pytest.mark.parametrize(
        ("held", "ttl", "accepted"),
        [
            (["10 mail.example.test."], 300, True),
            (["10 MAIL.Example.TEST."], 300, True),  # the same record, the name's case spelled otherwise
            (["10 mail.example.test."], 60, False),
            (["20 mail.example.test."], 300, False),
            (["10 mail.example.test.", "20 backup.example.test."], 300, False),
        ],
    )
    async def test_read_back_compares_records_and_ttl(
        self, tsig: Bind, tmp_path: Path, held: list[str], ttl: int, accepted: bool
    ) -> None:
        """Read back accepts exactly the records sent with the TTL sent (a name's case
        aside, as DNS compares names) and refuses anything else as a PermanentError."""
        from reconcile import PermanentError  # noqa: PLC0415
        from reconcile_providers.dns.wire import Answer  # noqa: PLC0415

        [obj] = await stored(tmp_path, [record_set(f"mx-{token()}", "MX", ["10 mail"])])
        answer = Answer(ttl, tuple(parse_record("MX", text, ZONE) for text in held))

        class Holding(DnsClient):
            async def _query(self, *args: Any) -> Answer:  # noqa: ARG002
                return answer

        client = Holding(tsig.config())
        try:
            if accepted:
                observed = await client._read_back(obj)
                assert observed.exists
                assert observed.owner == obj.metadata.uid
                assert observed.observed["records"] == sorted(r.to_text() for r in answer.rdatas)
            else:
                with pytest.raises(PermanentError, match="answered NOERROR, but the zone does not hold"):
                    await client._read_back(obj)
        finally:
            await client.close()


async def stored(tmp_path: Path, manifests: list[dict[str, Any]]) -> list[Resource[Any, Any]]:
    """The manifests as admitted objects (with their uids), from a store of their own."""
    async with connect(tmp_path / "objects.db", kinds=KindRegistry([RECORD_SET])) as client:
        return [await client.apply(m) for m in manifests]


class TestFailures:
    """What the server or the network says, in the condition, with backoff."""

    async def test_a_wrong_tsig_secret_is_badsig_and_never_printed(
        self,
        tsig: Bind,
        tmp_path: Path,
        clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A secret the server does not hold: the condition names BADSIG and the key, and
        the secret is nowhere: not in the condition, the log records or the database."""
        import base64  # noqa: PLC0415

        wrong = base64.b64encode(b"not-the-secret-at-all-0123456789").decode()
        monkeypatch.setenv("TSIG_SECRET", wrong)
        caplog.set_level(logging.DEBUG)
        runtime = Runtime(
            tmp_path / "w.db",
            providers=[DnsProvider()],
            provider_config={"dns": tsig.config()},
            clock=clock,
            wall_clock=clock,
            provider_timeout=None,
            provider_attempts=1,
        )
        async with runtime:
            await runtime.apply(record_set(f"w-{token()}", "A", ["192.0.2.1"], label="w"))

            async def badsig() -> bool:
                synced = (await runtime.client.get("recordset", "w")).status.condition("Synced")
                return synced is not None and "BADSIG" in synced.message

            await until_async(clock, badsig)
        data = b"".join(p.read_bytes() for p in tmp_path.glob("w.db*"))
        for secret in (wrong, tsig.secret):
            assert secret.encode() not in data
            assert secret not in caplog.text

    async def test_a_zone_the_server_does_not_serve(self, running: Runtime, clock: FakeClock) -> None:
        """The config says the server serves it; the server does not: the condition says
        so (NOTAUTH, or the server's REFUSED), with backoff."""
        await running.apply(
            {
                **record_set("www", "A", ["192.0.2.1"], label="elsewhere"),
                "spec": {"zone": FOREIGN_ZONE, "name": "www", "type": "A", "records": ["192.0.2.1"]},
            }
        )

        async def said() -> bool:
            synced = (await running.client.get("recordset", "elsewhere")).status.condition("Synced")
            return synced is not None and any(w in synced.message for w in ("NOTAUTH", "NOTZONE", "REFUSED"))

        await until_async(clock, said)

    async def test_a_zone_the_config_does_not_name_is_terminal(
        self, tsig: Bind, tmp_path: Path, clock: FakeClock
    ) -> None:
        """An object stored without the provider config at hand (so admission could not
        check its zone), run with a config that names no server for it: Synced says so,
        once, and it is not retried until the spec or the annotations change."""
        db = tmp_path / "z.db"
        async with connect(db, kinds=KindRegistry([RECORD_SET])) as client:
            await client.apply(
                {
                    **record_set("www", "A", ["192.0.2.1"], label="nowhere"),
                    "spec": {"zone": "nowhere.test.", "name": "www", "type": "A", "records": ["192.0.2.1"]},
                }
            )
        runtime = Runtime(
            db,
            providers=[DnsProvider()],
            provider_config={"dns": tsig.config()},
            clock=clock,
            wall_clock=clock,
            provider_timeout=None,
        )
        async with runtime:
            await until_async(clock, _condition(runtime, "nowhere", "Synced", "ReconcileError"))
            synced = (await runtime.client.get("recordset", "nowhere")).status.condition("Synced")
            assert synced is not None
            assert "no server in the dns provider config serves zone nowhere.test." in synced.message
            queue = runtime.controllers["recordset.dns.reconcile.dev"].queue
            key = ObjectKey("dns.reconcile.dev", "RecordSet", "default", "nowhere")
            clock.advance(600)
            for turn in range(200):
                await let_run(turn)
            assert queue.num_requeues(key) == 0  # terminal: no retry storm

    async def test_an_unreachable_server(self, tsig: Bind, tmp_path: Path, clock: FakeClock) -> None:
        """Nobody listens: the condition says unreachable; the queue backs off."""
        from servers import free_port  # noqa: PLC0415

        config = tsig.config()
        config["servers"] = [{"address": "127.0.0.1", "port": free_port(), "zones": [ZONE]}]
        runtime = Runtime(
            tmp_path / "u.db",
            providers=[DnsProvider()],
            provider_config={"dns": config},
            clock=clock,
            wall_clock=clock,
            provider_timeout=None,
            provider_attempts=1,
        )
        async with runtime:
            await runtime.apply(record_set("far", "A", ["192.0.2.1"], label="far"))

            async def unreachable() -> bool:
                synced = (await runtime.client.get("recordset", "far")).status.condition("Synced")
                return synced is not None and "unreachable" in synced.message

            await until_async(clock, unreachable)
            queue = runtime.controllers["recordset.dns.reconcile.dev"].queue
            key = ObjectKey("dns.reconcile.dev", "RecordSet", "default", "far")

            async def backing_off() -> bool:  # (the condition is written before the requeue)
                return queue.num_requeues(key) >= 1

            await until_async(clock, backing_off)


class DnsOutside:
    """Reaches the zone directly, with plain dnspython."""

    def __init__(self, bind: Bind, scope: str) -> None:
        self.hand = ByHand(bind)
        self.scope = scope

    @staticmethod
    def _fqdn(resource: Resource[Any, Any]) -> str:
        return f"{resource.spec.name}.{resource.spec.zone}"

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the RRset is there."""
        return bool(await self.hand.records(self._fqdn(resource), resource.spec.type))

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """Delete the RRset by hand (the mark stays, as nsupdate would leave it)."""
        await self.hand.update(lambda m: m.delete(self._fqdn(resource), resource.spec.type))

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """Replace its records by hand."""
        await self.hand.update(lambda m: m.replace(self._fqdn(resource), 300, "A", "198.51.100.99"))

    async def replace(self, resource: Resource[Any, Any], manifest: Mapping[str, Any]) -> None:
        """Delete the RRset and its mark, then make records there as somebody else.

        With the mark left in place, records made at its name again are ours to repair:
        DNS records carry no identity of their own (see the dns reference)."""
        fqdn = self._fqdn(resource)
        await self.hand.update(lambda m: (m.delete(fqdn, resource.spec.type), m.delete(f"_reconcile.{fqdn}")))
        await self.plant_foreign(manifest)

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """Records at the manifest's name, made by somebody else."""
        fqdn = f"{manifest['spec']['name']}.{ZONE}"
        await self.hand.update(lambda m: m.add(fqdn, 300, "A", "203.0.113.77"))

    async def count(self) -> int:
        """How many of this check's A RRsets exist."""
        names = self.hand.zone_names()
        return sum(1 for n in names if n.endswith(self.scope) and not n.startswith("_reconcile"))


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_record_set_conformance(check: Any, tsig: Bind, tmp_path: Path) -> None:
    """The kit's checks, for RecordSet."""
    scope = token()

    def manifest(name: str) -> dict[str, Any]:
        return record_set(f"{name}-{scope}", "A", ["192.0.2.1"], label=name)

    await check(
        Harness(DnsProvider(), DnsOutside(tsig, scope), manifest, tmp_path / "state.db", tsig.served_config())
    )


def _cli(db: Path, config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reconcile", "--db", str(db), "--provider-config", str(config), *args]


def _every_type(t: str, i: int) -> tuple[str, str, list[str]]:
    """Record set ``i`` of a zone of 50: each type in turn, names of their own."""
    rtype = ("A", "AAAA", "TXT", "MX", "SRV", "CAA", "CNAME", "PTR", "NS")[i % 9]
    records = {
        "A": [f"192.0.2.{i + 1}"],
        "AAAA": [f"2001:db8::{i + 1:x}"],
        "TXT": [f"record {i}"],
        "MX": [f"{i} mail.example.net."],
        "SRV": [f"0 5 {5000 + i} sip.example.net."],
        "CAA": ['0 issue "letsencrypt.org"'],
        "CNAME": [f"target{i}.example.net."],
        "PTR": [f"host{i}.example.net."],
        "NS": [f"ns{i}.example.net."],
    }[rtype]
    return f"h{i}-{t}", rtype, records


def _write_config(tmp_path: Path, bind: Bind) -> Path:
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"dns": bind.config()}))
    return config


def test_end_to_end_through_the_cli(tsig: Bind, tmp_path: Path) -> None:
    """apply 50 record sets of every type, ``run --once`` converges, and the server answers
    each as declared; a bad manifest exits 2 and stores nothing."""
    t = token()
    config = _write_config(tmp_path, tsig)
    sets = [_every_type(t, i) for i in range(50)]
    manifests = tmp_path / "zone.yaml"
    manifests.write_text(
        yaml.safe_dump_all(
            record_set(name, rtype, records, label=f"rs{i}") for i, (name, rtype, records) in enumerate(sets)
        )
    )
    db = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": checkout_path(), "TSIG_SECRET": tsig.secret}
    applied = subprocess.run(
        _cli(db, config, "apply", "-f", str(manifests)), env=env, capture_output=True, check=False
    )
    assert applied.returncode == 0, applied.stderr
    once = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120"), env=env, capture_output=True, check=False
    )
    assert once.returncode == 0, once.stderr.decode(errors="replace")[-3000:]
    hand = ByHand(tsig)
    for name, rtype, records in sets:
        wanted = sorted(r.to_text() for r in (parse_record(rtype, text, ZONE) for text in records))
        assert asyncio.run(hand.records(name, rtype)) == wanted, (name, rtype)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(record_set("bad", "MX", ["70000 mail.example.net."], label="bad")))
    refused = subprocess.run(
        _cli(db, config, "apply", "-f", str(bad)), env=env, capture_output=True, check=False
    )
    assert refused.returncode == 2
    assert b"spec.records[0]" in refused.stderr
    assert b"Traceback" not in refused.stderr
    assert tsig.secret.encode() not in refused.stderr + once.stderr + applied.stderr
    # By hand, with plain dnspython: one record set changed, one deleted. The next run
    # puts both back and history says what drifted.
    changed, gone = sets[0], sets[1]
    asyncio.run(hand.update(lambda m: m.replace(f"{changed[0]}.{ZONE}", 300, "A", "198.51.100.3")))
    asyncio.run(hand.update(lambda m: m.delete(f"{gone[0]}.{ZONE}", gone[1])))
    again = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120"), env=env, capture_output=True, check=False
    )
    assert again.returncode == 0, again.stderr.decode(errors="replace")[-3000:]
    assert asyncio.run(hand.records(changed[0], "A")) == changed[2]
    assert asyncio.run(hand.records(gone[0], gone[1])) == [f"{gone[2][0]}"]
    history = subprocess.run(
        _cli(db, config, "history", "recordset/rs0", "-o", "json"), env=env, capture_output=True, check=False
    )
    assert b"DriftDetected" in history.stdout
    assert b"-198.51.100.3" in history.stdout
    # Deleting through the CLI removes the records and their marks.
    deleted = subprocess.run(
        _cli(db, config, "delete", "recordset", "rs0", "rs1"), env=env, capture_output=True, check=False
    )
    assert deleted.returncode == 0, deleted.stderr
    last = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120"), env=env, capture_output=True, check=False
    )
    assert last.returncode == 0, last.stderr.decode(errors="replace")[-3000:]
    for name, rtype, _ in (changed, gone):
        assert asyncio.run(hand.records(name, rtype)) == []
        assert asyncio.run(hand.records(f"_reconcile.{name}", "TXT")) == []


def test_sigkill_mid_convergence(tsig: Bind, tmp_path: Path) -> None:
    """``reconcile run`` SIGKILLed while it creates 500 record sets, then ``run --once``:
    every record set exists exactly once, with exactly one mark of its own."""
    t = token()
    count = 500
    config = _write_config(tmp_path, tsig)
    manifests = tmp_path / "many.yaml"
    manifests.write_text(
        yaml.safe_dump_all(
            record_set(f"k{i}-{t}", "A", [f"192.0.2.{i % 250 + 1}"], label=f"k{i}") for i in range(count)
        )
    )
    db = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": checkout_path(), "TSIG_SECRET": tsig.secret}
    applied = subprocess.run(
        _cli(db, config, "apply", "-f", str(manifests)), env=env, capture_output=True, check=False
    )
    assert applied.returncode == 0, applied.stderr
    hand = ByHand(tsig)

    def made() -> int:
        return sum(1 for name in hand.zone_names() if name.startswith("k") and name.endswith(f"-{t}"))

    runner = subprocess.Popen(
        _cli(db, config, "run"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while made() < count // 4:  # progress on the server, with a deadline
            assert time.monotonic() < deadline, "fewer than 125 record sets in 120 s"
            assert runner.poll() is None, "reconcile run exited on its own"
            time.sleep(0.01)
    finally:
        runner.kill()
        runner.wait(timeout=60)
    once = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120"), env=env, capture_output=True, check=False
    )
    assert once.returncode == 0, once.stderr.decode(errors="replace")[-3000:]
    zone = dns.zone.from_xfr(
        dns.query.xfr(tsig.address, ZONE, port=tsig.port, keyring=hand.key, keyname=KEY_NAME)
    )
    for i in range(count):
        node = zone.get_node(f"k{i}-{t}")
        assert node is not None, i
        [rdataset] = node.rdatasets
        assert [r.to_text() for r in rdataset] == [f"192.0.2.{i % 250 + 1}"]
        marks = zone.get_node(f"_reconcile.k{i}-{t}")
        assert marks is not None
        assert len(next(iter(marks.rdatasets))) == 1


def test_the_dns_example_converges(tsig: Bind, tmp_path: Path) -> None:
    """examples/dns/zone.yaml through the CLI against named (the example's config with
    this server's port): every record set converges in one run --once."""
    root = Path(__file__).parents[1]
    example = yaml.safe_load((root / "examples" / "dns.providers.yaml").read_text())
    example["dns"]["servers"][0]["port"] = tsig.port
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump(example))
    db = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": checkout_path(), "TSIG_SECRET": tsig.secret}
    zone = str(root / "examples" / "dns" / "zone.yaml")
    applied = subprocess.run(_cli(db, config, "apply", "-f", zone), env=env, capture_output=True, check=False)
    assert applied.returncode == 0, applied.stderr
    once = subprocess.run(
        _cli(db, config, "run", "--once", "--timeout", "120"), env=env, capture_output=True, check=False
    )
    assert once.returncode == 0, once.stderr.decode(errors="replace")[-3000:]
    hand = ByHand(tsig)
    assert asyncio.run(hand.records("www", "A")) == ["192.0.2.10", "192.0.2.11"]
    assert asyncio.run(hand.records("@", "MX")) == ["10 mail.example.test."]


@pytest.mark.usefixtures("bind")
def test_dns_benchmark_smoke(tmp_path: Path) -> None:
    """benchmarks/dns.py at a tiny size: every phase measured beside the plain code, the
    no-change pass sends no UPDATE, and the converge shares messages."""
    rows, printed = run_benchmark("dns", 30, tmp_path, "--rounds", "2")
    assert set(rows) == {"converge", "noop", "repair", "delete"}
    for row in rows.values():  # each side's best of its two runs, both kept
        assert len(row["plain_runs"]) == len(row["our_runs"]) == 2
        assert row["ours_s"] == min(row["our_runs"])
        assert row["plain_s"] == min(row["plain_runs"])
    assert rows["noop"]["our_calls"]["updates"] == 0
    assert rows["noop"]["our_calls"]["queries"] == rows["noop"]["plain_calls"]["queries"] == 60
    assert rows["converge"]["our_calls"]["changes"] == 30
    assert rows["converge"]["our_calls"]["updates"] < 30
    assert "x plain" in printed
