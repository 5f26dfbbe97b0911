"""How a PostgreSQL store reads events: the columns of an event row with its object's
key, a watch page's query (events after a cursor up to the safe head, in revision order,
filtered by kind and namespace) and the same with the compaction horizon in its snapshot,
and the rows made :class:`~reconcile.store.contract.RawEvent` s; and the read that fills
the recent window with other processes' commits for every watch at once (:func:`filled`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import RawEvent
from reconcile.store.recent import EventRow, RecentEvents

__all__ = ["EVENT_COLUMNS", "event_of", "filled", "paged_event", "watch_page", "with_horizon"]

EVENT_COLUMNS = (
    "e.revision, e.time, e.type, e.uid, e.actor, e.body, e.data, "
    'o.api_group, o.kind, o.namespace, o.name, e."user"'
)


#: A watch page's join: each event's object looked up by its key, the events read in
#: revision order (the primary key's range) until the page is full. LATERAL and OFFSET 0
#: keep the planner from turning it around (every object of the kind, then its events,
#: sorted), which it takes for cheaper while the store's tables have no statistics yet (a
#: store filled in bulk, before autovacuum's next round or where it is off): then a page
#: cost a walk over the whole kind, about 8-45 ms at 10,000 objects instead of 0.03 ms.
#: This way a page costs the events it moves past, whatever the statistics say.
OBJECT_OF_EVENT = (
    "CROSS JOIN LATERAL (SELECT api_group, kind, namespace, name FROM reconcile_objects "
    "WHERE id = e.object_id OFFSET 0) o"
)


def watch_page(api_group: str | None, kind: str | None, namespace: str | None) -> tuple[str, list[str]]:
    """A watch page's query (``$1`` the cursor, ``$2`` the head, ``$3`` the limit, then
    the filters given) and the filters' values."""
    where, params = "", []
    for column, value in (("o.api_group", api_group), ("o.kind", kind), ("o.namespace", namespace)):
        if value is not None:
            params.append(value)
            where += f" AND {column} = ${len(params) + 3}"
    query = (
        f"SELECT {EVENT_COLUMNS} FROM reconcile_events e {OBJECT_OF_EVENT} "
        f"WHERE e.revision > $1 AND e.revision <= $2{where} ORDER BY e.revision LIMIT $3"
    )
    return query, params


def event_of(row: Any) -> RawEvent:
    """An event row (:data:`EVENT_COLUMNS`) as a RawEvent."""
    revision, at, type_, uid, actor, body, data, group, kind, namespace, name, user = row
    key = ObjectKey(group, kind, namespace, name)
    return RawEvent(revision, at, type_, key, uid, actor, text=body, data_text=data, user=user)


def with_horizon(page: str) -> str:
    """A watch page's query (:func:`watch_page`) that also reads the compaction horizon,
    in the same snapshot, as its last column: one row of NULLs and the horizon when the
    page is empty (a watch woken for commits of other kinds reads nothing else)."""
    return (
        "SELECT p.*, h.horizon FROM (SELECT value::bigint AS horizon FROM reconcile_meta "
        f"WHERE key = 'horizon') h LEFT JOIN LATERAL ({page}) p ON true ORDER BY p.revision"
    )


def paged_event(row: Any) -> RawEvent:
    """:func:`event_of` of a row of :func:`with_horizon`."""
    revision, at, type_, uid, actor, body, data, group, kind, namespace, name, user, _horizon = row
    key = ObjectKey(group, kind, namespace, name)
    return RawEvent(revision, at, type_, key, uid, actor, text=body, data_text=data, user=user)


def _filling() -> str:
    """Every event in (``$1``, ``$2``], every kind, at most ``$3``, with the horizon."""
    return with_horizon(watch_page(None, None, None)[0])


#: :func:`filled`'s query.
FILL = _filling()


async def filled(
    fetch: Callable[..., Awaitable[list[Any]]], recent: RecentEvents, known: int, head: int
) -> None:
    """Read the events after the recent window's end (``known``, the head the watches
    were last given, when the window is empty) up to ``head``, a safe head, once for
    every watch of this process, and append them to the window: the watches then serve
    themselves from memory instead of each reading a page of the same revisions. At most
    the window's capacity is read (the window then covers up to the last event read). A
    read that fails, or that finds the range compacted, appends nothing: the watches
    read as before and find out."""
    after = recent.last or known
    if head <= after:
        return
    try:
        rows = await fetch(FILL, after, head, recent.capacity)
    except Exception:  # noqa: BLE001 - only a shortcut: the watches read the range themselves
        return
    if int(rows[0][-1]) > after + 1:
        return
    events = [] if rows[0][0] is None else [_row(row) for row in rows]
    recent.fill(after, head if len(events) < recent.capacity else events[-1].revision, events)


def _row(row: Any) -> EventRow:
    revision, at, type_, uid, actor, body, data, group, kind, namespace, name, user, _horizon = row
    return EventRow(
        revision, at, type_, ObjectKey(group, kind, namespace, name), uid, actor, body, data, user
    )
