"""The SQL of a PostgreSQL group commit (:mod:`.committing` tells the two passes): the
batch's rows sent as columns (:func:`sent`, read back by ``unnest``), pass 1's read
(:data:`READ`), and pass 2 in one statement (:data:`WRITE`): the reservation with its
row locks and fence checks, the writes, the commit's idempotency key and the
``NOTIFY``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["READ", "WRITE", "columns", "sent"]


def _table(alias: str, at: int, columns: Sequence[tuple[str, str]]) -> tuple[str, dict[str, str], int]:
    """How SQL reads a batch's rows sent as columns from parameter ``$at`` on (see
    :func:`sent`): the first column is every row's value; each other is an array and a
    value. The FROM item (with ``place``, 1-based), each column's expression by name, and
    the number of the next parameter."""
    (first, kind), *others = columns
    arrays, names, read = [f"${at}::{kind}[]"], [first], {first: f"{alias}.{first}"}
    at += 1
    for name, kind in others:
        arrays.append(f"${at}::{kind}[]")
        names.append(name)
        read[name] = f"coalesce({alias}.{name}, ${at + 1}::{kind})"
        at += 2
    return f"unnest({', '.join(arrays)}) WITH ORDINALITY AS {alias}({', '.join(names)}, place)", read, at


def sent(first: Sequence[Any], *others: Sequence[Any]) -> list[Any]:
    """A batch's columns as :func:`_table` reads them: the first as it is, each other as
    ``[], value`` when every row holds the same value (most do: one kind, one actor, no
    data), else ``values, None`` (unnest pads a shorter array with NULLs). asyncpg checks
    every element of an array against abstract base classes before encoding it: a column
    sent as one value costs nothing per row."""
    sent: list[Any] = [first]
    for column in others:
        value = column[0] if column else None
        if column.count(value) == len(column):
            sent += [[], value]
        else:
            sent += [column, None]
    return sent


def columns(rows: Sequence[Sequence[Any]], width: int) -> list[tuple[Any, ...]]:
    """``rows`` (each ``width`` values) as ``width`` columns: transposed in C, where a
    list made per column would cost a Python loop each."""
    return list(zip(*rows, strict=True)) or [()] * width


_KEYS, _KEY, _AFTER_KEYS = _table(
    "k", 1, [("name", "text"), ("api_group", "text"), ("kind", "text"), ("namespace", "text")]
)
#: Pass 1's read: the batch's rows ($1-$7, :func:`sent`), each key looked up by its index.
READ = (
    "SELECT o.api_group, o.kind, o.namespace, o.name, o.id, o.uid, o.resource_version, o.live, "
    "CASE WHEN o.live THEN e.body END, o.identity "
    f"FROM {_KEYS} JOIN reconcile_objects o ON o.api_group = {_KEY['api_group']} "
    f"AND o.kind = {_KEY['kind']} AND o.namespace = {_KEY['namespace']} AND o.name = k.name "
    "LEFT JOIN reconcile_events e ON e.revision = o.resource_version"
)


def _reservation(*, runner: bool, shards: bool) -> tuple[str, int]:
    """The reservation (``$1`` revisions) and the rows the batch writes (``$2``), locked
    in id order: the first revision of the block beside each row as it is now. With
    ``runner``, the runner lock's fence row (``$3``: its key) read ``FOR SHARE``: its
    holder and epoch in every row. With ``shards``, the fences of the batch's writes
    (the next three parameters: shards, holders, epochs) checked against their lease
    rows, read ``FOR SHARE`` in shard order (a takeover waits for this transaction):
    the places (1-based) of those that moved on, in every row (NULL: none). Every
    lock is taken after the reservation (a LATERAL subquery runs once its outer row
    exists: locking a row gives the transaction its id, which must come from the
    reservation); see :mod:`.leasing`. The query, and the number of its next parameter."""
    columns, joins = "r.first, o.id, o.resource_version, o.live", ""
    at = 3
    if runner:
        columns += ", f.holder, f.epoch"
        joins += (
            " LEFT JOIN LATERAL (SELECT value->>'holder' AS holder, (value->>'epoch')::bigint AS epoch "
            f"FROM reconcile_meta WHERE key = ${at} AND r.first IS NOT NULL FOR SHARE) AS f ON true"
        )
        at += 1
    if shards:
        columns += ", s.moved"
        joins += (
            " LEFT JOIN LATERAL (SELECT array_agg(w.place) FILTER (WHERE l.shard IS NULL OR "
            "(l.holder, l.epoch) IS DISTINCT FROM (w.holder, w.epoch)) AS moved "
            f"FROM unnest(${at}::integer[], ${at + 1}::text[], ${at + 2}::bigint[]) WITH ORDINALITY "
            "AS w(shard, holder, epoch, place) LEFT JOIN (SELECT shard, holder, epoch FROM reconcile_shards "
            f"WHERE shard = ANY(${at}::integer[]) AND r.first IS NOT NULL ORDER BY shard FOR SHARE) AS l "
            "ON l.shard = w.shard) AS s ON true"
        )
        at += 3
    query = (
        f"SELECT {columns} FROM (SELECT reconcile_reserve($1) AS first OFFSET 0) AS r LEFT JOIN LATERAL "
        "(SELECT id, resource_version, live FROM reconcile_objects WHERE id = ANY($2::bigint[]) "
        f"AND r.first IS NOT NULL ORDER BY id FOR UPDATE) AS o ON true{joins}"
    )
    return query, at


_NEW_COLUMNS = [
    ("name", "text"),
    ("api_group", "text"),
    ("kind", "text"),
    ("namespace", "text"),
    ("uid", "text"),
    ("rv", "bigint"),
    ("live", "bool"),
    ("identity", "text"),
]
_EVENT_COLUMNS = [
    ("object_id", "bigint"),
    ("uid", "text"),
    ("type", "text"),
    ("actor", "text"),
    ("body", "text"),
    ("data", "text"),
    ("by", "text"),
]
_CHANGED_COLUMNS = [
    ("id", "bigint"),
    ("uid", "text"),
    ("rv", "bigint"),
    ("live", "bool"),
    ("identity", "text"),
]


def _real(revision: str, base: str) -> str:
    """A row's revision as pass 1 left it, made real: provisional numbers (from ``base``,
    pass 1's first) move to the block's (``b.first``); others stay."""
    return f"CASE WHEN {revision} >= {base} THEN {revision} - {base} + b.first ELSE {revision} END"


def _writing(*, runner: bool, shards: bool, recorded: bool) -> str:
    """Pass 2 in one statement (data-modifying WITHs always run whole, in one snapshot):
    the reservation with its locks and fences (``r``, :func:`_reservation`: what the
    statement returns), then the new projection rows, the changed rows, the events and
    the NOTIFY; with ``recorded``, the commit's idempotency key written and the writer's
    previous one deleted (see :mod:`.retrying`).

    Each write reads the block's first revision from ``b``, an aggregate of every row of
    ``r``: nothing is written (nothing that gives the transaction its id runs) before
    the reservation and every lock are taken. An event's revision is the block's first
    plus its place; its body, serialized by pass 1 with its provisional revision (the
    pass's base plus its place), gets the real one in its text on the server (pass 1
    made sure that the provisional one appears exactly once). An event of a new row
    names it by its place among the new rows, negated (ids are positive), and its uid is
    NULL when it is the row's (so a batch of creates sends no column of uids twice)."""
    reserve, at = _reservation(runner=runner, shards=shards)
    new_rows, n, at = _table("n", at, _NEW_COLUMNS)
    events, e, at = _table("e", at, _EVENT_COLUMNS)
    changed_rows, c, at = _table("c", at, _CHANGED_COLUMNS)
    base, now, channel = f"${at}::bigint", f"${at + 1}", f"${at + 2}"
    last = "b.first + $1 - 1"
    provisional = f"'\"resourceVersion\":' || ({base} + e.place - 1)"
    real = "'\"resourceVersion\":' || (b.first + e.place - 1)"
    statement = (
        f"WITH r AS MATERIALIZED ({reserve}), "
        f"b AS MATERIALIZED (SELECT m.first, pg_notify({channel}, (m.first + $1 - 1)::text) "
        "FROM (SELECT min(first) AS first FROM r) AS m), "
        "new AS (INSERT INTO reconcile_objects "
        "(api_group, kind, namespace, name, uid, resource_version, live, identity) "
        f"SELECT {n['api_group']}, {n['kind']}, {n['namespace']}, n.name, {n['uid']}, "
        f"{_real(n['rv'], base)}, {n['live']}, {n['identity']} FROM {new_rows} CROSS JOIN b "
        "RETURNING id, api_group, kind, namespace, name, uid), "
        f"placed AS (SELECT new.id, -n.place AS place, new.uid FROM {new_rows} JOIN new ON new.name = n.name "
        f"AND new.api_group = {n['api_group']} AND new.kind = {n['kind']} "
        f"AND new.namespace = {n['namespace']}), "
        "changed AS (UPDATE reconcile_objects o SET "
        f"uid = {c['uid']}, resource_version = {_real(c['rv'], base)}, live = {c['live']}, "
        f"identity = {c['identity']} FROM {changed_rows} CROSS JOIN b WHERE o.id = c.id), "
        "appended AS (INSERT INTO reconcile_events "
        '(revision, time, object_id, uid, type, actor, body, data, "user") '
        f"SELECT b.first + e.place - 1, {now}, coalesce(placed.id, e.object_id), "
        f"coalesce({e['uid']}, placed.uid), {e['type']}, {e['actor']}, "
        f"replace({e['body']}, {provisional}, {real}), {e['data']}, {e['by']} "
        f"FROM {events} CROSS JOIN b LEFT JOIN placed ON placed.place = e.object_id)"
    )
    if recorded:
        statement += (
            f", forgotten AS (DELETE FROM reconcile_commits WHERE token = ${at + 4} "
            "AND (SELECT first FROM b) IS NOT NULL), "
            "recorded AS (INSERT INTO reconcile_commits (token, first_revision, last_revision) "
            f"SELECT ${at + 3}, b.first, {last} FROM b)"
        )
    return f"{statement} SELECT r.* FROM r"


#: Pass 2, one statement, by (fenced by the runner lock, fenced by shard leases, with
#: the commit's idempotency key): the parameters of the reservation (:func:`_reservation`),
#: then the new rows, the events and the changed rows (:func:`sent` columns each), then
#: pass 1's provisional base, the time, the NOTIFY's channel; with the key, the key
#: and the writer's previous key. Its rows: the reservation's (the first revision, the
#: rows it locked as they are now, the fences).
WRITE = {
    (runner, shards, recorded): _writing(runner=runner, shards=shards, recorded=recorded)
    for runner in (False, True)
    for shards in (False, True)
    for recorded in (False, True)
}
