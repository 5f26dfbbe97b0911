"""Field ownership of the writes that are not an apply (``update``, ``patch``, ``edit``,
``label``), as Kubernetes records an ``operation: Update``: the fields a write changes
become its manager's (under ``NAME (Update)``) and leave every other manager, without
conflict; a later apply of another value by the applier conflicts with the updater, and
a forced apply takes the field back."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import HEAD, Cli

from reconcile import Client, FieldConflictError, InvalidError, connect
from reconcile.api.fields import SPEC, recorded_update, update_entry
from reconcile.cli.failing import EXIT_FAILURE, EXIT_INPUT
from reconcile.testing import example_kinds

PATCHER = update_entry("reconcile-patch")
FIELDS = ("size", "color", "tags")
VALUES = {
    "size": st.integers(min_value=0, max_value=3),
    "color": st.sampled_from(["red", "green", "blue"]),
    "tags": st.lists(st.sampled_from(["x", "y"]), max_size=2),
}
SPECS = st.fixed_dictionaries(VALUES)


def widget(spec: dict[str, Any], name: str = "w", **metadata: Any) -> dict[str, Any]:
    """A Widget manifest with exactly ``spec``."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": spec,
    }


async def managed(client: Client, name: str = "w") -> dict[str, list[str]]:
    """The managed fields of a widget, as lists."""
    obj = await client.get("widget", name)
    return {k: list(v) for k, v in obj.metadata.managed_fields.items()}


async def _moves_and_comes_back(path: Path, first: dict[str, Any], patch: dict[str, Any]) -> None:
    async with connect(path, kinds=example_kinds()) as client:
        await client.apply(widget(first), manager="deploy")
        await client.patch("widget", "w", {"spec": patch}, manager="reconcile-patch")
        changed = sorted(f for f in patch if patch[f] != first[f])
        paths = [SPEC + f for f in changed]
        owned = await managed(client)
        assert owned.get(PATCHER, []) == paths
        assert owned.get("deploy", []) == sorted(SPEC + f for f in FIELDS if f not in changed)

        # The applier declaring its old values again: a conflict for each field the
        # update changed, nothing stored.
        before = await client.revision()
        if changed:
            with pytest.raises(FieldConflictError) as caught:
                await client.apply(widget(first), manager="deploy")
            assert sorted(caught.value.conflicts) == [(f"spec.{f}", PATCHER) for f in changed]
            assert await client.revision() == before
        # Declaring the values the update set: no conflict, both own them.
        agreed = {**first, **patch}
        await client.apply(widget(agreed), manager="deploy")
        owned = await managed(client)
        assert owned.get(PATCHER, []) == paths
        assert owned["deploy"] == sorted(SPEC + f for f in FIELDS)
        # Forced: the applier takes every field back, the updater's entry goes.
        forced = await client.apply(widget(first), manager="deploy", force=True)
        assert client.converter.unstructure(forced.spec) == first
        assert await managed(client) == {"deploy": sorted(SPEC + f for f in FIELDS)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=SPECS, patch=st.fixed_dictionaries({}, optional=VALUES))
def test_an_update_moves_ownership_and_a_forced_apply_takes_it_back(
    first: dict[str, Any], patch: dict[str, Any]
) -> None:
    """After an apply, a patch owns exactly the fields it changed (the applier loses
    them); the applier's old values then conflict with the patcher; values equal to the
    patch's are shared; a forced apply takes them all back."""
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_moves_and_comes_back(Path(folder) / "state.db", first, patch))


def _leaves(spec: dict[str, Any]) -> dict[str, Any]:
    return {SPEC + k: v for k, v in spec.items()}


@given(
    old=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)),
    new=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)),
    owners=st.dictionaries(
        st.sampled_from(["x", "y", update_entry("m")]),
        st.lists(st.sampled_from(["spec/a", "spec/b", "spec/c", "labels/k"]), min_size=1, unique=True),
    ),
    label=st.sampled_from([None, "1", "2"]),
)
def test_recorded_update_invariants(
    old: dict[str, int], new: dict[str, int], owners: dict[str, list[str]], label: str | None
) -> None:
    """Every field the write added or changed is the updater's and nobody else's; a
    removed field is nobody's; an untouched field keeps its owners; no change, no
    change to the managed fields."""
    before = {"metadata": {"labels": {"k": "1"}, "managedFields": owners}, "spec": old}
    after = {"metadata": {"labels": {} if label is None else {"k": label}}, "spec": new}
    result = recorded_update(before, after, "m")
    old_values = {**_leaves(old), "labels/k": "1"}
    new_values = {**_leaves(new), **({} if label is None else {"labels/k": label})}
    changed = {p for p, v in new_values.items() if old_values.get(p, object()) != v}
    removed = old_values.keys() - new_values.keys()
    if not changed and not removed:
        assert result == owners
        return
    assert (
        set(result.get(update_entry("m"), [])) == (set(owners.get(update_entry("m"), [])) | changed) - removed
    )
    for name, paths in result.items():
        if name != update_entry("m"):
            assert not set(paths) & (changed | removed)
            assert set(paths) == set(owners[name]) - changed - removed
    for name, paths in owners.items():
        if name != update_entry("m") and set(paths) - changed - removed:
            assert name in result


@pytest.fixture
async def client(tmp_path: Path) -> Any:
    """A client on a fresh database."""
    async with connect(tmp_path / "u.db", kinds=example_kinds()) as opened:
        yield opened


class TestUpdates:
    """update, patch and metadata patches record their fields."""

    async def test_a_patched_field_survives_an_apply_that_does_not_declare_it(self, client: Client) -> None:
        """The applier stopped declaring color; the patch's color is kept (the patcher
        owns it), where before it went back to the default."""
        await client.apply(widget({"size": 1, "color": "red"}), manager="deploy")
        await client.patch("widget", "w", {"spec": {"color": "green"}}, manager="ops")
        applied = await client.apply(widget({"size": 2}), manager="deploy")
        assert applied.spec.color == "green"
        assert await managed(client) == {"deploy": ["spec/size"], update_entry("ops"): ["spec/color"]}

    async def test_one_managers_update_and_apply_are_apart(self, client: Client) -> None:
        """A manager's patch is its Update entry, not its Apply entry: its next apply
        does not drop the patched label for not declaring it (as in Kubernetes)."""
        await client.apply(widget({"size": 1}), manager="deploy")
        await client.patch("widget", "w", {"metadata": {"labels": {"team": "web"}}}, manager="deploy")
        applied = await client.apply(widget({"size": 2}), manager="deploy")
        assert applied.metadata.labels == {"team": "web"}
        assert await managed(client) == {"deploy": ["spec/size"], update_entry("deploy"): ["labels/team"]}

    async def test_update_records_and_a_removed_label_is_nobodys(self, client: Client) -> None:
        """``update`` records what it changed; a label it removes leaves every manager."""
        applied = await client.apply(widget({"size": 1}, labels={"app": "a"}), manager="deploy")
        current = await client.get("widget", "w")
        changed = attrs.evolve(
            current,
            metadata=attrs.evolve(current.metadata, labels={}),
            spec=attrs.evolve(current.spec, size=5),
        )
        await client.update(changed, manager="editor")
        assert applied.metadata.labels == {"app": "a"}
        assert await managed(client) == {update_entry("editor"): ["spec/size"]}

    async def test_an_unchanged_patch_records_nothing(self, client: Client) -> None:
        """A patch that changes nothing appends nothing and owns nothing."""
        await client.apply(widget({"size": 1}), manager="deploy")
        before = await client.revision()
        await client.patch("widget", "w", {"spec": {"size": 1}}, manager="ops")
        assert await client.revision() == before
        assert await managed(client) == {"deploy": ["spec/size"]}

    async def test_an_apply_manager_may_not_end_with_the_update_suffix(self, client: Client) -> None:
        """The Update entries' suffix is reserved: an apply under such a name is refused."""
        with pytest.raises(InvalidError, match="fieldManager"):
            await client.apply(widget({"size": 1}), manager=update_entry("deploy"))
        assert await client.revision() == 0


@pytest.fixture
def cli(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a fresh database."""
    return Cli(tmp_path, capsys)  # type: ignore[arg-type]


class TestCommandLine:
    """Each changing verb has its field manager, as kubectl's."""

    def owned(self, cli: Cli) -> Any:
        """The managed fields of file x."""
        _, out, _ = cli("get", "file", "x", "-o", "jsonpath={.metadata.managedFields}")
        return json.loads(out)

    def test_patch_label_annotate_default_managers(self, cli: Cli) -> None:
        """patch is reconcile-patch, label reconcile-label, annotate reconcile-annotate;
        the applier keeps the rest."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        assert cli("patch", "file", "x", "-p", '{"spec": {"content": "two"}}')[0] == 0
        assert cli("label", "file", "x", "tier=web")[0] == 0
        assert cli("annotate", "file", "x", "note=hi")[0] == 0
        assert self.owned(cli) == {
            "reconcile": ["spec/path"],
            "reconcile-annotate (Update)": ["annotations/note"],
            "reconcile-label (Update)": ["labels/tier"],
            "reconcile-patch (Update)": ["spec/content"],
        }
        code, _, err = cli("apply", "-f", str(path))
        assert code == EXIT_FAILURE
        assert 'conflict with "reconcile-patch (Update)": spec.content' in err
        assert cli("apply", "--force-conflicts", "-f", str(path))[0] == 0
        assert "reconcile-patch (Update)" not in self.owned(cli)

    def test_field_manager_on_the_verb_and_globally(self, cli: Cli) -> None:
        """``patch --field-manager`` names the manager; the global option does too; the
        verb's wins."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        assert cli("patch", "file", "x", "--field-manager", "ops", "-p", '{"spec": {"content": "2"}}')[0] == 0
        assert (
            cli("--field-manager", "night", "patch", "file", "x", "-p", '{"spec": {"mode": "0600"}}')[0] == 0
        )
        assert cli("--field-manager", "night", "label", "file", "x", "--field-manager", "lab", "a=b")[0] == 0
        owned = self.owned(cli)
        assert owned["ops (Update)"] == ["spec/content"]
        assert owned["night (Update)"] == ["spec/mode"]
        assert owned["lab (Update)"] == ["labels/a"]
        _, out, _ = cli("history", "file", "x", "-o", "json")
        assert {"ops", "night", "lab"} <= {event["actor"] for event in json.loads(out)}

    def test_a_bad_field_manager_is_refused(self, cli: Cli) -> None:
        """An empty --field-manager on a verb: exit 2, nothing written, no traceback."""
        path = cli.write("x.yaml", HEAD + "spec: {path: x.txt, content: one}\n")
        assert cli("apply", "-f", str(path))[0] == 0
        before = cli.revision()
        code, _, err = cli("patch", "file", "x", "--field-manager", " ", "-p", '{"spec": {"content": "2"}}')
        assert code == EXIT_INPUT
        assert "--field-manager: must not be empty" in err
        assert "Traceback" not in err
        assert cli.revision() == before


async def test_a_create_is_an_update_and_its_manager_applying_later_is_another_entry(tmp_path: Path) -> None:
    """``create`` records its fields under ``NAME (Update)``, as a Kubernetes POST; the
    same manager's later apply is its Apply entry, apart from it (structured-merge-diff's
    identity is the manager with its operation): the same values are shared, another
    value conflicts with the creator's entry until forced, which takes the field over."""
    async with connect(tmp_path / "s.db", kinds=example_kinds()) as client:
        await client.create(widget({"size": 1, "color": "red"}), manager="ctrl")
        assert await managed(client) == {update_entry("ctrl"): [SPEC + "color", SPEC + "size"]}
        await client.apply(widget({"size": 1, "color": "red"}), manager="ctrl")
        assert await managed(client) == {
            "ctrl": [SPEC + "color", SPEC + "size"],
            update_entry("ctrl"): [SPEC + "color", SPEC + "size"],
        }
        with pytest.raises(FieldConflictError, match=r"ctrl \(Update\)"):
            await client.apply(widget({"size": 2, "color": "red"}), manager="ctrl")
        await client.apply(widget({"size": 2, "color": "red"}), manager="ctrl", force=True)
        owned = await managed(client)
        assert (await client.get("widget", "w")).spec.size == 2
        assert owned["ctrl"] == [SPEC + "color", SPEC + "size"]
        assert owned[update_entry("ctrl")] == [SPEC + "color"]
