"""Admission: every bad manifest is refused with its field path, and nothing is stored."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest
from helpers import widget

from reconcile import Client, InvalidError, Kind, KindRegistry, NotFoundError, doc_field
from reconcile.api.admission import Admission
from reconcile.model import Condition, ConditionStatus, make_converter
from reconcile.store import ADMISSION_HEADROOM, MAX_OBJECT_BYTES
from reconcile.store.encoding import dumps


def record_set(**spec: Any) -> dict[str, Any]:
    """A RecordSet manifest."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "RecordSet",
        "metadata": {"name": "rs"},
        "spec": {"zone": "example.org", **spec},
    }


def _deep(levels: int) -> list[Any]:
    """A list nested ``levels`` deep, built without recursion."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


BAD = {
    "not a mapping": (["a", "list"], "expected a mapping"),
    "unknown kind": ({**widget("w"), "kind": "Gadget"}, 'kind: unknown kind "Gadget"'),
    "unknown apiVersion": (
        {**widget("w"), "apiVersion": "example.reconcile.dev/v9"},
        "apiVersion: unknown",
    ),
    "missing kind": ({"apiVersion": "x/v1", "metadata": {"name": "a"}}, "kind: required"),
    "misspelt envelope": (
        {**widget("w"), "apiversion": "example.reconcile.dev/v1"},
        'apiversion: unknown field (did you mean "apiVersion"?)',
    ),
    "both spellings of the envelope": (
        {**widget("w"), "api_version": "example.reconcile.dev/v1"},
        'api_version: the old spelling, in a document that also has "apiVersion": write "apiVersion"',
    ),
    "missing metadata": ({**widget("w"), "metadata": None}, "metadata: required mapping"),
    "missing name": ({**widget("w"), "metadata": {}}, "metadata.name: required field missing"),
    "upper-case name": (widget("Web_1"), "metadata.name: must consist of lower case"),
    "long name": (widget("a" * 254), "metadata.name: must be no more than 253"),
    "name with a trailing newline": (widget("abc\n"), "metadata.name: must consist of lower case"),
    "namespace with a trailing newline": (
        widget("w", namespace="prod\n"),
        "metadata.namespace: must consist",
    ),
    "label key with a trailing newline": (
        widget("w", labels={"app\n": "x"}),
        "metadata.labels['app\\n']: key name part",
    ),
    "label value with a trailing newline": (
        widget("w", labels={"app": "web\n"}),
        "metadata.labels['app']: must be empty or",
    ),
    "bad namespace": (widget("w", namespace="a.b"), "metadata.namespace: must consist"),
    "bad label key": (widget("w", labels={"bad key": "x"}), "metadata.labels['bad key']: key name part"),
    "bad label value": (widget("w", labels={"k": "no spaces"}), "metadata.labels['k']: must be empty or"),
    "non-string label": (widget("w", labels={"k": 1}), "metadata.labels['k']: expected string, got integer"),
    "unknown metadata field": (widget("w", colour="x"), "metadata.colour: unknown field"),
    "wrong spec type": ({**widget("w"), "spec": {"size": "3"}}, "spec.size: expected integer, got string"),
    "bool is not int": ({**widget("w"), "spec": {"size": True}}, "spec.size: expected integer, got boolean"),
    "spec not a mapping": ({**widget("w"), "spec": [1]}, "spec: expected a mapping"),
    "unknown spec field": ({**widget("w"), "spec": {"size": 1, "sise": 2}}, "spec.sise: unknown field"),
    "missing required spec field": ({**widget("w"), "spec": {}}, "spec.size: required field missing"),
    "validator": ({**widget("w"), "spec": {"size": -1}}, "spec.size: must be >= 0"),
    "nested path": (
        record_set(
            records=[
                {"name": "a", "type": "A"},
                {"name": "b", "type": "A"},
                {"name": "c", "type": "A", "ttl": -5},
            ]
        ),
        "spec.records[2].ttl: must be >= 0",
    ),
    "nested type": (record_set(records=[{"name": "a", "type": "MX"}]), "spec.records[0].type: must be in"),
    "kind validate hook": (
        record_set(records=[{"name": "a", "type": "A"}, {"name": "a", "type": "A"}]),
        "spec.records[1]: duplicate A record 'a'",
    ),
    "list expected": (record_set(records=5), "spec.records: expected a list"),
    "nested 990 deep": (widget("w", annotations={"a": _deep(990)}), "nested deeper than 64 levels"),
}


class TestAdmission:
    """Bad input: a clear error with the field path, and nothing stored."""

    @pytest.mark.parametrize("case", sorted(BAD))
    async def test_bad_manifest(self, client: Client, case: str) -> None:
        """Each bad manifest raises InvalidError naming the field, and the log stays empty."""
        manifest, message = BAD[case]
        with pytest.raises(InvalidError) as caught:
            await client.apply(manifest)
        assert message in str(caught.value)
        assert caught.value.errors, "every rejection carries field errors"
        assert await client.revision() == 0

    async def test_all_errors_reported_at_once(self, client: Client) -> None:
        """Several problems come back together, each with its own path."""
        manifest = {**widget("Bad"), "spec": {"size": "x", "extra": 1}}
        with pytest.raises(InvalidError) as caught:
            await client.apply(manifest)
        paths = sorted(e.path for e in caught.value.errors)
        assert paths == ["metadata.name", "spec.extra", "spec.size"]

    async def test_unknown_fields_do_not_hide_the_other_problems(self, client: Client) -> None:
        """An unknown field is reported beside the validators' and the name's refusals,
        in one InvalidError (cattrs builds nothing when a key is unknown, so the
        validators used to stay silent)."""
        manifest = {**widget("Bad"), "spec": {"size": -1, "colour": "red"}}
        manifest["metadata"] = {**manifest["metadata"], "lables": {}}
        with pytest.raises(InvalidError) as caught:
            await client.apply(manifest)
        assert sorted(e.path for e in caught.value.errors) == [
            "metadata.lables",
            "metadata.name",
            "spec.colour",
            "spec.size",
        ]
        assert await client.revision() == 0

    async def test_object_too_large(self, client: Client) -> None:
        """An object over 1.5 MiB is refused and nothing is stored."""
        huge = widget("big", annotations={})
        huge["spec"] = {"size": 1, "tags": ["x" * 1024] * (MAX_OBJECT_BYTES // 1024 + 1)}
        with pytest.raises(InvalidError, match="bytes serialized"):
            await client.apply(huge)
        assert await client.revision() == 0

    async def test_object_just_under_the_store_limit_is_refused(self, client: Client) -> None:
        """An object that fits the store but not its status as well: refused at admission,
        saying how big it is and what may be applied."""
        tags = ["x" * 1024] * (MAX_OBJECT_BYTES // 1024 - 8)
        with pytest.raises(InvalidError, match=r"bytes serialized; at most \d+ may be applied"):
            await client.apply({**widget("big"), "spec": {"size": 1, "tags": tags}})
        assert await client.revision() == 0

    async def test_an_object_at_the_limit_can_always_be_deleted(self, client: Client) -> None:
        """The largest admissible object takes a status that fills the store's limit to
        the last bytes; deleting it (which adds a deletion timestamp) still succeeds."""
        tags = ["x" * 1024] * ((MAX_OBJECT_BYTES - ADMISSION_HEADROOM) // 1030)
        await client.apply({**widget("big", finalizers=["example.dev/x"]), "spec": {"size": 1, "tags": tags}})
        obj = await client.get("widget", "big")

        async def with_message(message: str) -> Any:
            condition = Condition("Ready", ConditionStatus.FALSE, "Filling", message)
            status = attrs.evolve(obj.status, conditions=(condition,))
            return await client.update_status(attrs.evolve(obj, status=status), force=True)

        def size(resource: Any) -> int:
            return len(dumps(client.converter.unstructure(resource)).encode())

        small = await with_message("m")
        obj = await with_message("m" * (MAX_OBJECT_BYTES - size(small) - 9))
        assert MAX_OBJECT_BYTES - len(dumps(client.converter.unstructure(obj)).encode()) <= 10
        await client.delete("widget", "big")
        await client.remove_finalizer("widget", "big", "example.dev/x")
        with pytest.raises(NotFoundError):
            await client.get("widget", "big")

    async def test_too_large_update_keeps_old_state(self, client: Client) -> None:
        """A too-large change to an existing object leaves it as it was."""
        await client.apply(widget("w", 1))
        huge = widget("w", 2)
        huge["spec"]["tags"] = ["x" * 1024] * (MAX_OBJECT_BYTES // 1024 + 1)
        with pytest.raises(InvalidError):
            await client.apply(huge)
        assert (await client.get("widget", "w")).spec.size == 1
        assert (await client.verify()).ok

    async def test_batch_neighbours_unaffected(self, client: Client) -> None:
        """A write refused inside a group-commit batch does not fail its neighbours."""
        good = [client.apply(widget(f"w{i}")) for i in range(5)]
        bad = client.apply(widget("w0", resourceVersion=999))
        results = await asyncio.gather(*good, bad, return_exceptions=True)
        assert all(not isinstance(r, BaseException) for r in results[:5])
        assert isinstance(results[5], Exception)
        assert len((await client.list("widget")).items) == 5


@attrs.frozen
class _Shelf:
    """A spec declared with ``reconcile.doc_field`` only, as the provider how-to says."""

    slots: int = doc_field("How many slots.", default=1, validator=attrs.validators.ge(1))
    label: str = doc_field(
        "What is on it.",
        default="books",
        validator=[attrs.validators.instance_of(str), attrs.validators.in_(("books", "maps"))],
    )


class TestDocField:
    """``reconcile.doc_field`` takes attrs validators in place of ``attrs.field``."""

    def test_a_doc_field_validator_refuses_with_the_path(self) -> None:
        """doc_field(validator=one or a list) is checked at admission, with its path."""
        kind = Kind("shelves.example.dev/v1", "Shelf", _Shelf)
        admission = Admission(KindRegistry([kind]), make_converter())
        manifest = {"apiVersion": "shelves.example.dev/v1", "kind": "Shelf", "metadata": {"name": "s"}}
        assert admission.admit({**manifest, "spec": {"slots": 2}}).spec == _Shelf(slots=2)
        for spec, path in (({"slots": 0}, "spec.slots"), ({"label": "toys"}, "spec.label")):
            with pytest.raises(InvalidError) as caught:
                admission.admit({**manifest, "spec": spec})
            assert [e.path for e in caught.value.errors] == [path]
        assert attrs.fields(_Shelf).slots.metadata["doc"] == "How many slots."
