"""Kubernetes' omitempty on the wire: null optional fields and empty metadata are left
out, only where leaving them out reads back as the same value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from reconcile.model.omitting import omit_empty_metadata, omit_null_fields
from reconcile.model.serde import make_converter
from tests.http_helpers import api

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"


@attrs.frozen
class Inner:
    """A nested attrs class."""

    note: str | None = None
    size: int = 0


@attrs.frozen
class Spec:
    """A spec with each kind of field omission treats differently."""

    optional: int | None = None
    defaulted: int | None = 5
    inner: Inner | None = None
    items: list[Inner] = attrs.Factory(list)
    free_form: dict[str, Any] = attrs.Factory(dict)
    long_name: str | None = None
    rules: tuple[Inner, ...] | None = None
    seeded: list[int] = attrs.Factory(lambda: [1])
    notes: tuple[str, ...] = ()


def test_only_null_fields_whose_default_is_null_go() -> None:
    """A null whose default is something else stays (leaving it out would change it);
    nested attrs classes are looked into, in a field and in each item of a list; a
    free-form mapping is data, its nulls kept; keys are the document's (camelCase)."""
    value = {
        "optional": None,
        "defaulted": None,
        "inner": {"note": None, "size": 1},
        "items": [{"note": None, "size": 2}, {"note": "x", "size": 3}],
        "freeForm": {"kept": None},
        "longName": None,
        "rules": [{"note": None, "size": 4}],
    }
    assert omit_null_fields(value, Spec) == {
        "defaulted": None,
        "inner": {"size": 1},
        "items": [{"size": 2}, {"note": "x", "size": 3}],
        "freeForm": {"kept": None},
        "rules": [{"size": 4}],
    }
    assert value["optional"] is None  # (the input is not changed)
    assert omit_null_fields({"a": None}, None) == {"a": None}
    assert omit_null_fields({"a": None}, dict) == {"a": None}


def test_empty_containers_go_only_where_the_default_is_empty() -> None:
    """An empty list or mapping whose default is an empty container goes (``conditions:
    []``); one whose default holds something stays (leaving it out would refill it)."""
    value = {"items": [], "freeForm": {}, "seeded": [], "notes": [], "inner": {"note": "x", "size": 0}}
    assert omit_null_fields(value, Spec) == {"seeded": [], "inner": {"note": "x", "size": 0}}


def test_empty_metadata_goes() -> None:
    """Null metadata and empty labels, annotations, finalizers, owner references go."""
    meta = {"name": "a", "labels": {}, "annotations": {}, "finalizers": [], "deletionTimestamp": None}
    assert omit_empty_metadata({**meta, "ownerReferences": []}) == {"name": "a"}
    assert omit_empty_metadata({"labels": {"app": "x"}}) == {"labels": {"app": "x"}}


_inner = st.builds(Inner, note=st.none() | st.text(max_size=3), size=st.integers(0, 9))
_specs = st.builds(
    Spec,
    optional=st.none() | st.integers(),
    defaulted=st.none() | st.integers(),
    inner=st.none() | _inner,
    items=st.lists(_inner, max_size=3),
    free_form=st.dictionaries(st.text(max_size=3), st.none() | st.integers(), max_size=3),
    long_name=st.none() | st.text(max_size=3),
    rules=st.none() | st.lists(_inner, max_size=2).map(tuple),
    seeded=st.lists(st.integers(), max_size=2),
    notes=st.lists(st.text(max_size=2), max_size=2).map(tuple),
)


@given(_specs)
def test_what_is_left_out_reads_back_as_it_was(spec: Spec) -> None:
    """Structured again, the document without its omitted fields is the same spec."""
    converter = make_converter()
    document = converter.unstructure(spec)
    assert converter.structure(omit_null_fields(document, Spec), Spec) == spec


async def test_a_file_on_the_wire_and_sent_back(tmp_path: Path) -> None:
    """GET leaves out a File's null optional fields and its empty annotations; a PUT of
    that very document changes nothing (no event appended)."""
    manifest = {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": "index", "labels": {"app": "site"}},
        "spec": {"path": "index.html", "content": "hello\n"},
    }
    async with api(tmp_path) as (client, http):
        await client.apply(manifest, origin=tmp_path / "site.yaml")
        document = (await http.get(f"{FILES}/index")).json()
        revision = await client.revision()
        response = await http.put(f"{FILES}/index", json=document)
        assert response.status_code == 200, response.text
        assert await client.revision() == revision
    assert "contentBase64" not in document["spec"]
    assert "annotations" not in document["metadata"]
    assert "ownerReferences" not in document["metadata"]
    assert document["metadata"]["labels"] == {"app": "site"}
