"""The conformance kit's harness: how a check reaches behind the engine's back
(:class:`Outside`, which the provider's author writes) and runs a Runtime with only that
provider on a fake clock (:class:`Harness`). The checks themselves are in
:mod:`reconcile.testing.conformance`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from reconcile.errors import NotFoundError
from reconcile.model.external import ExternalClient, Provider
from reconcile.model.kinds import Kind
from reconcile.model.resource import AnyResource
from reconcile.runtime.running import Runtime
from reconcile.testing.clocks import FakeClock, let_run
from reconcile.testing.counting import CountingProvider

__all__ = ["DEADLINE", "FAKE_PATIENCE", "POLL", "Harness", "Outside", "annotated"]


POLL = 60.0
DEADLINE = 60.0  # real seconds: only a hang comes near this
FAKE_PATIENCE = 200  # fake seconds a check lets the engine take


class Outside(Protocol):
    """The external system, reached directly (not through the engine)."""

    async def exists(self, resource: AnyResource) -> bool:
        """Whether the resource's external counterpart exists."""

    async def delete(self, resource: AnyResource) -> None:
        """Delete it out of band."""

    async def drift(self, resource: AnyResource) -> None:
        """Change it out of band so that observe reports it out of date."""

    async def plant_foreign(self, manifest: Mapping[str, Any]) -> None:
        """Create, as somebody else would, the external resource this manifest names."""

    async def count(self) -> int:
        """How many external resources exist (to find leaks and duplicates)."""

    # Optional: ``async def replace(self, resource, manifest) -> None``, put somebody
    # else's resource in place of ``resource`` as that system's users would (default:
    # ``delete`` then ``plant_foreign``). A system whose ownership mark lives apart from
    # the resource (DNS) removes the mark too: a mark left in place still says "ours".


@attrs.define
class Harness:
    """One provider under test: how to reach its system, and a manifest per name."""

    provider: Provider
    outside: Outside
    manifest: Callable[[str], dict[str, Any]]
    store: Path
    config: Mapping[str, Any] = attrs.Factory(dict)
    clock: FakeClock = attrs.Factory(FakeClock)
    runtime: Runtime | None = None
    _counting: CountingProvider | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Runtime]:
        """A Runtime with only this provider, on the fake clock."""
        self._counting = CountingProvider(self.provider)
        runtime = Runtime(
            self.store,
            providers=[self._counting],
            provider_config={self.provider.name: self.config},
            clock=self.clock,
            wall_clock=self.clock,
            poll_interval=POLL,
            resync_period=None,
        )
        try:
            async with runtime:
                await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
                self.runtime = runtime
                yield runtime
        finally:
            self.runtime = None
            counted = self._counting.client
            # First: a wrong returned observation explains whatever else failed.
            if counted is not None and counted.disagreements:
                raise AssertionError(counted.disagreements)

    @property
    def calls(self) -> collections.Counter[str]:
        """The engine's calls to the provider so far, by operation."""
        if self._counting is None or self._counting.client is None:
            return collections.Counter()
        return self._counting.client.calls

    @property
    def writes(self) -> int:
        """External writes the engine made so far."""
        return self.calls["create"] + self.calls["update"] + self.calls["delete"]

    async def connect(self) -> ExternalClient:
        """A client of the provider, outside the engine."""
        return await self.provider.connect(self.config)

    def kind_name(self, manifest: Mapping[str, Any]) -> str:
        """The manifest's kind."""
        return str(manifest["kind"])

    def kind_of(self, manifest: Mapping[str, Any]) -> Kind:
        """The provider's Kind the manifest declares."""
        return next(
            kind
            for kind in self.provider.kinds
            if (kind.api_version, kind.kind) == (manifest["apiVersion"], manifest["kind"])
        )

    async def idle(self) -> None:
        """Let every controller finish what is queued or in flight."""
        assert self.runtime is not None
        async with asyncio.timeout(DEADLINE):
            for _ in range(3):
                for controller in self.runtime.controllers.values():
                    stats = controller.queue.statistics
                    turn = 0
                    while stats().depth or stats().processing:
                        await let_run(turn)
                        turn += 1
                for _ in range(20):
                    await asyncio.sleep(0)

    async def until(self, predicate: Callable[[], Awaitable[bool]]) -> None:
        """Let the engine run, advancing the clock a second at a time, until it holds;
        fail after ``FAKE_PATIENCE`` seconds of fake time."""
        async with asyncio.timeout(DEADLINE):
            for _ in range(FAKE_PATIENCE):
                await self.idle()
                if await predicate():
                    return
                self.clock.advance(1.0)
        what = getattr(predicate, "__name__", "the condition")
        msg = f"{what} did not hold within {FAKE_PATIENCE} s of fake time"
        raise AssertionError(msg)

    async def until_gone(self, kind: str, name: str, namespace: str) -> None:
        """Let the engine run until the object is deleted from the store."""
        assert self.runtime is not None
        client = self.runtime.client

        async def gone() -> bool:
            try:
                await client.get(kind, name, namespace=namespace)
            except NotFoundError:
                return True
            return False

        await self.until(gone)

    async def ready(self, name: str, manifest: Mapping[str, Any]) -> AnyResource:
        """Wait until Ready, letting time pass as needed (eventual consistency)."""
        assert self.runtime is not None
        runtime = self.runtime
        kind = self.kind_name(manifest)
        namespace = manifest.get("metadata", {}).get("namespace", "default")

        async def is_ready() -> bool:
            try:
                obj = await runtime.client.get(kind, name, namespace=namespace)
            except NotFoundError:
                return False
            ready = obj.status.condition("Ready")
            return bool(
                ready is not None
                and ready.status.value == "True"
                and obj.status.observed_generation == obj.metadata.generation
            )

        await self.until(is_ready)
        return await runtime.client.get(kind, name, namespace=namespace)


def annotated(manifest: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """``manifest`` with ``annotations`` added (a copy)."""
    metadata = dict(manifest.get("metadata", {}))
    metadata["annotations"] = {**metadata.get("annotations", {}), **annotations}
    return {**manifest, "metadata": metadata}
