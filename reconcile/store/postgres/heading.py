"""The safe head on PostgreSQL: the highest revision below which every transaction of this
store's writers has ended, whatever else runs on the server.

Revisions come from a sequence and commit out of order (see :mod:`.committing`), so a
reader may only trust a revision once every transaction that could still commit a lower
one has ended. Two facts make that checkable:

* ``reconcile_reserve(n)`` hands out transaction ids and revision blocks in the same
  order (both under one advisory lock held for an instant), so among the store's writers
  a lower transaction id means lower revisions;
* before its transaction gets an id, a writer takes the store's *writer lock*
  (:attr:`~.schema.Layout.writer_key`, a shared, transaction-scoped advisory lock), and
  holds it until it ends: ``pg_locks`` lists every running writer of the store, of every
  process on the database, beside its transaction id.

``reconcile_safe_head()`` reads in two statements, in this order:

1. a snapshot S1, then the lock table: the *bound* is the oldest transaction id among the
   writers still running (those of S1's in-progress list that hold the writer lock), or
   S1's ``xmax`` when none does (nothing newer than S1 counts);
2. a new snapshot S2: the safe head is the highest revision of the events S2 sees whose
   transaction id is below the bound (or the horizon's predecessor, after compaction).

Why that never passes an uncommitted revision: the head is some event of a committed
transaction H below the bound, so below S1's ``xmax``: H had its id before S1. Any
revision below H's belongs to a writer W with a lower id, which had its id, and so the
writer lock, before S1 too. Had W still been running when the lock table was read, its id
would be in S1's in-progress list and in the lock table, and the bound would be at most
W's id, below H's: a contradiction. So W had ended before step 2 began, and S2 sees what
it committed. (A lock is released after the commit is visible, and a transaction's id is
listed with its lock from the moment it exists: ``reconcile_reserve`` takes the lock
first.) The proof needs every writer to get its transaction id inside
``reconcile_reserve``, never before: a commit's first pass only reads (no row locks, no
writes, no ``pg_current_xact_id()``). Two writers with ids from before their locks could
reserve in the other order, and the bound (S1's ``xmax``) would let the later revision
through first. Keep it so when changing the commit's first pass.

A transaction of anything else (another application, another database, a ``psql``
session left open) holds no writer lock and never moves the bound: only the store's own
writers hold a watch back, each for as long as its commit takes. The snapshots of both
statements are fresh ones, so the function is for READ COMMITTED callers: inside a
REPEATABLE READ transaction the second statement would reuse the first snapshot, which
may miss a commit the lock table no longer shows.

Cost: the lock table read takes each lock-manager partition lock in shared mode, for as
long as it takes to copy the server's locks (tens of microseconds on a quiet server, more
with thousands of locks held); a commit pays one uncontended shared lock.
"""

from __future__ import annotations

__all__ = ["HEAD_SQL", "SAFE_HEAD", "bound_sql"]

#: The safe head, as an SQL expression (a READ COMMITTED statement of its own).
SAFE_HEAD = "reconcile_safe_head()"

#: Step 2 of the function: the head below the bound, in a statement (a snapshot) of its own.
HEAD_SQL = (
    "RETURN greatest(coalesce((SELECT revision FROM reconcile_events WHERE xid < bound "
    "ORDER BY revision DESC LIMIT 1), 0), "
    "(SELECT value::bigint FROM reconcile_meta WHERE key = 'horizon') - 1);"
)


def bound_sql(writer_key: int) -> str:
    """Step 1 of the function: the bound, from the store's running writers.

    ``pg_locks`` shows a bigint advisory key as ``classid`` (high 32 bits) and ``objid``
    (low 32 bits), ``objsubid`` 1; a transaction's own id as the ``transactionid`` lock it
    holds (granted, exclusive), in the same virtual transaction."""
    high, low = (writer_key >> 32) & 0xFFFFFFFF, writer_key & 0xFFFFFFFF
    return (
        "WITH locks AS MATERIALIZED (SELECT locktype, database, classid, objid, objsubid, "
        "virtualtransaction, transactionid, mode, granted FROM pg_locks), "
        "writers AS (SELECT t.transactionid FROM locks a JOIN locks t USING (virtualtransaction) "
        "WHERE a.locktype = 'advisory' AND a.granted "
        "AND a.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"AND a.classid = {high} AND a.objid = {low} AND a.objsubid = 1 "
        "AND t.locktype = 'transactionid' AND t.granted AND t.mode = 'ExclusiveLock') "
        "SELECT least(pg_snapshot_xmax(s), (SELECT min(x) FROM pg_snapshot_xip(s) AS x "
        "WHERE xid(x) IN (SELECT transactionid FROM writers))) INTO bound "
        "FROM pg_current_snapshot() AS s;"
    )
