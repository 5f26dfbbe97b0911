"""Manifests and waits shared by the tests."""

from __future__ import annotations


def widget(name: str, size: int = 1, **metadata: object) -> dict[str, object]:
    """A Widget manifest."""
    return {
        "api_version": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": {"size": size},
    }
