"""Shard leases on PostgreSQL: several runners split a store's keys, and a write fenced by
a lease that moved on is refused in its own transaction (see :mod:`reconcile.store.fencing`).

Three tables, made by the schema's step 4 (:func:`create_tables`; a store whose tables
an earlier reconcile made at its first renewal keeps them as they are), and filled the
first time a runner asks for leases (in one transaction, under the store's creation
lock, so two runners starting together fill them once):

* ``reconcile_shards`` -- one row per shard: ``holder`` (a runner's id, or NULL),
  ``epoch`` (one more at every acquisition) and ``expires``. The shard count is
  ``reconcile_meta``'s ``shards``, fixed when the table is filled.
* ``reconcile_runners`` -- one row per runner that renewed lately: its id, what it says
  of itself (pid and host) and until when it counts as live. The live count is the fair
  share's divisor, so a runner that holds nothing yet (it just joined) still counts.
* ``reconcile_fenced`` -- every write refused because its fence was stale: when, which
  shard and epoch it carried, which runner, which key, which actor. What ``reconcile
  status`` counts: a refusal stays visible after the fact.

Times are the database server's (``clock_timestamp()``): runners on several machines
never compare their own clocks.

A renewal is one statement (:func:`renew`: the function ``reconcile_renew``, which the
server runs and commits without waiting on the client, so a runner paused mid-renewal
leaves no row locked): mark the runner live; release the shards
the runner gives up; renew the rest; if it holds fewer than its fair share
(``ceil(shards / live runners)``), take free or expired shards up to it, bumping each
one's epoch. Shards held beyond the fair share are the runner's to give up, in two
steps, as Kafka's cooperative rebalancing revokes before it reassigns: it stops taking
their keys at once and releases them at its next renewal, when the reconciles it had
in flight on them are (mostly) done, so their writes are not refused for nothing; the
others take them at their next renewal. Only the moved shards pause, never all. Rows
are locked in shard order, and taking skips rows that another transaction holds
(``SKIP LOCKED``): a commit of a runner paused in the middle of it keeps its shards'
rows locked, and they are taken once it resumes and ends, never under its feet.

The fence check reads the rows of the batch's shards ``FOR SHARE`` inside the commit's
transaction, in the statement that reserves its revisions (:mod:`.committing`: no round
trip of its own): a takeover, which must update the row, either committed before (the
write is refused) or waits until the commit ends (the write happened while the lease
was still the writer's).

The runner lock of an unsharded runner (a session advisory lock, :mod:`.claims`) fences
the same way through one row of ``reconcile_meta``, ``claim:runner`` (the holder and an
epoch): a runner that takes the lock counts the epoch up (:func:`take_runner_fence`)
before it reconciles anything, and its controllers' writes carry that epoch, checked
``FOR SHARE`` in the statement that reserves their revisions (no round trip of its own).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from reconcile.model.meta import ObjectKey
from reconcile.store.fencing import DEFAULT_SHARDS, Fence, Leases, ShardLease, ShardTable

__all__ = [
    "RUNNER_FENCE",
    "create_tables",
    "record_refusals",
    "release",
    "renew",
    "runner_fence",
    "shard_table",
    "take_runner_fence",
]

_RENEW = """CREATE OR REPLACE FUNCTION reconcile_renew(
    p_holder text, p_about text, p_duration float8, p_release integer[], p_count integer, p_forget float8
) RETURNS TABLE (shard integer, epoch bigint, live integer, fair integer, revision bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_live integer;
    v_fair integer;
    v_held integer;
    v_revision bigint;
BEGIN
    INSERT INTO reconcile_runners AS r (holder, about, expires)
    VALUES (p_holder, p_about, clock_timestamp() + make_interval(secs => p_duration))
    ON CONFLICT (holder) DO UPDATE SET about = excluded.about, expires = excluded.expires;
    DELETE FROM reconcile_runners r WHERE r.expires < clock_timestamp() - make_interval(secs => p_forget);
    SELECT count(*) INTO v_live FROM reconcile_runners r WHERE r.expires > clock_timestamp();
    v_fair := ceil(p_count::numeric / greatest(v_live, 1));
    -- Mine, in shard order: given up, or renewed.
    UPDATE reconcile_shards s
    SET holder = CASE WHEN s.shard = ANY(p_release) THEN NULL ELSE s.holder END,
        expires = CASE WHEN s.shard = ANY(p_release) THEN '-infinity'::timestamptz
                       ELSE clock_timestamp() + make_interval(secs => p_duration) END
    FROM (SELECT s2.shard FROM reconcile_shards s2 WHERE s2.holder = p_holder
          ORDER BY s2.shard FOR UPDATE) AS mine
    WHERE s.shard = mine.shard;
    SELECT count(*) INTO v_held FROM reconcile_shards s WHERE s.holder = p_holder;
    IF v_held < v_fair THEN
        UPDATE reconcile_shards s
        SET holder = p_holder, epoch = s.epoch + 1,
            expires = clock_timestamp() + make_interval(secs => p_duration)
        FROM (SELECT s2.shard FROM reconcile_shards s2
              WHERE s2.holder IS NULL OR s2.expires < clock_timestamp()
              ORDER BY s2.shard LIMIT v_fair - v_held FOR UPDATE SKIP LOCKED) AS free
        WHERE s.shard = free.shard;
    END IF;
    -- A new snapshot (a volatile function's statement): every commit of a former holder.
    SELECT coalesce(max(e.revision), 0) INTO v_revision FROM reconcile_events e;
    RETURN QUERY
        SELECT s.shard, s.epoch, v_live, v_fair, v_revision FROM reconcile_shards s
        WHERE s.holder = p_holder
        UNION ALL SELECT NULL::integer, NULL::bigint, v_live, v_fair, v_revision;
END $$"""

#: The lease tables. ``IF NOT EXISTS``: until schema version 4 they were made at a
#: store's first renewal, with these very columns, and such a store keeps them.
_TABLES = (
    """CREATE TABLE IF NOT EXISTS reconcile_shards (
        shard integer PRIMARY KEY,
        holder text,
        epoch bigint NOT NULL DEFAULT 0,
        expires timestamptz NOT NULL DEFAULT '-infinity'
    )""",
    """CREATE TABLE IF NOT EXISTS reconcile_runners (
        holder text PRIMARY KEY,
        about text NOT NULL,
        expires timestamptz NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS reconcile_fenced (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        time timestamptz NOT NULL DEFAULT clock_timestamp(),
        shard integer NOT NULL,
        epoch bigint NOT NULL,
        holder text NOT NULL,
        api_group text NOT NULL,
        kind text NOT NULL,
        namespace text NOT NULL,
        name text NOT NULL,
        actor text NOT NULL
    )""",
)
#: The ``reconcile_meta`` row of the runner lock's fence: its holder and epoch.
RUNNER_FENCE = "claim:runner"
#: Seconds after which a runner that stopped renewing is forgotten altogether.
_FORGET_AFTER = 3600.0


async def _count(conn: Any) -> int | None:
    value = await conn.fetchval("SELECT value::integer FROM reconcile_meta WHERE key = 'shards'")
    return None if value is None else int(value)


async def create_tables(conn: Any) -> None:
    """Schema step 4: the lease tables and ``reconcile_renew``, empty (the shard rows
    and count come with the first renewal, which says how many shards)."""
    for statement in (*_TABLES, _RENEW):
        await conn.execute(statement)


async def _prepare(conn: Any, create_key: int, shards: int | None) -> int:
    """The shard count, filling the lease table first if no runner did yet."""
    count = await _count(conn)
    if count is not None:
        return count
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", create_key)
        count = await _count(conn)
        if count is not None:
            return count
        count = shards or DEFAULT_SHARDS
        await conn.execute(
            "INSERT INTO reconcile_shards (shard) SELECT generate_series(0, $1::integer - 1)", count
        )
        await conn.execute(
            "INSERT INTO reconcile_meta (key, value) VALUES ('shards', $1::text::jsonb)", str(count)
        )
    return count


async def renew(
    conn: Any,
    create_key: int,
    holder: str,
    *,
    about: str,
    duration: float,
    shards: int | None,
    release: Collection[int] = (),
) -> Leases:
    """One renewal (see the module's story); the leases ``holder`` holds after it.

    One statement, ``reconcile_renew(...)``, the server runs and commits on its own: a
    runner paused mid-renewal would otherwise hold its shards' rows locked, and nobody
    could take them until it resumed."""
    count = await _prepare(conn, create_key, shards)
    rows = await conn.fetch(
        "SELECT shard, epoch, live, fair, revision FROM reconcile_renew($1, $2, $3, $4::integer[], $5, $6)",
        holder,
        about,
        duration,
        sorted(release),
        count,
        _FORGET_AFTER,
    )
    held = {int(r[0]): int(r[1]) for r in rows if r[0] is not None}
    live, fair, revision = (int(v) for v in rows[-1][2:])
    return Leases(count, held, live, fair, revision)


async def release(conn: Any, holder: str) -> None:
    """Give up every lease of ``holder`` and its membership."""
    if await _count(conn) is None:
        return
    async with conn.transaction():
        await conn.execute(
            "UPDATE reconcile_shards SET holder = NULL, expires = '-infinity' WHERE shard IN "
            "(SELECT shard FROM reconcile_shards WHERE holder = $1 ORDER BY shard FOR UPDATE)",
            holder,
        )
        await conn.execute("DELETE FROM reconcile_runners WHERE holder = $1", holder)


async def shard_table(conn: Any) -> ShardTable | None:
    """The lease table as it is now (None: no runner ever asked for leases here)."""
    if await _count(conn) is None:
        return None
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        rows = await conn.fetch(
            "SELECT shard, holder, epoch, "
            "extract(epoch FROM greatest(expires, clock_timestamp() - interval '1 day') - clock_timestamp()) "
            "FROM reconcile_shards ORDER BY shard"
        )
        runners = await conn.fetch(
            "SELECT holder, about FROM reconcile_runners WHERE expires > clock_timestamp() ORDER BY holder"
        )
        refused = int(await conn.fetchval("SELECT count(*) FROM reconcile_fenced"))
    leases = tuple(ShardLease(int(s), h, int(e), float(x)) for s, h, e, x in rows)
    return ShardTable(leases, {str(h): str(a) for h, a in runners}, refused)


async def take_runner_fence(conn: Any, holder: str) -> int:
    """The runner lock just taken by ``holder`` (on ``conn``, which holds it): its epoch
    counted one up and the holder recorded, so every write fenced by an earlier holder
    is refused from now on. The update waits for the commits checking the row (``FOR
    SHARE``) to end: a write the former holder commits is before the takeover or refused."""
    epoch = await conn.fetchval(
        "INSERT INTO reconcile_meta AS m (key, value) VALUES ($1, jsonb_build_object('holder', $2::text, "
        "'epoch', 1)) ON CONFLICT (key) DO UPDATE SET value = jsonb_build_object('holder', $2::text, "
        "'epoch', (m.value->>'epoch')::bigint + 1) RETURNING (value->>'epoch')::bigint",
        RUNNER_FENCE,
        holder,
    )
    return int(epoch)


async def runner_fence(conn: Any) -> tuple[str, int] | None:
    """The runner lock's latest fencing holder and epoch (None: no runner fenced yet)."""
    row = await conn.fetchrow(
        "SELECT value->>'holder', (value->>'epoch')::bigint FROM reconcile_meta WHERE key = $1", RUNNER_FENCE
    )
    return None if row is None else (str(row[0]), int(row[1]))


async def record_refusals(conn: Any, refused: Iterable[tuple[Fence, ObjectKey, str]]) -> None:
    """Keep a row per refused write (fence, key, actor), in its own statement: the
    refused batch rolled back."""
    rows = [
        (f.shard, f.epoch, f.holder, k.api_group, k.kind, k.namespace, k.name, actor)
        for f, k, actor in refused
    ]
    if rows:
        await conn.executemany(
            "INSERT INTO reconcile_fenced (shard, epoch, holder, api_group, kind, namespace, name, actor) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            rows,
        )
