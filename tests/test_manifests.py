"""Reading manifests: multi-document YAML and JSON, and hostile input."""

from __future__ import annotations

from collections import UserDict
from pathlib import Path

import pytest

from reconcile import InvalidError, load_manifests, read_manifests
from reconcile.model.manifests import MAX_DEPTH, check_depth

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


class TestManifests:
    """Parsing."""

    def test_multi_document_yaml(self) -> None:
        """Every document of a YAML stream is read, empty documents skipped, in order."""
        docs = load_manifests("kind: A\n---\n---\nkind: B\n", source="m.yaml")
        assert [d.data for d in docs] == [{"kind": "A"}, {"kind": "B"}]
        assert docs[1].location == "m.yaml, document 2"

    def test_json_object_list_and_list_kind(self) -> None:
        """JSON may hold one object, a list of objects, or a kind: List."""
        assert len(load_manifests('{"kind": "A"}')) == 1
        assert len(load_manifests('[{"kind": "A"}, {"kind": "B"}]')) == 2
        assert len(load_manifests('{"kind": "List", "items": [{"kind": "A"}, {"kind": "B"}]}')) == 2

    @pytest.mark.parametrize("suffix", [".yaml", ".yml"])
    def test_a_yaml_file_starting_with_a_brace_is_yaml(self, tmp_path: Path, suffix: str) -> None:
        """A .yaml/.yml file whose first document is a flow mapping, followed by more
        documents, is read as the YAML it is (not as broken JSON)."""
        path = tmp_path / f"site{suffix}"
        path.write_text("{kind: A, metadata: {name: a}}\n---\nkind: B\n")
        assert [d.data for d in read_manifests(path)] == [
            {"kind": "A", "metadata": {"name": "a"}},
            {"kind": "B"},
        ]
        assert [d.data for d in load_manifests('{"kind": "C"}', source=str(path))] == [{"kind": "C"}]

    def test_folder_is_read_recursively(self, tmp_path: Path) -> None:
        """A folder stands for every .yaml, .yml and .json file under it, sorted."""
        (tmp_path / "sub").mkdir()
        (tmp_path / "b.yaml").write_text("kind: B\n")
        (tmp_path / "sub" / "a.json").write_text('{"kind": "A"}')
        (tmp_path / "notes.txt").write_text("ignored")
        assert [d.data for d in read_manifests(tmp_path)] == [{"kind": "B"}, {"kind": "A"}]


class TestHostileInput:
    """Bad and hostile manifests are refused with a clear message."""

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("a: 1\n---\nb: [1\n", "invalid YAML: did not find expected ',' or ']' (line 4, column 1)"),
            ('{"a": 1,}', "invalid JSON"),
            ('{"a": 1, "b": 2, "a": 3}', "invalid JSON: duplicate key 'a'"),
            (b"\xff\xfe", "not UTF-8"),
            ("key: value\n  bad indent: x\n", "invalid YAML"),
            ("spec:\n  size: 1\n  size: 2\n", "invalid YAML: duplicate key 'size' (line 3, column 3)"),
        ],
    )
    def test_malformed(self, text: str | bytes, message: str) -> None:
        """Malformed YAML or JSON names the problem and where (JSON read from a .json
        file: a .yaml file is YAML, where ``{"a": 1,}`` is a valid flow mapping)."""
        source = "in.json" if "JSON" in message else "in.yaml"
        with pytest.raises(InvalidError) as caught:
            load_manifests(text, source=source)
        assert message in str(caught.value)
        assert str(caught.value).startswith(f"{source}: ")

    @pytest.mark.parametrize(
        "text",
        [
            "!!python/object/apply:os.system ['touch {marker}']",
            "x: !!python/object/new:os.system ['touch {marker}']",
            "x: !!python/name:os.system",
            "x: !!python/module:os",
        ],
    )
    def test_python_tags_are_refused_not_run(self, tmp_path: Path, text: str) -> None:
        """Tags that would construct Python objects are refused, and never executed."""
        marker = tmp_path / "pwned"
        with pytest.raises(InvalidError, match="only plain data is allowed"):
            load_manifests(text.format(marker=marker))
        assert not marker.exists()

    def test_alias_bomb_is_refused_quickly(self) -> None:
        """A billion-laughs document is refused by the node budget, not expanded."""
        with pytest.raises(InvalidError, match="alias bomb"):
            load_manifests(BOMB)

    def test_unreadable_path(self, tmp_path: Path) -> None:
        """A missing or unreadable manifest path is an InvalidError naming the file."""
        with pytest.raises(InvalidError, match=r"missing\.yaml: cannot read"):
            read_manifests(tmp_path / "missing.yaml")


@pytest.mark.parametrize("container", ["dict", "list", "mapping"])
def test_check_depth_boundary(container: str) -> None:
    """Containers nested exactly MAX_DEPTH deep pass; one level more is refused, for plain
    dicts and lists and for any Mapping."""

    def nested(levels: int) -> object:
        value: object = "leaf"
        for _ in range(levels):
            value = (
                {"a": value, "b": 1}
                if container == "dict"
                else [1, value]
                if container == "list"
                else UserDict(a=value)
            )
        return value

    check_depth(nested(MAX_DEPTH))
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        check_depth(nested(MAX_DEPTH + 1))
