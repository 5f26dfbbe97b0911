"""Printer columns: a kind's own columns for ``reconcile get``, read from the object by
a JSONPath-like path parsed when the kind is declared."""

from __future__ import annotations

import pytest

from reconcile import PrinterColumn

DOCUMENT = {
    "metadata": {"name": "docs", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"title": "Docs", "pages": ["a.html", "b.html"], "limits": {"size": 3}, "public": True},
    "status": {
        "conditions": [
            {"type": "Synced", "status": "True", "reason": "ReconcileSuccess"},
            {"type": "Ready", "status": "False", "reason": "Waiting"},
        ]
    },
}


class TestPaths:
    """What a path reads."""

    @pytest.mark.parametrize(
        ("path", "text"),
        [
            (".spec.title", "Docs"),
            ("{.spec.title}", "Docs"),
            (".spec.pages", "a.html,b.html"),
            (".spec.pages[1]", "b.html"),
            (".spec.pages[-1]", "b.html"),
            (".spec.pages[7]", ""),
            (".spec.limits", '{"size":3}'),
            (".spec.public", "true"),
            (".spec.missing.deeper", ""),
            ('.status.conditions[?(@.type=="Ready")].reason', "Waiting"),
            (".status.conditions[?(@.type=='Synced')].status", "True"),
            ('.status.conditions[?(@.type=="Gone")].reason', ""),
        ],
    )
    def test_values(self, path: str, text: str) -> None:
        """Fields, indexes, filters by a key's value; absent is an empty cell."""
        assert PrinterColumn("X", path).text(DOCUMENT) == text

    @pytest.mark.parametrize("path", ["spec.title", ".spec..title", ".spec[x]", ".spec.pages[?(@.a>1)]"])
    def test_a_path_it_cannot_read_fails_when_declared(self, path: str) -> None:
        """A mistake in a path is a ValueError at declaration, naming the path."""
        with pytest.raises(ValueError, match="column path"):
            PrinterColumn("X", path)

    def test_the_type_is_checked(self) -> None:
        """Only kubectl's types."""
        with pytest.raises(ValueError, match="type must be one of"):
            PrinterColumn("X", ".spec.title", type="text")  # type: ignore[arg-type]
