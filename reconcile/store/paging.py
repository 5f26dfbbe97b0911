"""A page of a kind's objects, from the rows of one listing statement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import ListPage, StoredObject
from reconcile.store.encoding import load_body

__all__ = ["page_of"]


def page_of(
    rows: Sequence[Any],
    api_group: str,
    kind: str,
    *,
    revision: int,
    limit: int | None,
    predicate: Callable[[StoredObject], bool] | None,
) -> ListPage:
    """Rows of ``(head, namespace, name, uid, resource_version, body)`` in (namespace,
    name) order as a page: those ``predicate`` keeps, up to ``limit``, with the key to
    continue after when more are left."""
    items: list[StoredObject] = []
    next_after = None
    for _, ns, name, uid, resource_version, body in rows:
        key = ObjectKey(api_group, kind, ns, name)
        item = StoredObject(key, uid, resource_version, load_body(body, resource_version, key))
        if predicate is not None and not predicate(item):
            continue
        if limit is not None and len(items) == limit:
            last = items[-1].key
            next_after = (last.namespace, last.name)
            break
        items.append(item)
    return ListPage(tuple(items), revision, next_after)
