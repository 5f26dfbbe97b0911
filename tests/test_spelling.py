"""Documents in Kubernetes' camelCase: manifests in the old snake_case spelling still
apply (one warning per document), mixing both is refused, a store written by the release
before (``fixtures/legacy_v5``, made by commit 460954b) reads, verifies and converges in
the new spelling without its log being rewritten, and for every kind the converter's
round trip is exact and every key it writes is camelCase (user data aside)."""

from __future__ import annotations

import datetime
import enum
import json
import shutil
import sqlite3
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import test_cli
import yaml
from helpers import widget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconcile import Client, InvalidError, KindRegistry, SpellingWarning, connect
from reconcile.model import Kind, make_converter
from reconcile.model.kinds import Behaviour
from reconcile.model.meta import ObjectKey, ObjectMeta
from reconcile.model.spelling import camel, respell_document
from reconcile.store.contract import Put
from reconcile.testing import example_kinds

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_v5"
#: Where the fixture's files live: its objects' ``spec.root`` (an absolute path).
LEGACY_ROOT = Path("/tmp/reconcile-legacy-v5/site")  # noqa: S108 - the fixture's own root
#: Every document field whose old spelling differs from its new one.
OLD_NAMES = {
    "api_version",
    "resource_version",
    "creation_timestamp",
    "deletion_timestamp",
    "owner_references",
    "block_owner_deletion",
    "managed_fields",
    "observed_generation",
    "last_transition_time",
    "at_provider",
    "force_destroy",
    "public_access_block",
    "lifecycle_rules",
    "expiration_days",
    "content_base64",
    "block_public_acls",
}

OLD_SITE = """\
api_version: files.reconcile.dev/v1
kind: Directory
metadata: {name: public, labels: {team_name: web_ops}}
spec: {path: out}
---
api_version: files.reconcile.dev/v1
kind: File
metadata: {name: robots}
spec:
  path: out/robots.txt
  content_base64: VXNlci1hZ2VudDogKgo=
"""


class Cli(test_cli.Cli):
    """``reconcile`` in process (test_cli's runner) on the store ``db``."""

    def __init__(self, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
        super().__init__(db.parent, capsys)
        self.db = db

    def bodies(self) -> dict[int, str]:
        """Every event's stored body text, by revision."""
        with sqlite3.connect(self.db) as conn:
            return {
                int(r): str(b)
                for r, b in conn.execute("SELECT revision, body FROM events WHERE body IS NOT NULL")
            }


def keys(data: object) -> Iterator[str]:
    """Every mapping key anywhere in ``data``."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield key
            yield from keys(value)
    elif isinstance(data, list):
        for item in data:
            yield from keys(item)


def old_keys(data: object) -> set[str]:
    """The keys in ``data`` that are a document field's old spelling."""
    return set(keys(data)) & OLD_NAMES


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a new store."""
    return Cli(tmp_path / "state.db", capsys)


@pytest.fixture
def legacy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Cli]:
    """A copy of the store the previous release wrote (opening it migrates the copy)."""
    db = tmp_path / "old.db"
    shutil.copyfile(FIXTURE / "store.db", db)
    shutil.rmtree(LEGACY_ROOT.parent, ignore_errors=True)
    yield Cli(db, capsys)
    shutil.rmtree(LEGACY_ROOT.parent, ignore_errors=True)


class TestOldManifests:
    """Manifests in the old spelling, and mixed ones."""

    def test_applied_with_one_warning_per_document(self, cli: Cli, tmp_path: Path) -> None:
        """Each old-spelling document applies and warns once, naming the new spelling;
        what is stored and shown is in the new one, user data as it was."""
        (tmp_path / "site.yaml").write_text(OLD_SITE)
        code, out, err = cli("apply", "-f", str(tmp_path / "site.yaml"))
        assert code == 0, err
        warnings = [line for line in err.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 2, err
        assert (
            'site.yaml, document 1: Directory "public": written in the old snake_case spelling' in warnings[0]
        )
        assert "api_version -> apiVersion" in warnings[0]
        assert "spec.content_base64 -> spec.contentBase64" in warnings[1]
        code, out, _ = cli("get", "file", "robots", "-o", "json")
        shown = json.loads(out)
        assert shown["apiVersion"] == "files.reconcile.dev/v1"
        assert shown["spec"]["contentBase64"] == "VXNlci1hZ2VudDogKgo="
        assert not old_keys(shown)
        for body in cli.bodies().values():
            stored = json.loads(body)
            assert not old_keys(stored), body
        _, out, _ = cli("get", "directory", "public", "-o", "yaml")
        assert yaml.safe_load(out)["metadata"]["labels"] == {"team_name": "web_ops"}

    def test_applying_again_in_the_new_spelling_changes_nothing(self, cli: Cli, tmp_path: Path) -> None:
        """The same objects in either spelling are the same objects."""
        (tmp_path / "old.yaml").write_text(OLD_SITE)
        (tmp_path / "new.yaml").write_text(
            OLD_SITE.replace("api_version", "apiVersion").replace("content_base64", "contentBase64")
        )
        assert cli("apply", "-f", str(tmp_path / "old.yaml"))[0] == 0
        head = max(cli.bodies())
        code, out, err = cli("apply", "-f", str(tmp_path / "new.yaml"))
        assert code == 0
        assert "warning" not in err
        assert out.count("unchanged") == 2, out
        assert max(cli.bodies()) == head

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                OLD_SITE.split("---\n")[1].replace("api_version", "apiVersion"),
                'spec.content_base64: unknown field (did you mean "contentBase64"?)',
            ),
            (
                OLD_SITE.split("---\n")[1].replace("content_base64", "contentBase64"),
                (
                    'api_version: the old spelling, in a document that also has "spec.contentBase64": '
                    'write "apiVersion"'
                ),
            ),
            (
                (
                    "apiVersion: files.reconcile.dev/v1\napi_version: files.reconcile.dev/v1\nkind: File\n"
                    "metadata: {name: x}\nspec: {path: x, content: x}\n"
                ),
                'api_version: the old spelling, in a document that also has "apiVersion": write "apiVersion"',
            ),
        ],
        ids=["old spec, new envelope", "old envelope, new spec", "both envelopes"],
    )
    def test_mixing_both_spellings_is_refused(
        self, cli: Cli, tmp_path: Path, text: str, expected: str
    ) -> None:
        """Which spelling was meant is the user's call: refused, naming the field."""
        (tmp_path / "mixed.yaml").write_text(text)
        code, _, err = cli("apply", "-f", str(tmp_path / "mixed.yaml"))
        assert code != 0
        assert expected in err
        assert "Traceback" not in err
        assert not cli.db.exists() or not cli.bodies()

    @pytest.mark.parametrize(
        ("field", "hint"),
        [
            ("contentBase46", "contentBase64"),
            ("content_base46", "contentBase64"),
            ("sourceroot", "sourceRoot"),
        ],
    )
    def test_did_you_mean_names_the_new_spelling(
        self, cli: Cli, tmp_path: Path, field: str, hint: str
    ) -> None:
        """A misspelt field, in either spelling, is hinted at in the new one."""
        head = "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: x}\n"
        text = f"{head}spec: {{path: x, {field}: x}}\n"
        (tmp_path / "typo.yaml").write_text(text)
        code, _, err = cli("apply", "-f", str(tmp_path / "typo.yaml"))
        assert code != 0
        assert f'spec.{field}: unknown field (did you mean "{hint}"?)' in err

    async def test_python_api_warns_and_refuses_a_mix(self, client: Client) -> None:
        """``apply(dict)`` warns through :mod:`warnings` and refuses a mix."""
        old = {**widget("w"), "api_version": "example.reconcile.dev/v1"}
        del old["apiVersion"]
        with pytest.warns(
            SpellingWarning, match=r'Widget "w": written in the old snake_case spelling \(api_version'
        ):
            applied = await client.apply(old)
        assert applied.api_version == "example.reconcile.dev/v1"
        mixed = {**widget("m"), "metadata": {"name": "m", "owner_references": []}}
        with pytest.raises(
            InvalidError,
            match=r'metadata\.owner_references: unknown field \(did you mean "ownerReferences"\?\)',
        ):
            await client.apply(mixed)
        assert [o.metadata.name for o in (await client.list("widget")).items] == ["w"]

    async def test_resource_round_trips_through_its_dict(self, client: Client) -> None:
        """``Resource`` to dict is the new spelling, and that dict applies unchanged (its
        spec and generation; a typed Resource declares every field, which its manager
        then owns: server-side apply)."""
        applied = await client.apply(widget("w", labels={"a_b": "c"}))
        data = client.converter.unstructure(applied)
        assert {"apiVersion", "kind", "metadata", "spec", "status"} == set(data)
        assert {"resourceVersion", "creationTimestamp", "ownerReferences", "managedFields"} <= set(
            data["metadata"]
        )
        assert data["metadata"]["labels"] == {"a_b": "c"}
        again = await client.apply(data)
        assert (again.spec, again.metadata.generation) == (applied.spec, applied.metadata.generation)


class TestOldStore:
    """The store the previous release wrote."""

    def test_reads_in_the_new_spelling(self, legacy: Cli) -> None:
        """``get`` shows its objects in the new spelling, user data as it was written."""
        code, out, err = legacy("get", "file", "owned", "-o", "yaml")
        assert code == 0, err
        owned = yaml.safe_load(out)
        assert not old_keys(owned), out
        assert owned["apiVersion"] == "files.reconcile.dev/v1"
        reference = owned["metadata"]["ownerReferences"][0]
        assert (reference["kind"], reference["controller"], reference["blockOwnerDeletion"]) == (
            "Directory",
            True,
            True,
        )
        assert owned["status"]["observedGeneration"] == 1
        assert {c["type"] for c in owned["status"]["conditions"]} == {"Ready", "Synced"}
        assert owned["status"]["atProvider"]["size"] == len("owned\n")
        _, out, _ = legacy("get", "bucket", "assets", "-o", "json")
        bucket = json.loads(out)
        assert not old_keys(bucket)
        assert bucket["spec"]["forceDestroy"] is True
        assert bucket["spec"]["publicAccessBlock"]["blockPublicAcls"] is True
        assert bucket["spec"]["lifecycleRules"][0]["expirationDays"] == 7
        assert bucket["spec"]["tags"] == {"cost_center": "web_team"}  # user data, as written
        _, out, _ = legacy("get", "directory", "public", "-o", "json")
        public = json.loads(out)["metadata"]
        assert public["labels"]["team_name"] == "web_ops"
        assert public["annotations"]["example.com/some_note"] == "kept_as_is"

    def test_history_is_in_the_new_spelling(self, legacy: Cli) -> None:
        """What each old event changed is named in the new spelling."""
        code, out, err = legacy("history", "file", "gone", "-o", "json")
        assert code == 0, err
        events = (
            [json.loads(line) for line in out.splitlines()]
            if not out.lstrip().startswith("[")
            else json.loads(out)
        )
        paths = {change["path"] for event in events for change in event["changes"]}
        assert "status.atProvider.mode" in paths
        assert not any("at_provider" in p or "observed_generation" in p for p in paths)

    def test_verifies(self, legacy: Cli) -> None:
        """``verify --deep`` decodes every old event."""
        code, out, err = legacy("verify", "--deep")
        assert code == 0, err
        assert "ok:" in out

    def test_converges_without_rewriting_its_log(self, legacy: Cli, tmp_path: Path) -> None:
        """An old manifest applied again is unchanged; ``run`` converges; the old events
        stay byte for byte, and every new one is in the new spelling."""
        before = legacy.bodies()
        manifests = tmp_path / "again.yaml"
        manifests.write_text((FIXTURE / "site.yaml").read_text().split("---\n")[0])
        code, out, err = legacy("--root", str(LEGACY_ROOT), "apply", "-f", str(manifests))
        assert code == 0, err
        assert "unchanged" in out, out
        assert "api_version -> apiVersion" in err
        code, out, err = legacy("--root", str(LEGACY_ROOT), "run", "--once", "--timeout", "60")
        assert code == 0, out + err
        assert (LEGACY_ROOT / "public" / "owned.txt").read_text() == "owned\n"
        assert (LEGACY_ROOT / "public" / "index.html").exists()
        assert not (LEGACY_ROOT / "public" / "gone.txt").exists()
        after = legacy.bodies()
        assert {r: after[r] for r in before} == before  # the old events, byte for byte
        written = [json.loads(after[r]) for r in after if r not in before]
        assert written, "converging wrote nothing"
        assert all("apiVersion" in body and not old_keys(body) for body in written)
        code, out, err = legacy("verify", "--deep")
        assert code == 0, err

    def test_writes_one_by_one_and_prunes_leave_no_mixed_body(self, legacy: Cli, tmp_path: Path) -> None:
        """``apply --no-atomic`` (``apply_many``'s default) and its prune read the stored
        objects in the new spelling too: an unchanged object stays unchanged, and what is
        written is in the new spelling only."""
        before = legacy.bodies()
        public = (FIXTURE / "site.yaml").read_text().split("---\n")[0]
        manifests = tmp_path / "public.yaml"
        manifests.write_text(public.replace("api_version", "apiVersion"))
        root = ("--root", str(LEGACY_ROOT))
        code, out, err = legacy(*root, "apply", "--no-atomic", "-f", str(manifests))
        assert code == 0, err
        assert "unchanged" in out, out
        assert legacy.bodies() == before
        code, out, err = legacy(
            *root, "apply", "--no-atomic", "-l", "app=site", "--prune", "-f", str(manifests)
        )
        assert code == 0, err
        after = legacy.bodies()
        written = [json.loads(after[r]) for r in after if r not in before]
        assert len(written) == 2, out  # index and robots marked for deletion
        assert all(not old_keys(body) and body["metadata"]["deletionTimestamp"] for body in written)


@attrs.frozen
class NamedSpec:
    """A spec whose identity and immutable field has an underscore."""

    bucket_name: str
    max_size: int = 1


NAMED = Kind(
    "named.example.dev/v1",
    "Named",
    NamedSpec,
    immutable=("bucket_name",),
    identity=("bucket_name",),
    behaviour=Behaviour.IDEMPOTENT_BY_NAME,
)


async def test_an_old_body_is_checked_in_the_new_spelling(tmp_path: Path) -> None:
    """An object the previous release stored (an underscore in its immutable and identity
    field) is not refused as changed by the same object in the new spelling, and its
    claim on the external resource still holds against another object."""
    registry = KindRegistry()
    registry.register(NAMED)
    key = ObjectKey("named.example.dev", "Named", "default", "one")
    old = {
        "api_version": "named.example.dev/v1",
        "kind": "Named",
        "metadata": {
            "name": "one",
            "namespace": "default",
            "uid": "u-1",
            "generation": 1,
            "resource_version": None,
            "creation_timestamp": "2026-01-01T00:00:00.000000Z",
            "deletion_timestamp": None,
            "labels": {},
            "annotations": {},
            "finalizers": [],
            "owner_references": [],
            "managed_fields": {},
        },
        "spec": {"bucket_name": "b1", "max_size": 1},
        "status": {"observed_generation": 0, "conditions": []},
    }
    async with connect(str(tmp_path / "named.db"), kinds=registry) as client:
        identity = "spec.bucket_name=b1"  # what the previous release recorded
        await client.store.write(key, lambda _: Put("Created", old, identity=identity), actor="old")
        new = {"apiVersion": "named.example.dev/v1", "kind": "Named", "metadata": {"name": "one"}}
        same = {**new, "spec": {"bucketName": "b1", "maxSize": 1}}
        results = await client.apply_many([same], check_all_first=True)
        assert [r.outcome for r in results] == ["unchanged"], results
        other = {**new, "metadata": {"name": "two"}, "spec": {"bucketName": "b1"}}
        with pytest.raises(InvalidError, match="already declared"):
            await client.apply(other)
        got = await client.get("named", "one")
        assert got.spec == NamedSpec("b1", 1)


# -- the converter, for every kind -------------------------------------------------------

_TEXT = st.text(alphabet="ab_-.", min_size=0, max_size=4)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | _TEXT,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_TEXT, inner, max_size=2),
    max_leaves=4,
)


def strategy(type_: Any) -> st.SearchStrategy[Any]:
    """Values of ``type_`` (attrs classes built with their validators off: the property is
    about spelling, not validation)."""
    if type_ is Any:
        return _JSON
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Union or origin is types.UnionType:
        return st.one_of(*(strategy(a) for a in args))
    if type_ is type(None):
        return st.none()
    if isinstance(type_, type) and issubclass(type_, enum.Enum):
        return st.sampled_from(list(type_))
    if type_ is bool:
        return st.booleans()
    if type_ is int:
        return st.integers(-3, 3)
    if type_ is float:
        return st.floats(-3, 3, allow_nan=False)
    if type_ is str:
        return _TEXT
    if type_ is datetime.datetime:
        return st.datetimes(timezones=st.just(datetime.UTC))
    if origin in (dict, typing.Mapping):
        return st.dictionaries(_TEXT, strategy(args[1]), max_size=2)
    if origin is tuple:
        return st.lists(strategy(args[0]), max_size=2).map(tuple)
    if origin is list:
        return st.lists(strategy(args[0]), max_size=2)
    if isinstance(type_, type) and attrs.has(type_):
        hints = typing.get_type_hints(type_)
        fields = {f.name: strategy(hints[f.name]) for f in attrs.fields(type_) if f.init}
        return st.fixed_dictionaries(fields).map(lambda values: _build(type_, values))
    raise AssertionError(f"no strategy for {type_!r}")


def _build(cls: type, values: dict[str, Any]) -> Any:
    with attrs.validators.disabled():
        return cls(**values)


def camel_keys(data: Any, type_: Any, path: str = "") -> Iterator[str]:
    """The path of every key of an attrs class's mapping in ``data`` that is not its
    field's camelCase name (map keys of user data are not looked at)."""
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if data is None or type_ is Any:
        return
    if origin is typing.Union or origin is types.UnionType:
        for member in args:
            if member is not type(None):
                yield from camel_keys(data, member, path)
                return
    if isinstance(type_, type) and attrs.has(type_):
        hints = typing.get_type_hints(type_)
        expected = {camel(f.name): hints[f.name] for f in attrs.fields(type_)}
        for key, value in data.items():
            if key not in expected or "_" in key:
                yield f"{path}.{key}"
            else:
                yield from camel_keys(value, expected[key], f"{path}.{key}")
    elif origin in (dict, typing.Mapping):
        for key, value in data.items():
            yield from camel_keys(value, args[1], f"{path}[{key!r}]")
    elif origin in (tuple, list):
        for index, value in enumerate(data):
            yield from camel_keys(value, args[0], f"{path}[{index}]")


def every_kind() -> list[Kind]:
    """The example kinds and every installed provider's."""
    return [*example_kinds(), *KindRegistry.from_entry_points()]


@pytest.mark.parametrize("kind", every_kind(), ids=lambda k: f"{k.kind}.{k.api_group}")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_is_exact_and_camel_case(kind: Kind, data: st.DataObject) -> None:
    """For any metadata, spec and status of the kind: structure(unstructure(x)) == x,
    every key written is camelCase (user data's keys aside), and the same value in the
    old spelling reads as the new."""
    converter = make_converter()
    for type_ in (ObjectMeta, kind.spec_type, kind.status_type):
        value = data.draw(strategy(type_))
        plain = converter.unstructure(value, type_)
        assert list(camel_keys(plain, type_)) == []
        with attrs.validators.disabled():
            assert converter.structure(json.loads(json.dumps(plain)), type_) == value
        # The old spelling of the same value reads back the same (an old store's body).
        old = respell_document({"spec": _snake(plain, type_)}, type_).data["spec"]
        assert old == json.loads(json.dumps(plain))


def _snake(data: Any, type_: Any) -> Any:
    """``data`` (new spelling) in the old spelling: the previous release's bodies."""
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if data is None or type_ is Any:
        return data
    if origin is typing.Union or origin is types.UnionType:
        member = next(a for a in args if a is not type(None))
        return _snake(data, member)
    if isinstance(type_, type) and attrs.has(type_):
        hints = typing.get_type_hints(type_)
        by_key = {camel(f.name): f.name for f in attrs.fields(type_)}
        return {by_key[k]: _snake(v, hints[by_key[k]]) for k, v in data.items()}
    if origin in (dict, typing.Mapping):
        return {k: _snake(v, args[1]) for k, v in data.items()}
    if origin in (tuple, list):
        return [_snake(v, args[0]) for v in data]
    return data
