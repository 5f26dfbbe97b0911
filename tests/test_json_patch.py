"""RFC 6902 JSON patch (``reconcile.api.patching``) and the merge patch between two
documents (``reconcile.api.merging.merge_diff``): the RFC's own examples, every failure
named by its operation, and the invariants as properties."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconcile.api.changing import same
from reconcile.api.merging import json_equal, merge_diff, merge_patch
from reconcile.api.patching import json_patch
from reconcile.errors import InvalidError


def failure(document: Any, operations: Any) -> str:
    """The one field error a patch that fails raises, as ``path: message``."""
    with pytest.raises(InvalidError) as caught:
        json_patch(document, operations)
    assert len(caught.value.errors) == 1
    return str(caught.value.errors[0])


class TestRfcExamples:
    """RFC 6902 appendix A, example by example."""

    @pytest.mark.parametrize(
        ("document", "operations", "expected"),
        [
            ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
            (
                {"foo": ["bar", "baz"]},
                [{"op": "add", "path": "/foo/1", "value": "qux"}],
                {"foo": ["bar", "qux", "baz"]},
            ),
            ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
            ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
            (
                {"baz": "qux", "foo": "bar"},
                [{"op": "replace", "path": "/baz", "value": "boo"}],
                {"baz": "boo", "foo": "bar"},
            ),
            (
                {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
                [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
                {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
            ),
            (
                {"foo": ["all", "grass", "cows", "eat"]},
                [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
                {"foo": ["all", "cows", "eat", "grass"]},
            ),
            (
                {"baz": "qux", "foo": ["a", 2, "c"]},
                [
                    {"op": "test", "path": "/baz", "value": "qux"},
                    {"op": "test", "path": "/foo/1", "value": 2},
                ],
                {"baz": "qux", "foo": ["a", 2, "c"]},
            ),
            (
                {"foo": "bar"},
                [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
                {"foo": "bar", "child": {"grandchild": {}}},
            ),
            (
                {"foo": "bar"},
                [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
                {"foo": "bar", "baz": "qux"},
            ),
            (
                {"foo": ["bar"]},
                [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
                {"foo": ["bar", ["abc", "def"]]},
            ),
            ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
            ({"foo": None}, [{"op": "test", "path": "/foo", "value": None}], {"foo": None}),
            ({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": 1}, "c": {"b": 1}}),
            ({"a": 1}, [{"op": "replace", "path": "", "value": [1]}], [1]),
            ({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": 1}),
        ],
    )
    def test_example(self, document: Any, operations: list[Any], expected: Any) -> None:
        """Each example gives the RFC's result, and the document given is left as it was."""
        before = copy.deepcopy(document)
        assert json_patch(document, operations) == expected
        assert document == before

    def test_copy_is_deep(self) -> None:
        """A copied value is a copy: changing it later leaves the original alone."""
        result = json_patch(
            {"a": {"b": 1}},
            [{"op": "copy", "from": "/a", "path": "/c"}, {"op": "replace", "path": "/c/b", "value": 2}],
        )
        assert result == {"a": {"b": 1}, "c": {"b": 2}}


class TestFailures:
    """Every failure names its operation and why; nothing is half applied."""

    @pytest.mark.parametrize(
        ("document", "operations", "expected"),
        [
            (
                {"foo": "bar"},
                [{"op": "test", "path": "/baz", "value": "bar"}],
                "patch[0]: /baz: no such member",
            ),
            (
                {"baz": "qux"},
                [{"op": "test", "path": "/baz", "value": "bar"}],
                'patch[0]: test /baz: is "qux", not "bar"',
            ),
            (
                {"foo": "bar"},
                [{"op": "add", "path": "/baz/bat", "value": "qux"}],
                "patch[0]: /baz/bat: /baz does not exist",
            ),
            ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}], "patch[0]: /nope: no such member"),
            (
                {"foo": "bar"},
                [{"op": "replace", "path": "/nope", "value": 1}],
                "patch[0]: /nope: no such member",
            ),
            (
                {"foo": [1]},
                [{"op": "add", "path": "/foo/2", "value": 1}],
                "past the end of the list (1 items)",
            ),
            ({"foo": [1]}, [{"op": "remove", "path": "/foo/1"}], "past the end of the list"),
            ({"foo": [1, 2]}, [{"op": "remove", "path": "/foo/01"}], "'01' is not an index of the list"),
            ({"foo": [1]}, [{"op": "replace", "path": "/foo/-", "value": 1}], "'-' is not an index"),
            (
                {"a": {"b": 1}},
                [{"op": "move", "from": "/a", "path": "/a/b/c"}],
                "cannot be moved into itself",
            ),
            ({"a": 1}, [{"op": "copy", "from": "/nope", "path": "/b"}], "patch[0]: /nope: no such member"),
            ({"a": 1}, [{"op": "add", "path": "a", "value": 1}], "'a' is not a JSON pointer"),
            ({"a": 1}, [{"op": "add", "path": "/b"}], "patch[0]: add needs 'value'"),
            ({"a": 1}, [{"op": "move", "path": "/b"}], "patch[0]: move needs 'from'"),
            ({"a": 1}, [{"op": "merge", "path": "/b"}], "op: 'merge' is not one of add, remove"),
            ({"a": 1}, [{"path": "/b"}], "patch[0]: op: missing is not one of"),
            ({"a": 1}, ["add"], "patch[0]: expected an operation"),
            ({"a": 1}, [{"op": "remove", "path": ""}], "the whole document cannot be removed"),
            ({"a": "x"}, [{"op": "add", "path": "/a/b", "value": 1}], "the parent is a string"),
            ({"a": True}, [{"op": "test", "path": "/a", "value": 1}], "test /a: is true, not 1"),
            (
                {"/": 9, "~1": 10},
                [{"op": "test", "path": "/~01", "value": "10"}],
                'test /~01: is 10, not "10"',
            ),
        ],
    )
    def test_failure(self, document: Any, operations: list[Any], expected: str) -> None:
        """The error names the operation's index and the reason."""
        assert expected in failure(document, operations)

    def test_all_or_nothing(self) -> None:
        """A failing operation after good ones fails the whole patch, and the document
        given is untouched."""
        document = {"spec": {"size": 1}}
        message = failure(
            document,
            [
                {"op": "replace", "path": "/spec/size", "value": 2},
                {"op": "test", "path": "/spec/size", "value": 3},
            ],
        )
        assert message == "patch[1]: test /spec/size: is 2, not 3"
        assert document == {"spec": {"size": 1}}

    def test_not_a_list(self) -> None:
        """A JSON patch is a list of operations."""
        assert failure({}, {"op": "add"}) == "patch: a JSON patch is a list of operations"


class TestJsonEqual:
    """JSON's equality, not Python's."""

    def test_booleans_are_not_numbers(self) -> None:
        """true is not 1; 1 is 1.0; nested too."""
        assert not json_equal(True, 1)  # noqa: FBT003 - the value under test
        assert not json_equal({"a": [True]}, {"a": [1]})
        assert json_equal(1, 1.0)
        assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
        assert not json_equal({"a": 1}, {"a": 1, "b": 2})


class TestSame:
    """What counts as a change of a stored document: its JSON text, keys in any order."""

    def test_what_the_text_tells_apart(self) -> None:
        """true is not 1, nor 1 1.0 (a change to Kubernetes too); key order is no change;
        keys that are not strings compare as JSON does."""
        assert not same({"x": True}, {"x": 1})
        assert not same({"a": [1]}, {"a": [1.0]})
        assert not same({"a": 1}, {"a": 2})
        assert same({"a": 1, "b": {"c": [1, None]}}, {"b": {"c": [1, None]}, "a": 1})
        assert same({1: "a"}, {1: "a"})
        assert not same({1: True}, {1: 1})


_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
_NO_NULLS = st.recursive(
    st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


class TestMergeDiff:
    """merge_diff is the merge patch from one document to another."""

    @given(
        st.dictionaries(st.text(max_size=3), _JSON, max_size=4),
        st.dictionaries(st.text(max_size=3), _NO_NULLS, max_size=4),
    )
    def test_patch_of_the_diff_is_the_new_document(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """merge_patch(old, merge_diff(old, new)) == new (for a new document without
        nulls: a merge patch cannot set one)."""
        assert json_equal(merge_patch(old, merge_diff(old, new)), new)

    @given(st.dictionaries(st.text(max_size=3), _JSON, max_size=4))
    def test_no_change_is_an_empty_patch(self, document: dict[str, Any]) -> None:
        """A document compared with itself gives the empty patch."""
        assert merge_diff(document, copy.deepcopy(document)) == {}

    def test_removed_and_nulled(self) -> None:
        """A key removed is null in the patch; one set to null where it was null is no
        change."""
        assert merge_diff({"a": 1, "b": None, "c": {"d": 1, "e": 2}}, {"b": None, "c": {"d": 1}}) == {
            "a": None,
            "c": {"e": None},
        }
