"""The SQL of a PostgreSQL group commit (:mod:`.committing` tells the two passes): the
batch's rows sent as columns (:func:`sent`, read back by ``unnest``), pass 1's read
(:data:`READ`), pass 2's reservation with its row locks and fence checks
(:data:`RESERVE`) and its writes with the ``NOTIFY`` (:data:`WRITE`, and
:data:`WRITE_RECORDED` with the commit's idempotency key)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["READ", "RESERVE", "WRITE", "WRITE_RECORDED", "sent"]


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


def sent(first: list[Any], *others: list[Any]) -> list[Any]:
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


def _reservation(*, runner: bool, shards: bool) -> str:
    """Pass 2's reservation (``$1`` revisions) and the rows it writes (``$2``), locked in
    id order: the first revision of the block beside each row as it is now. With
    ``runner``, the runner lock's fence row (``$3``: its key) read ``FOR SHARE``: its
    holder and epoch in every row. With ``shards``, the fences of the batch's writes
    (the next three parameters: shards, holders, epochs) checked against their lease
    rows, read ``FOR SHARE`` in shard order (a takeover waits for this transaction):
    the places (1-based) of those that moved on, in every row (NULL: none). Every
    lock is taken after the reservation (a LATERAL subquery runs once its outer row
    exists: locking a row gives the transaction its id, which must come from the
    reservation); see :mod:`.leasing`."""
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
    return (
        f"SELECT {columns} FROM (SELECT reconcile_reserve($1) AS first OFFSET 0) AS r LEFT JOIN LATERAL "
        "(SELECT id, resource_version, live FROM reconcile_objects WHERE id = ANY($2::bigint[]) "
        f"AND r.first IS NOT NULL ORDER BY id FOR UPDATE) AS o ON true{joins}"
    )


RESERVE = {
    (runner, shards): _reservation(runner=runner, shards=shards)
    for runner in (False, True)
    for shards in (False, True)
}
_NEW, _N, _AT = _table(
    "n",
    1,
    [
        ("name", "text"),
        ("api_group", "text"),
        ("kind", "text"),
        ("namespace", "text"),
        ("uid", "text"),
        ("rv", "bigint"),
        ("live", "bool"),
        ("identity", "text"),
    ],
)
_EVENTS, _E, _AT = _table(
    "e",
    _AT,
    [
        ("object_id", "bigint"),
        ("uid", "text"),
        ("type", "text"),
        ("actor", "text"),
        ("body", "text"),
        ("data", "text"),
        ("by", "text"),
    ],
)
_CHANGED, _C, _AT = _table(
    "c", _AT, [("id", "bigint"), ("uid", "text"), ("rv", "bigint"), ("live", "bool"), ("identity", "text")]
)
#: Pass 2's writes, one statement (:func:`sent` columns): the new projection rows, the
#: events (an existing row's id, or minus the new row's place), the changed rows; then
#: the first revision, the time, and the NOTIFY's channel and payload.
WRITE = (
    "WITH new AS (INSERT INTO reconcile_objects "
    "(api_group, kind, namespace, name, uid, resource_version, live, identity) "
    f"SELECT {_N['api_group']}, {_N['kind']}, {_N['namespace']}, n.name, {_N['uid']}, {_N['rv']}, "
    f"{_N['live']}, {_N['identity']} FROM {_NEW} RETURNING id, api_group, kind, namespace, name), "
    f"placed AS (SELECT new.id, -n.place AS place FROM {_NEW} JOIN new ON new.name = n.name "
    f"AND new.api_group = {_N['api_group']} AND new.kind = {_N['kind']} "
    f"AND new.namespace = {_N['namespace']}), "
    "changed AS (UPDATE reconcile_objects o SET "
    f"uid = {_C['uid']}, resource_version = {_C['rv']}, live = {_C['live']}, identity = {_C['identity']} "
    f"FROM {_CHANGED} WHERE o.id = c.id), "
    "appended AS (INSERT INTO reconcile_events "
    '(revision, time, object_id, uid, type, actor, body, data, "user") '
    f"SELECT ${_AT} + e.place - 1, ${_AT + 1}, coalesce(placed.id, e.object_id), {_E['uid']}, "
    f"{_E['type']}, {_E['actor']}, {_E['body']}, {_E['data']}, {_E['by']} FROM {_EVENTS} "
    "LEFT JOIN placed ON placed.place = e.object_id) "
    f"SELECT pg_notify(${_AT + 2}, ${_AT + 3})"
)
#: :data:`WRITE` with the commit's idempotency key (``$+4``, its last revision ``$+5``)
#: recorded and the writer's previous key (``$+6``) deleted (see :mod:`.retrying`), in
#: the same round trip.
WRITE_RECORDED = WRITE.replace(
    " SELECT pg_notify(",
    f", forgotten AS (DELETE FROM reconcile_commits WHERE token = ${_AT + 6}), "
    "recorded AS (INSERT INTO reconcile_commits (token, first_revision, last_revision) "
    f"VALUES (${_AT + 4}, ${_AT}, ${_AT + 5})) SELECT pg_notify(",
)
