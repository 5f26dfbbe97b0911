"""A kind served in several versions: one storage version, conversion hub and spoke at
admission and on read, old events read converted, deprecated versions warned about,
unserved ones refused by name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import running, settle
from hypothesis import given
from hypothesis import strategies as st

from reconcile import InvalidError, KindRegistry
from reconcile.api import Client, connect
from reconcile.controller import Cache, CachedClient, Controller, Request, Result
from reconcile.errors import ConversionError, SpellingWarning, VersionWarning
from reconcile.model.meta import ObjectKey
from reconcile.model.versions import KindVersion
from reconcile.store.contract import Put
from reconcile.testing import FakeClock
from reconcile.testing.kinds import (
    GIZMO,
    GIZMO_V1ALPHA1,
    WIDGET,
    GizmoSpec,
    GizmoV1Alpha1Spec,
)

V1 = "example.reconcile.dev/v1"
V1ALPHA1 = "example.reconcile.dev/v1alpha1"


def gizmo(name: str = "g1", *, api_version: str = V1ALPHA1, **spec: Any) -> dict[str, Any]:
    """A Gizmo manifest (v1alpha1 unless told)."""
    return {"apiVersion": api_version, "kind": "Gizmo", "metadata": {"name": name}, "spec": spec}


def registry(version: KindVersion = GIZMO_V1ALPHA1) -> KindRegistry:
    """Gizmo with ``version`` as its v1alpha1, and Widget (one version)."""
    return KindRegistry([attrs.evolve(GIZMO, versions=[version]), WIDGET])


@pytest.fixture
async def gizmos(tmp_path: Path) -> AsyncIterator[Client]:
    """A client knowing Gizmo in v1 (storage) and v1alpha1 (served)."""
    async with connect(str(tmp_path / "gizmos.db"), kinds=registry()) as client:
        yield client


def old_body(name: str, **spec: Any) -> dict[str, Any]:
    """A body as an earlier release stored it: in v1alpha1."""
    return {
        "apiVersion": V1ALPHA1,
        "kind": "Gizmo",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"u-{name}",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00.000000Z",
            "labels": {},
            "annotations": {},
            "finalizers": [],
            "ownerReferences": [],
            "managedFields": {},
        },
        "spec": spec,
        "status": {"observedGeneration": 0, "conditions": []},
    }


async def write_old(client: Client, name: str, **spec: Any) -> ObjectKey:
    """Put a v1alpha1 body straight into the store (history written before v1)."""
    key = ObjectKey("example.reconcile.dev", "Gizmo", "default", name)
    await client.store.write(key, lambda _: Put("Created", old_body(name, **spec)), actor="old")
    return key


class TestRoundTrip:
    """Conversion through the hub keeps what both versions hold."""

    @given(size=st.integers(0, 2**40), color=st.text(max_size=20))
    def test_v1alpha1_to_v1_and_back(self, size: int, color: str) -> None:
        """v1alpha1 -> v1 -> v1alpha1 is the identity."""
        spoke = GizmoV1Alpha1Spec(size=size, color=color)
        assert GIZMO_V1ALPHA1.from_storage(GIZMO_V1ALPHA1.to_storage(spoke)) == spoke

    @given(size=st.integers(0, 2**40), colors=st.lists(st.text(max_size=8), min_size=1, max_size=4))
    def test_v1_to_v1alpha1_and_back_keeps_the_shared_fields(self, size: int, colors: list[str]) -> None:
        """v1 -> v1alpha1 -> v1 keeps the size and the first colour (what both hold)."""
        hub = GizmoSpec(size=size, colors=tuple(colors), note="only in v1")
        back = GIZMO_V1ALPHA1.to_storage(GIZMO_V1ALPHA1.from_storage(hub))
        assert (back.size, back.colors[0]) == (hub.size, hub.colors[0])

    @given(size=st.integers(0, 2**40), color=st.text(max_size=20))
    def test_admitted_body_round_trips(self, size: int, color: str) -> None:
        """An admitted v1alpha1 manifest is stored as v1, and reads back as v1alpha1 as it was."""
        client_kinds = registry()
        from reconcile.api.admission import Admission  # noqa: PLC0415
        from reconcile.api.decoding import Decoder  # noqa: PLC0415
        from reconcile.model.serde import make_converter  # noqa: PLC0415

        admitted = Admission(client_kinds, make_converter()).admit(gizmo(size=size, color=color))
        assert admitted.body["apiVersion"] == V1
        body = {**admitted.body, "status": {}}
        body["metadata"] = {**body["metadata"], "uid": "u", "generation": 1}
        decoder = Decoder(client_kinds)
        stored = decoder.resource(body)
        assert stored.spec == GizmoSpec(size=size, colors=(color,))
        spoke, warning = decoder.at_version(stored, "v1alpha1")
        assert (spoke.api_version, spoke.spec, warning) == (V1ALPHA1, GizmoV1Alpha1Spec(size, color), None)


class TestAdmission:
    """Manifests in any served version are stored in the storage version."""

    async def test_old_manifest_applies(self, gizmos: Client) -> None:
        """A v1alpha1 manifest applies; the stored body is v1."""
        applied = await gizmos.apply(gizmo(size=3, color="red"))
        assert applied.api_version == V1
        assert applied.spec == GizmoSpec(size=3, colors=("red",))
        stored = await gizmos.store.read(applied.key)
        assert stored is not None
        assert stored.body["apiVersion"] == V1
        assert stored.body["spec"]["colors"] == ["red"]

    async def test_same_object_whatever_the_version(self, gizmos: Client) -> None:
        """Applied again, in v1alpha1 or as the equal v1 manifest (declaring the fields the
        v1alpha1 one declares: size, and color as colors), the object is unchanged."""
        first = await gizmos.apply(gizmo(size=3, color="red"))
        again = await gizmos.apply(gizmo(size=3, color="red"))
        assert again.metadata.resource_version == first.metadata.resource_version
        same = await gizmos.apply(gizmo(api_version=V1, size=3, colors=["red"]))
        assert same.metadata.resource_version == first.metadata.resource_version

    async def test_old_manifest_errors_name_its_own_fields(self, gizmos: Client) -> None:
        """A v1alpha1 manifest is checked as v1alpha1: its field paths are its own."""
        with pytest.raises(InvalidError, match=r"spec\.colour"):
            await gizmos.apply(gizmo(size=3, colour="red"))
        assert await gizmos.store.read(ObjectKey("example.reconcile.dev", "Gizmo", "default", "g1")) is None

    async def test_unknown_version_refused(self, gizmos: Client) -> None:
        """An unknown version is refused, listing the served ones; nothing is stored."""
        with pytest.raises(InvalidError) as caught:
            await gizmos.apply(gizmo(api_version="example.reconcile.dev/v2", size=1))
        message = str(caught.value)
        assert "unknown apiVersion example.reconcile.dev/v2" in message
        assert f"served: {V1}, {V1ALPHA1}" in message
        assert await gizmos.revision() == 0

    async def test_deprecated_version_warns(self, tmp_path: Path) -> None:
        """A deprecated version applies, with its deprecation warning."""
        deprecated = attrs.evolve(GIZMO_V1ALPHA1, deprecated=True, deprecation_warning="v1alpha1 goes in 2.0")
        async with connect(str(tmp_path / "d.db"), kinds=registry(deprecated)) as client:
            with pytest.warns(VersionWarning, match="v1alpha1 goes in 2.0"):
                await client.apply(gizmo(size=1))
            admitted = client.admission.admit(gizmo(size=1))
            assert admitted.warnings == ("v1alpha1 goes in 2.0",)
        plain = attrs.evolve(GIZMO_V1ALPHA1, deprecated=True)
        async with connect(str(tmp_path / "p.db"), kinds=registry(plain)) as client:
            admitted = client.admission.admit(gizmo(size=1))
            assert admitted.warnings == (f"{V1ALPHA1} Gizmo is deprecated; use {V1}",)

    async def test_deprecated_and_old_spelling_warn_apart(self, tmp_path: Path) -> None:
        """A deprecated version in the old spelling: two warnings, each of its category."""
        deprecated = attrs.evolve(GIZMO_V1ALPHA1, deprecated=True)
        async with connect(str(tmp_path / "d.db"), kinds=registry(deprecated)) as client:
            manifest = {"api_version": V1ALPHA1, "kind": "Gizmo", "metadata": {"name": "g1"}}
            manifest["spec"] = {"size": 1}
            with pytest.warns(VersionWarning), pytest.warns(SpellingWarning):
                await client.apply(manifest)

    async def test_unserved_version_refused(self, tmp_path: Path) -> None:
        """An unserved version is refused by name, listing the served ones; nothing stored."""
        unserved = attrs.evolve(GIZMO_V1ALPHA1, served=False)
        async with connect(str(tmp_path / "u.db"), kinds=registry(unserved)) as client:
            refused = rf"{V1ALPHA1} of kind Gizmo is no longer served \(served: {V1}\)"
            with pytest.raises(InvalidError, match=refused):
                await client.apply(gizmo(size=1))
            assert await client.revision() == 0

    async def test_conversion_that_raises(self, tmp_path: Path) -> None:
        """A conversion that raises refuses the manifest, naming kind, versions, object."""

        def broken(spec: Any) -> Any:
            raise RuntimeError("no colour wheel")

        version = attrs.evolve(GIZMO_V1ALPHA1, to_storage=broken)
        async with connect(str(tmp_path / "c.db"), kinds=registry(version)) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(gizmo(size=1))
            message = str(caught.value)
            for part in ("Gizmo", '"g1"', V1ALPHA1, V1, "no colour wheel"):
                assert part in message
            assert await client.revision() == 0


class TestReads:
    """Reads in any served version; old bodies read in the storage version."""

    async def test_read_in_each_served_version(self, gizmos: Client) -> None:
        """get() answers in v1 by default, in v1alpha1 (whole or by name) when asked."""
        await gizmos.apply(gizmo(api_version=V1, size=2, colors=["red", "green"], note="n"))
        hub = await gizmos.get("gizmo", "g1")
        assert (hub.api_version, hub.spec) == (V1, GizmoSpec(2, ("red", "green"), "n"))
        assert await gizmos.get("gizmo", "g1", api_version=V1) == hub
        for asked in (V1ALPHA1, "v1alpha1"):
            spoke = await gizmos.get("gizmo", "g1", api_version=asked)
            assert (spoke.api_version, spoke.spec) == (V1ALPHA1, GizmoV1Alpha1Spec(2, "red"))
            assert spoke.metadata == hub.metadata

    async def test_read_in_unknown_version_refused(self, gizmos: Client) -> None:
        """A read in a version not served is an InvalidError naming the served ones."""
        await gizmos.apply(gizmo(size=2))
        with pytest.raises(InvalidError, match="served: "):
            await gizmos.get("gizmo", "g1", api_version="v9")

    async def test_read_in_deprecated_version_warns(self, tmp_path: Path) -> None:
        """A read in a deprecated version warns."""
        deprecated = attrs.evolve(GIZMO_V1ALPHA1, deprecated=True)
        async with connect(str(tmp_path / "d.db"), kinds=registry(deprecated)) as client:
            await client.apply(gizmo(api_version=V1, size=2))
            with pytest.warns(VersionWarning, match="deprecated"):
                await client.get("gizmo", "g1", api_version="v1alpha1")

    async def test_old_event_read_converted(self, gizmos: Client) -> None:
        """A v1alpha1 body in the log reads as v1: get, list, history."""
        key = await write_old(gizmos, "old", size=5, color="teal")
        got = await gizmos.get(key)
        assert (got.api_version, got.spec) == (V1, GizmoSpec(5, ("teal",)))
        listed = await gizmos.list("gizmo")
        assert [o.spec for o in listed.items] == [GizmoSpec(5, ("teal",))]
        (event,) = await gizmos.history("gizmo", "old")
        assert event.object is not None
        assert event.object.api_version == V1
        assert event.object.spec == GizmoSpec(5, ("teal",))

    async def test_old_event_of_unserved_version_read_converted(self, tmp_path: Path) -> None:
        """The log is forever: a body of a version no longer served still reads."""
        unserved = attrs.evolve(GIZMO_V1ALPHA1, served=False)
        async with connect(str(tmp_path / "u.db"), kinds=registry(unserved)) as client:
            key = await write_old(client, "old", size=5, color="teal")
            assert (await client.get(key)).spec == GizmoSpec(5, ("teal",))

    async def test_write_on_an_old_body(self, gizmos: Client) -> None:
        """An apply over a stored v1alpha1 body sees it as v1: the same spec is no change
        (the body stays as the log has it, until migrate-storage); another spec is
        written in v1."""
        key = await write_old(gizmos, "old", size=5, color="teal")
        before = await gizmos.revision()
        await gizmos.apply(gizmo("old", api_version=V1, size=5, colors=["teal"], note=""))
        assert await gizmos.revision() == before
        changed = await gizmos.apply(gizmo("old", api_version=V1, size=6, colors=["teal"]))
        assert changed.metadata.generation == 2
        stored = await gizmos.store.read(key)
        assert stored is not None
        assert stored.body["apiVersion"] == V1

    async def test_old_event_conversion_raises(self, tmp_path: Path) -> None:
        """A conversion that raises on read is a ConversionError naming kind, versions, object."""

        def broken(spec: Any) -> Any:
            raise RuntimeError("no colour wheel")

        version = attrs.evolve(GIZMO_V1ALPHA1, to_storage=broken)
        async with connect(str(tmp_path / "c.db"), kinds=registry(version)) as client:
            key = await write_old(client, "old", size=5, color="teal")
            with pytest.raises(ConversionError) as caught:
                await client.get(key)
            message = str(caught.value)
            for part in ("Gizmo", "default/old", V1ALPHA1, V1, "no colour wheel"):
                assert part in message

    async def test_one_version_kind_untouched(self, gizmos: Client) -> None:
        """A kind with one version reads and writes as before (no version lookups)."""
        applied = await gizmos.apply(
            {"apiVersion": V1, "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
        )
        assert applied.api_version == V1
        with pytest.raises(InvalidError, match=f"served: {V1}"):
            await gizmos.get("widget", "w", api_version="v2")


class Reader:
    """A reconciler that reads its object through the cached client and counts it."""

    def __init__(self, client: CachedClient) -> None:
        self.client = client
        self.read: dict[str, Any] = {}

    async def reconcile(self, request: Request) -> Result | None:
        """Read the object (in the storage version); nothing else."""
        self.read[request.name] = (await self.client.get(request.key)).spec
        return None


class TestController:
    """A conversion that fails on read stops that object's reconcile, and only that."""

    async def test_conversion_failure_is_terminal_and_others_go_on(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """Two v1alpha1 bodies in the log, one whose conversion raises: the other is
        reconciled (read as v1); the failing one is terminal, recorded in status with
        the error naming kind, versions and object, and not retried."""

        def picky(spec: GizmoV1Alpha1Spec) -> GizmoSpec:
            if spec.color == "bad":
                raise ValueError("bad is no colour")
            return GizmoSpec(size=spec.size, colors=(spec.color,))

        kinds = registry(attrs.evolve(GIZMO_V1ALPHA1, to_storage=picky))
        async with connect(str(tmp_path / "c.db"), kinds=kinds, clock=clock) as client:
            await write_old(client, "good", size=1, color="red")
            await write_old(client, "broken", size=2, color="bad")
            gizmo_kind = kinds.resolve("gizmo")
            cache = Cache(client, clock=clock)
            reader = Reader(CachedClient(client, cache))
            controller = Controller(client, gizmo_kind, reader, cache=cache, clock=clock, resync_period=None)
            async with running(controller):
                broken = ObjectKey("example.reconcile.dev", "Gizmo", "default", "broken")
                await settle(lambda: "good" in reader.read and broken in controller.gave_up)
                await asyncio.wait_for(controller.queue.wait_idle(), 10)
            assert reader.read == {"good": GizmoSpec(1, ("red",))}
            message = controller.gave_up[broken]
            for part in ("Gizmo", "default/broken", V1ALPHA1, V1, "bad is no colour"):
                assert part in message
            stored = await client.store.read(broken)
            assert stored is not None
            (condition,) = stored.body["status"]["conditions"]
            assert (condition["type"], condition["status"], condition["reason"]) == (
                "Synced",
                "False",
                "TerminalError",
            )
            assert "bad is no colour" in condition["message"]
