"""Counting what the engine asks of a provider, for the conformance kit: calls by
operation, and every observation a write returned checked against a real observe."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from reconcile.errors import NotOwnedError
from reconcile.model.external import (
    ANNOTATION_EXTERNAL_NAME,
    Created,
    ExternalClient,
    Observation,
    Provider,
    bind_store,
)
from reconcile.model.kinds import Kind
from reconcile.model.resource import AnyResource

__all__ = ["CountingClient", "CountingProvider"]


class CountingClient:
    """Wraps a provider's client and counts its calls (a create refused with
    NotOwnedError, which changed nothing, as ``create.refused``, a delete so refused as
    ``delete.refused``). When a call returns the
    observation that holds after it, observes at once (uncounted) and keeps each
    disagreement in :attr:`disagreements`."""

    def __init__(self, inner: ExternalClient) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()
        self.disagreements: list[str] = []

    async def _check(self, call: str, resource: AnyResource, returned: Observation | None) -> None:
        if returned is None:
            return
        seen = await self.inner.observe(resource)
        said = (returned.exists, returned.exists and returned.up_to_date, returned.owner)
        found = (seen.exists, seen.exists and seen.up_to_date, seen.owner)
        if said != found:
            self.disagreements.append(
                f"{call} of {resource.key} returned (exists, up_to_date, owner) {said}, observe saw {found}"
            )
        if None not in (returned.identity, seen.identity) and returned.identity != seen.identity:
            # (None: the provider did not look; two identities must name the same resource.)
            self.disagreements.append(
                f"{call} of {resource.key} returned identity {returned.identity!r}, "
                f"observe saw {seen.identity!r}"
            )

    def bind_store(self, identity: str, key: bytes = b"") -> None:
        """Passed on to the inner client (when it takes the store's identity)."""
        bind_store(self.inner, identity, key)

    @property
    def writes(self) -> int:
        """create + update + delete calls."""
        return self.calls["create"] + self.calls["update"] + self.calls["delete"]

    async def observe(self, resource: AnyResource) -> Observation:
        """Counted observe."""
        self.calls["observe"] += 1
        return await self.inner.observe(resource)

    async def create(self, resource: AnyResource) -> str | Created | None:
        """Counted create."""
        try:
            answer = await self.inner.create(resource)
        except NotOwnedError:
            self.calls["create.refused"] += 1
            raise
        self.calls["create"] += 1
        created = Created.of(answer)
        if created.external_name:  # what the engine will know it by from now on
            annotations = {**resource.metadata.annotations, ANNOTATION_EXTERNAL_NAME: created.external_name}
            resource = attrs.evolve(
                resource, metadata=attrs.evolve(resource.metadata, annotations=annotations)
            )
        await self._check("create", resource, created.observation)
        return answer

    async def update(self, resource: AnyResource, observation: Observation) -> Observation | None:
        """Counted update."""
        self.calls["update"] += 1
        after = await self.inner.update(resource, observation)
        await self._check("update", resource, after)
        return after

    async def delete(self, resource: AnyResource) -> Observation | None:
        """Counted delete (one refused with NotOwnedError, which changed nothing, as
        ``delete.refused``)."""
        try:
            after = await self.inner.delete(resource)
        except NotOwnedError:
            self.calls["delete.refused"] += 1
            raise
        self.calls["delete"] += 1
        await self._check("delete", resource, after)
        return after

    async def close(self) -> None:
        """Close the inner client."""
        await self.inner.close()


class CountingProvider:
    """A provider whose client is a :class:`CountingClient`."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.client: CountingClient | None = None

    @property
    def kinds(self) -> Sequence[Kind]:
        """The inner provider's kinds."""
        return self.inner.kinds

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:
        """A counting client of the inner provider's."""
        self.client = CountingClient(await self.inner.connect(config))
        return self.client
