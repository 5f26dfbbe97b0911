"""A page of a kind's objects, from the rows of its listing statements.

A page of ``limit`` objects reads ``limit + 1`` rows (the one more says whether more
follow), not every row after the cursor: paging through a kind costs its rows once,
not once per page. A page whose objects a predicate picks (a label or field selector)
reads :data:`SCAN` rows, then twice as many again and again (up to :data:`MOST` a
statement) until it is full or the rows run out, as Kubernetes' API server fills a page
from etcd: a client asking for a page of 500 matches gets them in one answer, however
few objects match (on SQLite up to a budget of rows a call: then a short page, with a
key to go on from).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import ListPage, StoredObject
from reconcile.store.encoding import load_body

__all__ = ["BUDGET", "MOST", "SCAN", "Pager", "key_conditions"]

#: The rows the first statement of a page a predicate picks from reads, at the least.
SCAN = 1000
#: The rows one statement of such a page reads, at the most.
MOST = 10_000
#: The rows one page a predicate picks from reads at the most on the SQLite store, whose
#: one reader connection serves every other read meanwhile (its watches' too): about a
#: tenth of a second here.
BUDGET = 20_000
#: A limit this large or larger reads every row (SQL's integers hold 64 bits).
_EVERY = 2**62


def key_conditions(
    namespace: str | None, after: tuple[str, str] | None, mark: Callable[[], str]
) -> tuple[str, list[str]]:
    """The conditions (each after `` AND``) on the objects ``o`` of a page in
    ``namespace`` (every one when None) after the key ``after``, and their values, each
    placeholder made by ``mark()``. Within one namespace the name alone bounds the page:
    with the pair compared too, SQLite walks every key after it, in every namespace, and
    sorts them, where the index by (namespace, name) gives the page's rows in order."""
    where, values = "", []
    if namespace is not None:
        where += f" AND o.namespace = {mark()}"
        values.append(namespace)
        if after is not None and after[0] == namespace:
            where += f" AND o.name > {mark()}"
            values.append(after[1])
        elif after is not None and after[0] > namespace:
            where += " AND 1 = 0"  # the whole namespace lies before the key
    elif after is not None:
        where += f" AND (o.namespace, o.name) > ({mark()}, {mark()})"
        values.extend(after)
    return where, values


class Pager:
    """A page filled from the rows of one or more listing statements, each reading
    :attr:`read` rows (None: all) in (namespace, name) order, the next one after the last
    row of the one before; rows of ``(head, namespace, name, uid, resource_version,
    body)``. ``budget``: the rows all its statements may read together (None: no end);
    a page a predicate picks from that spends it comes back short, with the key of the
    last row read to go on from (as a Kubernetes list may: the SQLite store's one reader
    is not held longer than that)."""

    def __init__(
        self,
        api_group: str,
        kind: str,
        limit: int | None,
        predicate: Callable[[StoredObject], bool] | None,
        *,
        budget: int | None = None,
    ) -> None:
        self._api_group, self._kind = api_group, kind
        self._limit, self._predicate = limit, predicate
        self._budget = budget
        self.items: list[StoredObject] = []
        #: The key to continue after, when the page is full and more objects may follow.
        self.next_after: tuple[str, str] | None = None
        #: How many rows the next statement reads (None: every row after its start).
        self.read: int | None = None
        if limit is not None and limit < 1:
            msg = f"a page's limit must be at least 1, not {limit}"
            raise ValueError(msg)
        if limit is not None and limit < _EVERY:  # (a larger one is every row: SQL's integers end)
            self.read = limit + 1 if predicate is None else max(limit + 1, SCAN)

    def take(self, rows: Sequence[Any]) -> tuple[str, str] | None:
        """Take the rows a statement read: the key the next statement reads after, or
        None when the page is done (full, short of its budget, or the rows ran out)."""
        limit, predicate, items = self._limit, self._predicate, self.items
        more = self.read is not None and len(rows) >= self.read  # rows may follow the last
        for index, (_, ns, name, uid, resource_version, body) in enumerate(rows):
            key = ObjectKey(self._api_group, self._kind, ns, name)
            item = StoredObject(key, uid, resource_version, load_body(body, resource_version, key))
            if predicate is not None and not predicate(item):
                continue
            items.append(item)
            if limit is not None and len(items) == limit:
                # Full: more may follow if rows do (the one more row read past a page
                # without a predicate; with one, perhaps a last page of none).
                self.next_after = (ns, name) if more or index + 1 < len(rows) else None
                return None
        if not more:
            return None  # every row after the start was read
        _, ns, name, *_ = rows[-1]
        if self._budget is not None:
            self._budget -= len(rows)
            if self._budget <= 0:
                self.next_after = (ns, name)  # short: go on from the last row read
                return None
        assert self.read is not None
        self.read = min(self.read * 2, max(MOST, self.read))
        if self._budget is not None:
            self.read = max(1, min(self.read, self._budget))
        return (ns, name)

    def page(self, revision: int) -> ListPage:
        """The page, reflecting ``revision``."""
        return ListPage(tuple(self.items), revision, self.next_after)
