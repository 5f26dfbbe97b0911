"""Server-side apply through an old version of a kind: a manifest declares the storage
version's fields it wrote (by name, or through the version's ``renamed``), not every
field its converted spec holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconcile import FieldConflictError, InvalidError, KindRegistry
from reconcile.api import Client, connect
from reconcile.api.fields import converted_paths
from reconcile.model.versions import KindVersion
from reconcile.testing.kinds import GIZMO, GIZMO_V1ALPHA1

V1 = "example.reconcile.dev/v1"
V1ALPHA1 = "example.reconcile.dev/v1alpha1"


def gizmo(*, api_version: str = V1ALPHA1, **spec: Any) -> dict[str, Any]:
    """The Gizmo g1 with exactly ``spec`` (v1alpha1 unless told)."""
    return {"apiVersion": api_version, "kind": "Gizmo", "metadata": {"name": "g1"}, "spec": spec}


async def owned(client: Client) -> dict[str, tuple[str, ...]]:
    """The managed fields of g1."""
    return dict((await client.get("Gizmo", "g1")).metadata.managed_fields)


@pytest.fixture
async def gizmos(tmp_path: Path) -> AsyncIterator[Client]:
    """A client knowing Gizmo in v1 (storage) and v1alpha1 (``color`` renamed ``colors``)."""
    async with connect(str(tmp_path / "g.db"), kinds=KindRegistry([GIZMO])) as client:
        yield client


class TestRule:
    """:func:`converted_paths`, the rule itself."""

    def test_same_names_declare_themselves(self) -> None:
        """A written field the storage version has at the same path declares that path only."""
        storage = {"size": 1, "colors": ["b"], "note": ""}
        assert converted_paths({"size": 1}, storage, (), dict) == ["spec/size"]

    def test_renamed_field_declares_its_new_path(self) -> None:
        """A renamed field (or one below it) declares the mapped path, cut at its leaf."""
        storage = {"limits": {"pages": 3, "depth": 1}, "note": ""}
        raw = {"maxPages": 3}
        assert converted_paths(raw, storage, (("maxPages", "limits.pages"),), dict) == ["spec/limits/pages"]
        nested = {"old": {"a": 1}}
        assert converted_paths(nested, {"new": {"a": 1, "b": 2}}, (("old", "new"),), dict) == ["spec/new/a"]

    def test_unmapped_field_declares_what_the_old_version_lacks(self) -> None:
        """A written field the rule cannot map declares every storage field the old
        version has no field for (and the old version's whole spec is asked for only then)."""
        asked: list[bool] = []

        def old() -> dict[str, Any]:
            asked.append(True)
            return {"size": 1, "color": "red"}

        storage = {"size": 1, "colors": ["red"], "note": ""}
        assert converted_paths({"size": 1}, storage, (), old) == ["spec/size"]
        assert asked == []
        assert converted_paths({"size": 1, "color": "red"}, storage, (), old) == [
            "spec/colors",
            "spec/note",
            "spec/size",
        ]

    @given(
        st.dictionaries(
            st.sampled_from(["a", "b", "c"]),
            st.one_of(st.integers(), st.dictionaries(st.sampled_from(["x", "y"]), st.integers())),
        )
    )
    def test_an_unconverted_spec_declares_its_written_leaves(self, spec: dict[str, Any]) -> None:
        """When the conversion keeps every path, the rule declares exactly what the
        manifest wrote (as for the storage version's own manifests)."""
        from reconcile.api.fields import declared_paths  # noqa: PLC0415 - the rule compared

        assert converted_paths(spec, spec, (), dict) == sorted(declared_paths(spec, spec))


class TestApplyThroughAnOldVersion:
    """What an old manifest's apply owns, and so what it leaves to others."""

    async def test_declares_what_it_wrote(self, gizmos: Client) -> None:
        """size by name, color as colors; note (v1 only) is not declared."""
        await gizmos.apply(gizmo(size=3, color="red"), manager="old")
        assert await owned(gizmos) == {"old": ("spec/colors", "spec/size")}

    async def test_does_not_take_another_managers_field(self, gizmos: Client) -> None:
        """A v1 manager's note survives an old manifest's apply, with no conflict; a field
        the old manifest does declare with another value conflicts, and force takes it."""
        await gizmos.apply(gizmo(api_version=V1, size=3, colors=["red"], note="keep"), manager="new")
        applied = await gizmos.apply(gizmo(size=3, color="red"), manager="old")
        assert applied.spec.note == "keep"
        assert await owned(gizmos) == {
            "new": ("spec/colors", "spec/note", "spec/size"),
            "old": ("spec/colors", "spec/size"),
        }
        with pytest.raises(FieldConflictError, match=r'conflict with "new": spec\.colors'):
            await gizmos.apply(gizmo(size=3, color="green"), manager="old")
        forced = await gizmos.apply(gizmo(size=3, color="green"), manager="old", force=True)
        assert forced.spec.colors == ("green",)
        assert forced.spec.note == "keep"
        assert await owned(gizmos) == {"new": ("spec/note", "spec/size"), "old": ("spec/colors", "spec/size")}

    async def test_without_renamed_it_declares_the_fields_the_old_version_lacks(self, tmp_path: Path) -> None:
        """A version that does not say where color goes: color's apply declares every v1
        field v1alpha1 has no name for (colors and note), as before; size alone declares
        size alone."""
        version = attrs.evolve(GIZMO_V1ALPHA1, renamed={})
        kinds = KindRegistry([attrs.evolve(GIZMO, versions=[version])])
        async with connect(str(tmp_path / "u.db"), kinds=kinds) as client:
            await client.apply(gizmo(size=3), manager="old")
            assert await owned(client) == {"old": ("spec/size",)}
            await client.apply(gizmo(size=3, color="red"), manager="old")
            assert await owned(client) == {"old": ("spec/colors", "spec/note", "spec/size")}

    async def test_a_partial_old_manifest_is_refused_as_it_stands(self, gizmos: Client) -> None:
        """An old manifest leaving out a required field another manager owns is not
        filled in with the storage version's fields (they are not its own): refused,
        naming the field, nothing stored."""
        await gizmos.apply(gizmo(api_version=V1, size=3, colors=["red"]), manager="new")
        before = await gizmos.revision()
        with pytest.raises(InvalidError, match=r"spec\.size"):
            await gizmos.apply(gizmo(color="green"), manager="old")
        assert await gizmos.revision() == before

    def test_renamed_must_name_fields(self) -> None:
        """A rename to nothing is refused when the version is declared."""
        with pytest.raises(ValueError, match="renamed maps a field path"):
            KindVersion("v0", dict, to_storage=dict, from_storage=dict, renamed={"color": ""})
