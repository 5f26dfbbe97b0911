"""Server-side apply: each field owned by the field managers that declared it.

A manager's apply sets what it declares, removes what it declared before and no longer
does (unless another manager owns it too), keeps what other managers own, and refuses
to set another manager's field to another value unless forced -- Kubernetes' semantics,
spec fields included.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import widget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconcile import Client, FieldConflictError, connect
from reconcile.api.fields import declared_paths, field_name, leaf_paths, merge_spec
from reconcile.testing import example_kinds


def spec_of(
    size: int | None = None, color: str | None = None, tags: list[str] | None = None
) -> dict[str, Any]:
    """A Widget spec declaring only the fields given."""
    spec: dict[str, Any] = {}
    if size is not None:
        spec["size"] = size
    if color is not None:
        spec["color"] = color
    if tags is not None:
        spec["tags"] = tags
    return spec


def manifest(name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A Widget manifest with exactly ``spec``."""
    return {**widget(name, **metadata), "spec": spec}


class TestFieldPaths:
    """The paths a manifest declares."""

    def test_leaves_of_mappings_and_atomic_lists(self) -> None:
        """Mappings are walked key by key; lists and scalars are leaves; a slash in a key
        is escaped."""
        spec = {"a": {"b": 1, "c/d": [1, 2]}, "e": [], "f": {}}
        assert leaf_paths(spec) == ["spec/a/b", "spec/a/c~1d", "spec/e", "spec/f"]
        assert field_name("spec/a/c~1d") == "spec.a.c/d"
        assert field_name("labels/app") == "metadata.labels.app"

    def test_declared_paths_follow_the_admitted_spec(self) -> None:
        """A key admission dropped is not declared; a mapping written where the admitted
        spec has a leaf is declared whole."""
        raw = {"a": {"b": 1}, "gone": 2, "c": {"d": 1}}
        admitted = {"a": {"b": 1, "x": 0}, "c": [1]}
        assert declared_paths(raw, admitted) == ["spec/a/b", "spec/c"]

    def test_merge_keeps_what_others_own(self) -> None:
        """Another manager's field keeps its stored value; a field nobody owns takes the
        applier's (default) value."""
        old = {"a": 1, "b": {"c": 2, "d": 3}}
        desired = {"a": 9, "b": {"c": 0, "d": 0}}
        managed = {"other": ["spec/b/c"], "me": ["spec/a", "spec/b/d"]}
        merged, conflicts = merge_spec(old, desired, managed, "me", ["spec/a"], force=False)
        assert (merged, conflicts) == ({"a": 9, "b": {"c": 2, "d": 0}}, [])

    def test_merge_conflict_names_field_and_manager(self) -> None:
        """Declaring another manager's field with another value is a conflict; forced,
        the field moves to the applier."""
        managed = {"other": ["spec/b/c"]}
        _, conflicts = merge_spec(
            {"b": {"c": 2}}, {"b": {"c": 5}}, dict(managed), "me", ["spec/b"], force=False
        )
        assert [(c.field, c.manager) for c in conflicts] == [("spec.b.c", "other")]
        forced = dict(managed)
        merged, conflicts = merge_spec({"b": {"c": 2}}, {"b": {"c": 5}}, forced, "me", ["spec/b"], force=True)
        assert (merged, conflicts, forced) == ({"b": {"c": 5}}, [], {})


class TestApply:
    """Server-side apply through the client."""

    async def test_two_managers_keep_each_others_fields(self, client: Client) -> None:
        """B's apply of the colour keeps A's size; A dropping its tags resets them to the
        default while B's colour stays."""
        await client.apply(manifest("w", spec_of(size=3, tags=["x"])), manager="a")
        both = await client.apply(manifest("w", spec_of(color="red")), manager="b")
        assert (both.spec.size, both.spec.color, both.spec.tags) == (3, "red", ("x",))
        assert both.metadata.managed_fields == {"a": ("spec/size", "spec/tags"), "b": ("spec/color",)}
        dropped = await client.apply(manifest("w", spec_of(size=3)), manager="a")
        assert (dropped.spec.size, dropped.spec.color, dropped.spec.tags) == (3, "red", ())
        assert dropped.metadata.managed_fields["a"] == ("spec/size",)

    async def test_conflict_is_refused_and_names_field_and_manager(self, client: Client) -> None:
        """Setting another manager's field to another value raises FieldConflictError
        naming both, and stores nothing; force takes the field over."""
        first = await client.apply(manifest("w", spec_of(size=3)), manager="a")
        with pytest.raises(FieldConflictError, match=r'conflict with "a": spec\.size') as caught:
            await client.apply(manifest("w", spec_of(size=4)), manager="b")
        assert caught.value.conflicts == (("spec.size", "a"),)
        assert (await client.get("widget", "w")).metadata.resource_version == first.metadata.resource_version
        taken = await client.apply(manifest("w", spec_of(size=4)), manager="b", force=True)
        assert taken.spec.size == 4
        assert taken.metadata.managed_fields == {"b": ("spec/size",)}

    async def test_same_value_is_shared(self, client: Client) -> None:
        """Two managers declaring one field with one value both own it; it stays while
        either declares it."""
        await client.apply(manifest("w", spec_of(size=1, color="red")), manager="a")
        await client.apply(manifest("w", spec_of(color="red")), manager="b")
        kept = await client.apply(manifest("w", spec_of(size=1)), manager="a")
        assert kept.spec.color == "red"

    async def test_label_conflict(self, client: Client) -> None:
        """A label another manager set to another value is a conflict too."""
        await client.apply(manifest("w", spec_of(size=1), labels={"app": "x"}), manager="a")
        with pytest.raises(FieldConflictError, match=r"metadata\.labels\.app"):
            await client.apply(manifest("w", spec_of(size=1), labels={"app": "y"}), manager="b")

    async def test_an_object_stored_before_spec_ownership_reapplies_unchanged(self, client: Client) -> None:
        """An object whose managedFields have no spec paths (an older release wrote it)
        re-applied identically appends nothing; its first real change records them."""
        await client.apply(manifest("w", spec_of(size=1), labels={"app": "x"}))
        key = (await client.get("widget", "w")).key
        stored = await client.store.read(key)
        assert stored is not None
        body = stored.body
        body["metadata"]["managedFields"] = {"reconcile": ["labels/app"]}  # as before spec paths

        def legacy(current: Any) -> Any:
            from reconcile.store.contract import Put  # noqa: PLC0415 - this test only

            return Put("MetadataChanged", {**current.body, "metadata": body["metadata"]})

        await client.store.write(key, legacy, actor="old-release")
        before = (await client.get("widget", "w")).metadata.resource_version
        again = await client.apply(manifest("w", spec_of(size=1), labels={"app": "x"}))
        assert again.metadata.resource_version == before
        changed = await client.apply(manifest("w", spec_of(size=2), labels={"app": "x"}))
        assert changed.metadata.managed_fields == {"reconcile": ("labels/app", "spec/size")}


SIZES = st.integers(0, 3)
COLORS = st.sampled_from(["red", "green", "blue"])
TAGS = st.lists(st.sampled_from(["x", "y"]), max_size=2)
SPECS = st.fixed_dictionaries({}, optional={"size": SIZES, "color": COLORS, "tags": TAGS})


async def _idempotent(path: Path, spec: dict[str, Any], labels: dict[str, str], manager: str) -> None:
    async with connect(path, kinds=example_kinds()) as client:
        await client.apply(manifest("w", spec_of(size=0, color="red")), manager="base")
        first = await client.apply(manifest("w", spec, labels=labels), manager=manager, force=True)
        again = await client.apply(manifest("w", spec, labels=labels), manager=manager, force=True)
        assert again.metadata.resource_version == first.metadata.resource_version
        assert again == first


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=SPECS,
    labels=st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y"]), max_size=2),
    manager=st.sampled_from(["me", "other"]),
)
def test_apply_is_idempotent(spec: dict[str, Any], labels: dict[str, str], manager: str) -> None:
    """Applying the same manifest twice under one manager appends nothing the second
    time, whatever it declares and whoever owned what before."""
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_idempotent(Path(folder) / "state.db", spec, labels, manager))


async def _removed_and_kept(
    path: Path, mine: dict[str, Any], theirs: dict[str, Any], kept: list[str]
) -> None:
    async with connect(path, kinds=example_kinds()) as client:
        await client.apply(manifest("w", {"size": 0, **mine}), manager="me")
        await client.apply(manifest("w", theirs), manager="them", force=True)
        after = await client.apply(
            manifest("w", {"size": 0, **{k: v for k, v in mine.items() if k in kept}}),
            manager="me",
            force=True,
        )
        defaults = {"color": "blue", "tags": ()}
        for field in ("color", "tags"):
            value = getattr(after.spec, field)
            if field in kept and field in mine:
                expected = mine[field]
            elif field in theirs:
                expected = theirs[field]  # the other manager's field stays
            else:
                expected = defaults[field]  # dropped by me, owned by nobody: it goes
            assert value == (tuple(expected) if field == "tags" else expected), (field, after.spec)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mine=st.fixed_dictionaries({}, optional={"color": COLORS, "tags": TAGS}),
    theirs=st.fixed_dictionaries({}, optional={"color": COLORS, "tags": TAGS}),
    kept=st.lists(st.sampled_from(["color", "tags"]), unique=True),
)
def test_a_managers_removed_field_goes_and_anothers_stays(
    mine: dict[str, Any], theirs: dict[str, Any], kept: list[str]
) -> None:
    """After "me" drops some of its fields: each dropped field that "them" declared keeps
    their value; each dropped field nobody else declared goes back to its default; each
    kept one keeps my value (fields "them" took by force are theirs)."""
    theirs_only = {k: v for k, v in theirs.items() if k not in mine or k not in kept}
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_removed_and_kept(Path(folder) / "state.db", mine, theirs_only, kept))


async def _planned_is_applied(path: Path, first: dict[str, Any], second: dict[str, Any], force: bool) -> None:
    async with connect(path, kinds=example_kinds()) as client:
        await client.apply(manifest("w", {"size": 0, **first}), manager="me")
        second_manifest = manifest("w", {"size": 1, **second})
        admitted = client.admission.admit(second_manifest)
        stored = await client.store.read((await client.get("widget", "w")).key)
        try:
            planned = client.engine.applied_body(admitted, stored, manager="them", force=force)
        except FieldConflictError:
            with pytest.raises(FieldConflictError):
                await client.apply(second_manifest, manager="them", force=force)
            return
        applied = await client.apply(second_manifest, manager="them", force=force)
        assert planned["spec"] == client.converter.unstructure(applied.spec)
        assert planned["metadata"]["managedFields"] == {
            k: list(v) for k, v in applied.metadata.managed_fields.items()
        }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.fixed_dictionaries({}, optional={"color": COLORS, "tags": TAGS}),
    second=st.fixed_dictionaries({}, optional={"color": COLORS, "tags": TAGS}),
    force=st.booleans(),
)
def test_what_plan_shows_is_what_apply_stores(
    first: dict[str, Any], second: dict[str, Any], force: bool
) -> None:
    """``Engine.applied_body`` (what plan and diff compare with) is the body the apply
    stores, or refuses as the apply does."""
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_planned_is_applied(Path(folder) / "state.db", first, second, force))
