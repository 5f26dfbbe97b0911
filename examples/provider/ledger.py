"""A provider written from scratch with reconcile's public API only: ``Entry`` resources
kept as keys of a JSON file (the "external system").

Each entry is stored as ``{"value": ..., "owner": <uid>}``: the owner marker is how the
engine tells our entries from ones somebody else wrote. The key is the identity, so it is
deterministic: an interrupted create is simply retried.

Register it for discovery in your package's pyproject.toml::

    [project.entry-points."reconcile.providers"]
    ledger = "ledger:provider"
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import reconcile
from reconcile.errors import NotOwnedError, PermanentError


@attrs.frozen
class EntrySpec:
    """One key of the ledger and the value it should hold."""

    key: str = attrs.field(validator=attrs.validators.min_len(1))
    value: str = ""


ENTRY = reconcile.Kind(
    "ledger.example.dev/v1",
    "Entry",
    EntrySpec,
    reconcile.ManagedStatus,
    behaviour=reconcile.Behaviour.IDEMPOTENT_BY_NAME,
)


class Ledger:
    """The external system: a JSON file of entries, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, dict[str, Any]]:
        """Every entry."""
        if not self.path.exists():
            return {}
        data: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        return data

    def write(self, entries: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the file's content atomically."""
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(entries, sort_keys=True))
        temporary.replace(self.path)


class LedgerClient:
    """observe / create / update / delete, each idempotent."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def observe(self, resource: reconcile.Resource[EntrySpec, Any]) -> reconcile.Observation:
        """Read the entry; never write."""
        entry = self.ledger.read().get(resource.spec.key)
        if entry is None:
            return reconcile.Observation(exists=False)
        differences = []
        if entry["value"] != resource.spec.value:
            differences.append(f"value: {entry['value']!r} -> {resource.spec.value!r}")
        return reconcile.Observation.present(
            differences, observed={"value": entry["value"]}, owner=entry.get("owner")
        )

    async def create(self, resource: reconcile.Resource[EntrySpec, Any]) -> str | None:
        """Add the entry, marked as ours."""
        entries = self.ledger.read()
        existing = entries.get(resource.spec.key)
        if existing is not None:
            if existing.get("owner") != resource.metadata.uid:
                raise NotOwnedError(f"{resource.spec.key} belongs to someone else")
            return None
        entries[resource.spec.key] = {"value": resource.spec.value, "owner": resource.metadata.uid}
        self.ledger.write(entries)
        return None

    async def update(
        self,
        resource: reconcile.Resource[EntrySpec, Any],
        observation: reconcile.Observation,  # noqa: ARG002 - the contract passes it; we need only the spec
    ) -> None:
        """Set the value."""
        entries = self.ledger.read()
        if resource.spec.key not in entries:
            raise PermanentError(f"{resource.spec.key} disappeared during update")
        entries[resource.spec.key]["value"] = resource.spec.value
        self.ledger.write(entries)

    async def delete(self, resource: reconcile.Resource[EntrySpec, Any]) -> None:
        """Remove the entry; a missing one is fine."""
        entries = self.ledger.read()
        if entries.pop(resource.spec.key, None) is not None:
            self.ledger.write(entries)

    async def close(self) -> None:
        """Nothing to release."""


class LedgerProvider:
    """The provider: its name, its kinds, and connect(config)."""

    name = "ledger"

    @property
    def kinds(self) -> Sequence[reconcile.Kind]:
        """Only Entry."""
        return (ENTRY,)

    async def connect(self, config: Mapping[str, Any]) -> reconcile.ExternalClient:
        """``config["path"]`` names the ledger file."""
        return LedgerClient(Ledger(Path(config["path"])))


provider = LedgerProvider()
