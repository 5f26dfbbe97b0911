"""The children memo answers "declared as before, unchanged since" only for the very
declaration last applied: the manager, force, origin and owner a ``Children`` applies
under are part of it, even when a caller changes them between two applies of a pass."""

from __future__ import annotations

from collections.abc import AsyncIterator

import attrs
import pytest
from helpers import cached_widgets, widget

from reconcile import Client
from reconcile.controller import CachedClient
from reconcile.controller.owning import AppliedMemo, Children
from reconcile.errors import AlreadyOwnedError
from reconcile.testing import FakeClock


@pytest.fixture
async def cached(client: Client, clock: FakeClock) -> AsyncIterator[CachedClient]:
    """A CachedClient over a running, synced Widget informer."""
    async with cached_widgets(client, clock) as found:
        yield found


async def test_a_manager_changed_between_two_applies_applies_again(cached: CachedClient) -> None:
    """The same child declared again after ``manager`` changed: applied under the new one."""
    owner = await cached.apply(widget("owner"))
    memo: AppliedMemo = {}
    children = Children(cached, owner, manager="one", memo=memo)
    await children.apply(widget("child", 2))
    assert (await children.apply(widget("child", 2))).metadata.managed_fields.keys() == {"one"}
    children.manager = "two"
    again = await children.apply(widget("child", 2))
    assert "two" in again.metadata.managed_fields


async def test_an_owner_changed_between_two_applies_applies_again(cached: CachedClient) -> None:
    """The same child declared for another owner (another uid): applied, and refused as
    another's child, not answered from the memo with the first owner's reference."""
    first, second = await cached.apply(widget("first")), await cached.apply(widget("second"))
    memo: AppliedMemo = {}
    children = Children(cached, first, manager="one", memo=memo)
    await children.apply(widget("child", 2))
    children.owner = second
    with pytest.raises(AlreadyOwnedError):
        await children.apply(widget("child", 2))


async def test_two_children_objects_sharing_a_memo_apply_each_their_own(cached: CachedClient) -> None:
    """Two passes (two Children) over one memo with different managers: the second applies."""
    owner = await cached.apply(widget("owner"))
    memo: AppliedMemo = {}
    await Children(cached, owner, manager="one", memo=memo).apply(widget("child", 2))
    applied = await Children(cached, owner, manager="two", memo=memo).apply(widget("child", 2))
    assert {"one", "two"} <= applied.metadata.managed_fields.keys()
    assert attrs.has(type(applied.spec))
