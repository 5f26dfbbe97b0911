"""Hostile values: a string with no UTF-8 encoding (a lone surrogate) or an integer past
the signed 64-bit range is refused at admission with its field path, for every kind,
through the Python API and the command line; nothing is stored and nothing raises a bare
TypeError/UnicodeEncodeError from an encoder."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile import InvalidError, connect
from reconcile.cli import main
from reconcile.model.validation import INT64_MAX, INT64_MIN, unstorable

SURROGATE = "\udcff"
HUGE = 2**64
RANGE = "integer outside the signed 64-bit range"
TEXT = "not valid Unicode text: lone surrogate \\udcff"


def file(**spec: Any) -> dict[str, Any]:
    """A File manifest."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": "page"},
        "spec": {"path": "page.txt", "content": "hello", **spec},
    }


def bucket(**spec: Any) -> dict[str, Any]:
    """An S3 Bucket manifest."""
    return {
        "apiVersion": "s3.reconcile.dev/v1",
        "kind": "Bucket",
        "metadata": {"name": "hostile-bucket"},
        "spec": spec,
    }


def s3_object(**spec: Any) -> dict[str, Any]:
    """An S3 Object manifest."""
    return {
        "apiVersion": "s3.reconcile.dev/v1",
        "kind": "Object",
        "metadata": {"name": "hostile-object"},
        "spec": {"bucket": "hostile-bucket", "key": "index.html", "content": "hi", **spec},
    }


def with_metadata(manifest: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """``manifest`` with more metadata."""
    result = copy.deepcopy(manifest)
    result["metadata"].update(metadata)
    return result


#: Each hostile value the issue names: (manifest, field path, reason).
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "File content": (file(content=f"a{SURROGATE}"), "spec.content", TEXT),
    "File path": (file(path=f"p{SURROGATE}.txt"), "spec.path", TEXT),
    "annotation value": (
        with_metadata(file(), annotations={"note": SURROGATE}),
        "metadata.annotations.note",
        TEXT,
    ),
    "annotation key": (
        with_metadata(file(), annotations={f"k{SURROGATE}": "v"}),
        "metadata.annotations['k\\udcff']",
        f"key {TEXT}",
    ),
    "S3 Object key": (s3_object(key=f"k{SURROGATE}"), "spec.key", TEXT),
    "expirationDays": (
        bucket(lifecycleRules=[{"id": "old", "expirationDays": HUGE}]),
        "spec.lifecycleRules[0].expirationDays",
        RANGE,
    ),
    "maxAgeSeconds": (
        bucket(corsRules=[{"allowedMethods": ["GET"], "allowedOrigins": ["*"], "maxAgeSeconds": HUGE}]),
        "spec.corsRules[0].maxAgeSeconds",
        RANGE,
    ),
    "resourceVersion": (with_metadata(file(), resourceVersion=HUGE), "metadata.resourceVersion", RANGE),
    "resourceVersion just past signed 64 bits": (
        with_metadata(file(), resourceVersion=INT64_MAX + 1),
        "metadata.resourceVersion",
        RANGE,
    ),
    "negative integer past 64 bits": (
        bucket(lifecycleRules=[{"id": "old", "expirationDays": INT64_MIN - 1}]),
        "spec.lifecycleRules[0].expirationDays",
        RANGE,
    ),
}


def rows(db: Path) -> int:
    """How many events the store holds (0 when there is no database)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


class TestPythonApi:
    """``Client.apply(dict)`` and ``apply_many`` refuse hostile values with the field path."""

    @pytest.mark.parametrize("case", list(CASES))
    async def test_apply_refuses_with_the_field_path(self, tmp_path: Path, case: str) -> None:
        """Client.apply raises InvalidError naming the field and the reason; nothing is stored."""
        manifest, path, reason = CASES[case]
        db = tmp_path / "state.db"
        async with connect(db) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(manifest)
            assert [e.path for e in caught.value.errors] == [path]
            assert caught.value.errors[0].message.startswith(reason)
            assert str(caught.value).encode("utf-8")  # the message itself prints
            assert await client.store.revision() == 0

    async def test_apply_many_refuses_only_the_hostile_document(self, tmp_path: Path) -> None:
        """In a bulk apply with check_all_first, the hostile document is refused and nothing is stored."""
        async with connect(tmp_path / "state.db") as client:
            good = bucket()
            hostile = CASES["expirationDays"][0]
            results = await client.apply_many([good, hostile], check_all_first=True)
            assert [r.outcome for r in results] == ["skipped", "refused"]
            assert await client.store.revision() == 0

    async def test_patch_refuses_a_hostile_annotation(self, tmp_path: Path) -> None:
        """A metadata patch carrying a lone surrogate is refused with its path; the object is unchanged."""
        async with connect(tmp_path / "state.db") as client:
            created = await client.apply(bucket())
            with pytest.raises(InvalidError) as caught:
                await client.patch(
                    "Bucket", "hostile-bucket", {"metadata": {"annotations": {"note": SURROGATE}}}
                )
            assert [e.path for e in caught.value.errors] == ["metadata.annotations.note"]
            assert await client.store.revision() == created.metadata.resource_version

    def test_storable_values_pass(self) -> None:
        """The limits themselves and ordinary non-ASCII text are storable."""
        assert unstorable({"a": [INT64_MIN, INT64_MAX, "é ☃ 𝄞", True, 1.5, None]}) == []


class TestCommandLine:
    """``reconcile apply -f`` of JSON and YAML manifests: exit 2 with the field path, nothing stored."""

    @pytest.mark.parametrize("case", list(CASES))
    def test_json_manifest(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
        r"""A JSON manifest (its \udcff escapes are lone surrogates) is refused: exit 2, the path."""
        manifest, path, reason = CASES[case]
        source = tmp_path / "hostile.json"
        source.write_text(json.dumps(manifest))  # ensure_ascii: the surrogate as \\udcff
        db = tmp_path / "state.db"
        code = main(["--db", str(db), "apply", "-f", str(source)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"document 1: {manifest['kind']} " in err
        assert f": {path}: {reason}" in err
        assert "Traceback" not in err
        assert rows(db) == 0

    @pytest.mark.parametrize("case", ["expirationDays", "maxAgeSeconds", "resourceVersion"])
    def test_yaml_manifest(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
        """A YAML manifest with an integer past 64 bits is refused: exit 2, the path, nothing stored."""
        manifest, path, reason = CASES[case]
        source = tmp_path / "hostile.yaml"
        source.write_text(yaml.safe_dump(manifest))
        db = tmp_path / "state.db"
        code = main(["--db", str(db), "apply", "-f", str(source)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f": {path}: {reason}" in err
        assert rows(db) == 0

    def test_yaml_surrogate_escape(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        r"""A YAML "\udcff" escape is refused by the reader: exit 2, naming the line, nothing stored."""
        source = tmp_path / "hostile.yaml"
        source.write_text(
            "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: page}\n"
            'spec: {path: p, content: "\\udcff"}\n'
        )
        db = tmp_path / "state.db"
        code = main(["--db", str(db), "apply", "-f", str(source)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "invalid Unicode character escape" in err
        assert "line 4" in err
        assert rows(db) == 0

    def test_a_hostile_document_among_good_ones_stores_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """One hostile document in a folder refuses the whole apply."""
        folder = tmp_path / "manifests"
        folder.mkdir()
        (folder / "a.json").write_text(json.dumps(bucket()))
        (folder / "b.json").write_text(json.dumps(CASES["S3 Object key"][0]))
        db = tmp_path / "state.db"
        code = main(["--db", str(db), "apply", "-f", str(folder)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert 'b.json, document 1: Object "hostile-object": spec.key: ' in err
        assert rows(db) == 0
