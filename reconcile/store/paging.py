"""A page of a kind's objects, from the rows of one listing statement.

A page of ``limit`` objects reads ``limit + 1`` rows (the one more says whether more
follow), not every row after the cursor: paging through a kind costs its rows once,
not once per page. A page whose objects a predicate picks (a label or field selector)
reads :data:`SCAN` rows at the least, and when they run out before the page is full
while more rows follow, it comes back short (even empty) with the key to go on from, as
a Kubernetes list may: a client goes on while there is a key, not while pages are full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import ListPage, StoredObject
from reconcile.store.encoding import load_body

__all__ = ["SCAN", "page_of", "rows_for"]

#: The rows one statement reads, at the least, for a page whose objects a predicate picks.
SCAN = 1000


def rows_for(limit: int | None, predicate: Callable[[StoredObject], bool] | None) -> int | None:
    """How many rows the listing statement of a page reads (None: all of them)."""
    if limit is None:
        return None
    return limit + 1 if predicate is None else max(limit + 1, SCAN)


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
    name) order, read by a statement limited to :func:`rows_for` rows, as a page: those
    ``predicate`` keeps, up to ``limit``, with the key to continue after when more are
    left (the last row read, when the rows ran out before the page was full)."""
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
    else:
        read = rows_for(limit, predicate)
        if read is not None and len(rows) >= read:
            # The statement stopped at its limit: more rows may follow the last one read.
            _, ns, name, *_ = rows[-1]
            next_after = (ns, name)
    return ListPage(tuple(items), revision, next_after)
