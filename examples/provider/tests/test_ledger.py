"""The ledger provider passes the conformance kit: the test file a provider project
copies (``pip install -e '.[test]'`` then ``pytest``, with the ``pyproject.toml`` beside
``ledger.py``). reconcile's own suite runs it too (``tests/test_example_provider.py``)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconcile import Resource
from reconcile.testing.conformance import CHECKS, Harness

sys.path.insert(0, str(Path(__file__).parents[1]))  # ledger.py, when not installed

from ledger import Ledger, LedgerProvider


class LedgerOutside:
    """Edits the ledger file directly, as a person would."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def exists(self, resource: Resource[Any, Any]) -> bool:
        """Whether the key is in the file."""
        return resource.spec.key in self.ledger.read()

    async def delete(self, resource: Resource[Any, Any]) -> None:
        """Remove the key by hand."""
        entries = self.ledger.read()
        del entries[resource.spec.key]
        self.ledger.write(entries)

    async def drift(self, resource: Resource[Any, Any]) -> None:
        """Edit the value by hand."""
        entries = self.ledger.read()
        entries[resource.spec.key]["value"] = "edited by hand"
        self.ledger.write(entries)

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """Somebody else's entry under the same key."""
        entries = self.ledger.read()
        entries[manifest["spec"]["key"]] = {"value": "theirs", "owner": "someone-else"}
        self.ledger.write(entries)

    async def count(self) -> int:
        """How many keys there are."""
        return len(self.ledger.read())


def entry(name: str) -> dict[str, Any]:
    """An Entry manifest."""
    return {
        "apiVersion": "ledger.example.dev/v1",
        "kind": "Entry",
        "metadata": {"name": name},
        "spec": {"key": name, "value": "hello"},
    }


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
async def test_ledger_provider_conformance(
    check: Callable[[Harness], Awaitable[None]], tmp_path: Path
) -> None:
    """Every conformance check passes for the example provider."""
    path = tmp_path / "ledger.json"
    harness = Harness(
        LedgerProvider(), LedgerOutside(Ledger(path)), entry, tmp_path / "state.db", {"path": str(path)}
    )
    await check(harness)
