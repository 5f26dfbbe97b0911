"""Rehearsing writes: a dry run (Kubernetes' ``dryRun=All``) that does everything a write
does but store it.

A write is a pure mutation of the stored object (:mod:`reconcile.store.contract`), so a
dry run needs no second copy of any rule: :class:`RehearsingStore` reads the object from
the store below, runs the write's own mutation on it, and answers with what the store
would have kept, without appending anything. Every check inside the mutation (the
resource version, immutable fields, finalizers of an object being deleted, a conflict
with another field manager) runs exactly as it would. Checks the store itself makes at
commit (an identity claimed by another object, the size of the serialized object) are
not rehearsed.

A client over it is :meth:`reconcile.api.Client.acting_as` with ``dry_run=True``.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from reconcile.errors import NotFoundError
from reconcile.model.meta import ObjectKey
from reconcile.store.contract import Mutation, Note, Remove, StoredObject, WriteResult

if TYPE_CHECKING:
    from reconcile.store.contract import EventStore

__all__ = ["RehearsingStore", "rehearse", "rehearsing"]


def rehearse(key: ObjectKey, current: StoredObject | None, mutation: Mutation) -> WriteResult:
    """What writing ``mutation`` on ``current`` would do, without doing it: the object it
    would leave (its resource version still the stored one; None for a new object's, as
    Kubernetes answers a dry-run create) and whether it would write."""
    outcome = mutation(current)
    revision = current.resource_version if current is not None else 0
    if outcome is None:
        return WriteResult(revision, current, written=False)
    changes = (outcome,) if not isinstance(outcome, Sequence) else tuple(outcome)
    if not changes:
        return WriteResult(revision, current, written=False)
    result = current
    for change in changes:
        if isinstance(change, Note):
            if result is None:
                raise NotFoundError(f"{key} not found")
            continue
        if isinstance(change, Remove):
            result = None
            continue
        body = copy.deepcopy(change.body)
        meta = body.setdefault("metadata", {})
        meta["resourceVersion"] = None if current is None else current.resource_version
        uid = str(meta.get("uid") or "")
        result = StoredObject(key, uid, revision, body)
    return WriteResult(revision, result, written=True)


class RehearsingStore:
    """An :class:`~reconcile.store.EventStore` whose writes are rehearsed
    (:func:`rehearse`) against the store below and never stored; everything else
    (reads, watches, maintenance) is the store below's."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def url(self) -> str:
        """The store below's URL."""
        return self._store.url

    async def write(
        self,
        key: ObjectKey,
        mutation: Mutation,
        *,
        actor: str,  # noqa: ARG002 - nobody is recorded: nothing is
        user: str | None = None,  # noqa: ARG002
    ) -> WriteResult:
        """What the write would do (nothing is stored)."""
        return rehearse(key, await self._store.read(key), mutation)

    async def write_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> builtins.list[WriteResult]:
        """Each write rehearsed in order, a later one of a key seeing the earlier's
        result; the first refusal is raised, as a real ``write_many`` rolls back."""
        seen: dict[ObjectKey, StoredObject | None] = {}
        results = []
        for key, mutation in writes:
            current = seen[key] if key in seen else await self._store.read(key)
            result = rehearse(key, current, mutation)
            seen[key] = result.object
            results.append(result)
        del actor, user
        return results

    def submit_many(
        self, writes: Sequence[tuple[ObjectKey, Mutation]], *, actor: str, user: str | None = None
    ) -> builtins.list[asyncio.Future[WriteResult]]:
        """One future per write, each rehearsed on its own."""
        return [asyncio.ensure_future(self.write(key, m, actor=actor, user=user)) for key, m in writes]


def rehearsing(store: EventStore) -> EventStore:
    """``store`` with its writes rehearsed, typed as the store it stands for."""
    return cast("EventStore", RehearsingStore(store))
