"""The bulk apply's one admission pass (``Admission.admit_many``): documents of several
kinds admitted together, each refusal in its own document's result with its field path,
nothing stored under ``atomic``; the one walk that checks every value, and its exact
fallback."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import widget

from reconcile import Client, InvalidError, NotFoundError
from reconcile.errors import SpellingWarning
from reconcile.model.validation import MAX_DEPTH, plain_and_storable


def record_set(name: str, record_type: str = "A") -> dict[str, Any]:
    """A RecordSet manifest with one record."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "RecordSet",
        "metadata": {"name": name},
        "spec": {
            "zone": "example.com",
            "records": [{"name": "www", "type": record_type, "value": "1.2.3.4"}],
        },
    }


def mixed() -> list[dict[str, Any]]:
    """Two kinds, the invalid one (a record type no kind allows) third of five."""
    return [widget("w1", 1), record_set("r1"), record_set("r2", "MX"), widget("w2", 2), record_set("r3")]


def fields(error: Exception | None) -> list[str]:
    """The field paths an InvalidError names."""
    assert isinstance(error, InvalidError)
    return [e.path for e in error.errors]


class TestMixedBatch:
    """A batch of two kinds with refused documents among them."""

    async def test_the_invalid_document_is_refused_at_its_index_with_its_field(self, client: Client) -> None:
        """Without atomic, the others are stored; the refused one is the third result and
        names its field."""
        results = await client.apply_many(mixed())
        assert [r.outcome for r in results] == ["created", "created", "refused", "created", "created"]
        assert fields(results[2].error) == ["spec.records[0].type"]
        assert (await client.get("recordset", "r3")).spec.zone == "example.com"
        with pytest.raises(NotFoundError):
            await client.get("recordset", "r2")

    async def test_atomic_stores_nothing(self, client: Client) -> None:
        """With atomic, the same batch stores nothing: the refusal at its index, every
        other document skipped."""
        results = await client.apply_many(mixed(), atomic=True)
        assert [r.outcome for r in results] == ["skipped", "skipped", "refused", "skipped", "skipped"]
        assert fields(results[2].error) == ["spec.records[0].type"]
        assert await client.revision() == 0

    async def test_every_refusal_keeps_its_own_index(self, client: Client) -> None:
        """Several refused documents, of both kinds, each in its own place with its own
        fields (a negative size, a bad name, a document nested too deep)."""
        deep: dict[str, Any] = {}
        inner = deep
        for _ in range(MAX_DEPTH + 1):
            inner["x"] = {}
            inner = inner["x"]
        too_deep = widget("deep")
        too_deep["spec"] = {"size": 1, "extra": deep}
        documents = [widget("ok"), widget("neg", -1), record_set("Bad_Name"), too_deep, record_set("ok")]
        results = await client.apply_many(documents, check_all_first=True)
        assert [r.outcome for r in results] == ["skipped", "refused", "refused", "refused", "skipped"]
        assert fields(results[1].error) == ["spec.size"]
        assert fields(results[2].error) == ["metadata.name"]
        assert "nested deeper than" in str(results[3].error)
        assert await client.revision() == 0

    async def test_an_old_spelling_in_the_batch_warns_and_is_stored(self, client: Client) -> None:
        """A document in the old snake_case spelling among new ones: stored, with its
        warning; the others are not warned about."""
        old = widget("old")
        old["api_version"] = old.pop("apiVersion")
        with pytest.warns(SpellingWarning) as caught:
            results = await client.apply_many([widget("new"), old, record_set("r1")])
        assert [r.outcome for r in results] == ["created", "created", "created"]
        assert len([w for w in caught if issubclass(w.category, SpellingWarning)]) == 1

    async def test_admitted_documents_mix_with_fresh_ones(self, client: Client) -> None:
        """Documents the caller admitted already keep their places among those the batch
        admits."""
        given = client.admission.admit(record_set("given"))
        results = await client.apply_many([widget("w1"), given, widget("w2", -1), widget("w3")])
        assert [r.outcome for r in results] == ["created", "created", "refused", "created"]
        assert fields(results[2].error) == ["spec.size"]

    async def test_admit_many_answers_each_document(self, client: Client) -> None:
        """admit_many: one outcome per document, in order, the refusal as its error."""
        outcomes = client.admission.admit_many([widget("a"), record_set("b", "MX"), widget("c")])
        assert [type(o).__name__ for o in outcomes] == ["Admitted", "InvalidError", "Admitted"]
        assert fields(outcomes[1]) == ["spec.records[0].type"]  # type: ignore[arg-type]


class TestOneWalk:
    """``plain_and_storable``: what it vouches for, and what it leaves to the exact checks."""

    @pytest.mark.parametrize(
        "data",
        [
            {"a": "text", "b": [1, 2.5, True, None, {"c": -(2**63)}]},
            {"spec": {"size": 2**63 - 1}},
            [],
        ],
    )
    def test_plain_storable_data_passes(self, data: object) -> None:
        """Plain data within range and depth: the one walk answers True."""
        assert plain_and_storable(data, MAX_DEPTH)

    @pytest.mark.parametrize(
        "data",
        [
            {"a": "caf\u00e9"},  # storable, but not ASCII: the exact check decides
            {"a": "\ud800"},
            {"a": 2**63},
            {"a": -(2**63) - 1},
            {"\u00e9": 1},
            {1: "integer key"},
            {"a": (1, 2)},
            "a scalar document",
        ],
    )
    def test_anything_else_is_left_to_the_exact_checks(self, data: object) -> None:
        """A value the walk does not vouch for: False (the exact checks then run)."""
        assert not plain_and_storable(data, MAX_DEPTH)

    def test_depth_is_the_limit_of_check_depth(self) -> None:
        """Nested exactly MAX_DEPTH levels passes; one more does not."""
        data: dict[str, Any] = {}
        inner = data
        for _ in range(MAX_DEPTH - 1):
            inner["x"] = {}
            inner = inner["x"]
        assert plain_and_storable(data, MAX_DEPTH)
        inner["x"] = {}
        assert not plain_and_storable(data, MAX_DEPTH)

    async def test_non_ascii_text_is_stored_and_a_lone_surrogate_refused(self, client: Client) -> None:
        """Through the fallback: storable non-ASCII text is admitted, a lone surrogate
        refused with its path, in the same batch."""
        good = widget("good", labels={"app": "x"}, annotations={"note": "caf\u00e9"})
        bad = widget("bad", annotations={"note": "\ud800"})
        results = await client.apply_many([good, bad])
        assert [r.outcome for r in results] == ["created", "refused"]
        assert fields(results[1].error) == ["metadata.annotations.note"]
