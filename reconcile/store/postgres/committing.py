"""Group commit on PostgreSQL, and why a watch never skips an event.

Revisions come from a sequence, and sequence values commit out of order: a transaction
that took revision 7 may still be running when the one that took 8 has committed. A
reader that advanced past 8 then would never see 7. So:

* a commit takes its revisions, one block per transaction, from ``reconcile_reserve(n)``,
  which assigns the transaction's id (``pg_current_xact_id()``) and the block together,
  under an advisory lock held for an instant: transaction ids and revision blocks are
  handed out in the same order. The transaction must not have an id before that call, so
  everything before it only reads;
* every event row carries its transaction's id (``xid``), and readers trust only the
  events whose transaction is below the oldest of the store's writers still running: by
  the order above, every revision below the highest of them belongs to a transaction
  that has ended. That highest revision is the safe head (:mod:`.heading`: how it is
  read, and why a transaction of anything else never holds it back); a watch reads up
  to it, in revision order, and its cursor (an integer, the resource version) never
  passes an uncommitted lower revision.

A batch therefore runs in two passes, in one READ COMMITTED transaction:

1. read the batch's rows (no lock, so no transaction id yet) and run every mutation in
   submission order against the in-batch state, as SQLite does, numbering events with
   provisional revisions (:data:`PROVISIONAL` and up: a range no real revision reaches;
   a body is measured against the size limit with the revision it will likely carry,
   at least the head this process knows, and measured again exactly in pass 2); a
   mutation that raises fails only its own write (or, all or nothing, the batch);
2. in one statement, reserve exactly as many revisions as events, lock the rows the
   batch writes, insert new rows, update the others, append the events, each body
   given its real revision in its text on the server (pass 1 serialized it with its
   provisional one, from a random base: a pair it holds exactly once), and ``NOTIFY``
   the store's channel; then check what the statement returned: that no locked row
   changed since pass 1 (another process wrote one) and no fence moved on; a check that
   fails rolls the attempt back and the batch runs again, as the contract allows;
   commit.

Four round trips in all (BEGIN, the read, the statement of pass 2 with the commit's
idempotency key, COMMIT): with 100 writes a commit, what a write costs is mostly
Python (the mutation, the serialized body, asyncpg encoding the arrays) and the
server's inserts.

Failure isolation needs no savepoints: a write fails in Python, in pass 1, before anything
of it reached the database. What fails in the database (a conflict with another process,
a deadlock, a second declarer of an identity caught by the deferred constraint at
COMMIT) rolls the attempt back whole and the batch is run again from pass 1, where a
write that is now refused fails alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import attrs

from reconcile.errors import FencedError, NotFoundError, StoreError
from reconcile.model.meta import ObjectKey
from reconcile.store.claiming import claimed
from reconcile.store.contract import (
    Body,
    Mutation,
    Note,
    Put,
    Remove,
    StoredObject,
    WriteResult,
)
from reconcile.store.encoding import dumps, load_body
from reconcile.store.fencing import RUNNER_LOCK, Fence
from reconcile.store.postgres.leasing import RUNNER_FENCE
from reconcile.store.postgres.numbering import (
    PROVISIONAL,
    Unstampable,
    Written,
    made_real,
    provisional_base,
    restamped,
    stamp,
    too_large,
)
from reconcile.store.postgres.statements import READ, WRITE, columns, sent
from reconcile.store.recent import EventRow

__all__ = ["PROVISIONAL", "Committed", "PendingWrite", "commit_batch"]

#: Attempts at a batch that keeps meeting other processes' writes.
_ATTEMPTS = 20


@attrs.define(eq=False)
class PendingWrite:
    """A write waiting for the next batch."""

    key: ObjectKey
    mutation: Mutation
    actor: str
    user: str | None = None
    #: The shard lease the write was submitted under (a sharded controller's write):
    #: refused with FencedError when the lease moved on (see :mod:`.leasing`).
    fence: Fence | None = None


@attrs.frozen
class Committed:
    """What a batch did: its block of revisions (0, 0 when it appended nothing), one
    result per write, the events appended, and the writes refused by their fence."""

    first: int
    last: int
    results: list[WriteResult | BaseException]
    appended: list[EventRow]
    fenced: list[PendingWrite] = attrs.Factory(list)


def _fenced_error(write: PendingWrite) -> FencedError:
    fence = write.fence
    assert fence is not None
    if fence.shard == RUNNER_LOCK:
        return FencedError(
            f"{write.key}: the runner lock moved on (this write carried epoch {fence.epoch} of "
            f"{fence.holder}); another runner reconciles the store now",
            shard=fence.shard,
            epoch=fence.epoch,
        )
    return FencedError(
        f"{write.key}: the lease of shard {fence.shard} moved on (this write carried epoch "
        f"{fence.epoch} of {fence.holder}); the key is another runner's now",
        shard=fence.shard,
        epoch=fence.epoch,
    )


class _Conflict(Exception):  # noqa: N818 - internal signal, never escapes
    """Another process changed a row of the batch between its two passes."""


class _Fenced(Exception):  # noqa: N818 - internal signal, never escapes
    """A lease some of the batch's writes carried moved on between the two passes."""

    def __init__(self, stale: set[Fence]) -> None:
        super().__init__()
        self.stale = stale


@attrs.define(eq=False)
class _Slot:
    """One key's row as the batch has left it so far (``id`` None: no row yet)."""

    id: int | None
    uid: str = ""
    revision: int = 0
    text: str | None = None
    dirty: bool = False
    identity: str | None = None
    touched: bool = False
    #: (resource_version, live) as pass 1 read them, checked again under the row lock.
    read: tuple[int, bool] | None = None

    def current(self, key: ObjectKey) -> StoredObject | None:
        if self.text is None:
            return None
        return StoredObject(key, self.uid, self.revision, load_body(self.text, self.revision, key))


@attrs.define(eq=False)
class _Event:
    revision: int
    key: ObjectKey
    slot: _Slot
    uid: str
    type: str
    body: Body | None
    text: str | None
    data: str | None


async def _load_slots(conn: Any, keys: list[ObjectKey]) -> dict[ObjectKey, _Slot]:
    groups, kinds, namespaces, names = columns(keys, 4)
    rows = await conn.fetch(READ, *sent(names, groups, kinds, namespaces))
    slots: dict[ObjectKey, _Slot] = {}
    for group, kind, namespace, name, row_id, uid, revision, live, text, identity in rows:
        slots[ObjectKey(group, kind, namespace, name)] = _Slot(
            row_id, uid, revision, text, identity=identity, read=(revision, live)
        )
    return slots


@attrs.define(eq=False)
class _Claims:
    """Which live object declares an external resource, as the batch has left it (see
    the SQLite backend's): this batch's claims, the database for the rest. Another
    process's claim made meanwhile is caught by the deferred constraint at COMMIT."""

    conn: Any
    slots: dict[ObjectKey, _Slot]
    claimed: dict[tuple[str, str, str], ObjectKey] = attrs.Factory(dict)

    async def check(self, key: ObjectKey, slot: _Slot, identity: str) -> None:
        holder = self.claimed.get((key.api_group, key.kind, identity))
        if holder is not None and holder != key and self._holds(holder, identity):
            raise claimed(key, identity, holder)
        rows = await self.conn.fetch(
            "SELECT namespace, name FROM reconcile_objects WHERE api_group = $1 AND kind = $2 "
            "AND identity = $3 AND live AND id IS DISTINCT FROM $4",
            key.api_group,
            key.kind,
            identity,
            slot.id,
        )
        for namespace, name in rows:
            other = ObjectKey(key.api_group, key.kind, namespace, name)
            if other not in self.slots or self._holds(other, identity):
                raise claimed(key, identity, other)

    def record(self, key: ObjectKey, identity: str) -> None:
        self.claimed[(key.api_group, key.kind, identity)] = key

    def _holds(self, key: ObjectKey, identity: str) -> bool:
        slot = self.slots[key]
        return slot.text is not None and slot.identity == identity


async def _run_one(
    write: PendingWrite, slot: _Slot, revision: int, events: list[_Event], claims: _Claims, *, expected: int
) -> WriteResult | Written:
    """Pass 1 for one write: the SQLite backend's ``_run_one``, numbering provisionally
    (``expected``: what to add to a provisional revision for the one it will likely get)."""
    current = slot.current(write.key)
    outcome = write.mutation(current)
    if outcome is None:
        return WriteResult(current.resource_version if current else 0, current, written=False)
    changes = (outcome,) if isinstance(outcome, Put | Remove | Note) else tuple(outcome)
    if not changes:
        return WriteResult(current.resource_version if current else 0, current, written=False)
    uid, text, stamped, body = slot.uid, slot.text, slot.revision, None
    identity = slot.identity
    pending: list[_Event] = []
    for offset, change in enumerate(changes):
        at = revision + offset
        data = None if change.data is None else dumps(change.data)
        if isinstance(change, Note):
            if not uid:
                raise NotFoundError(f"{write.key} not found")
            pending.append(_Event(at, write.key, slot, uid, change.event_type, None, None, data))
            continue
        body = change.body
        if isinstance(change, Put) and change.identity is not None and change.identity != identity:
            await claims.check(write.key, slot, change.identity)
            identity = change.identity
        snapshot = stamp(body, at, at + expected)
        uid = str(body.get("metadata", {}).get("uid") or "")
        pending.append(_Event(at, write.key, slot, uid, change.event_type, body, snapshot, data))
        stamped = at
        text = None if isinstance(change, Remove) else snapshot
    events.extend(pending)
    slot.touched = True
    last = pending[-1].revision
    if identity is not None and identity != slot.identity:
        claims.record(write.key, identity)
    if stamped != slot.revision or text != slot.text or identity != slot.identity:
        slot.dirty, slot.uid, slot.revision, slot.text = True, uid, stamped, text
        slot.identity = identity
    if text is None:
        return (last, write.key, uid, stamped, None, None)
    return (last, write.key, uid, stamped, body, current)


async def _attempt(  # noqa: PLR0915 - the two passes, in order, as the module tells them
    conn: Any,
    batch: Sequence[PendingWrite],
    now: float,
    *,
    channel: str,
    all_or_nothing: bool,
    reserved: Callable[[int], None],
    expected: int,
    stale: set[Fence],
    token: str | None,
    forget: str | None,
) -> Committed:
    # Fences are checked in pass 2 only, under lock with the reservation: a lease is
    # rarely lost, and a read of its own would be a round trip of every commit. A write
    # whose fence moved on is refused in the attempt after the one that found it.
    slots = await _load_slots(conn, list({w.key: None for w in batch}))
    claims = _Claims(conn, slots)
    base = provisional_base()
    events: list[_Event] = []
    results: list[WriteResult | Written | BaseException] = []
    owners: list[PendingWrite] = []  # the write of each event
    fenced: list[PendingWrite] = []
    for write in batch:
        if write.fence is not None and write.fence in stale:
            error = _fenced_error(write)
            if all_or_nothing:
                raise error
            results.append(error)
            fenced.append(write)
            continue
        slot = slots.get(write.key)
        if slot is None:
            slot = slots[write.key] = _Slot(None)
        before = len(events)
        try:
            results.append(
                await _run_one(write, slot, base + len(events), events, claims, expected=expected - base)
            )
        except Unstampable:
            raise _Conflict from None
        except Exception as exc:
            if all_or_nothing:
                raise
            results.append(exc)
        owners.extend([write] * (len(events) - before))
    if not events:  # every result is final
        return Committed(0, 0, [made_real(r, 0) for r in results], [], fenced)
    # Pass 2, one statement: the reservation and the locks of the rows the batch writes
    # (nothing before them gives the transaction an id, which must come from the
    # reservation), then the writes; what it returns (the block, the locked rows as they
    # are now, the fences) is checked before COMMIT, and a check that fails rolls it all
    # back (see the module's story).
    held = [s for s in slots.values() if s.touched and s.id is not None]
    writing = {w.fence for w in owners if w.fence is not None}
    runner = {f for f in writing if f.shard == RUNNER_LOCK}
    leases = sorted(writing - runner, key=lambda f: (f.shard, f.epoch, f.holder))
    params: list[Any] = [len(events), [s.id for s in held]]
    if runner:
        params.append(RUNNER_FENCE)
    if leases:
        params += [[f.shard for f in leases], [f.holder for f in leases], [f.epoch for f in leases]]
    new = [(k, s) for k, s in slots.items() if s.dirty and s.id is None]
    changed = [s for s in slots.values() if s.dirty and s.read is not None]
    placed = {id(s): n for n, (_, s) in enumerate(new, 1)}
    groups, kinds, namespaces, names, *others = columns(
        [(*k, s.uid, s.revision, s.text is not None, s.identity) for k, s in new], 8
    )
    # An event of a new row: the row's place, negated, and no uid when it is the row's.
    appended = [
        (-placed[id(e.slot)], None if e.uid == e.slot.uid else e.uid, e.type, w.actor, e.text, e.data, w.user)
        if e.slot.id is None
        else (e.slot.id, e.uid, e.type, w.actor, e.text, e.data, w.user)
        for e, w in zip(events, owners, strict=True)
    ]
    rows = await conn.fetch(
        WRITE[bool(runner), bool(leases), token is not None],
        *params,
        *sent(names, groups, kinds, namespaces, *others),
        *sent(*columns(appended, 7)),
        *sent(*columns([(s.id, s.uid, s.revision, s.text is not None, s.identity) for s in changed], 5)),
        base,
        now,
        channel,
        *(() if token is None else (token, forget)),
    )
    first = int(rows[0][0])
    reserved(first)
    if writing:
        # Under lock: a takeover committed before this (refused: run again without the
        # writes it fences) or waits until this transaction ends.
        moved = {f for f in runner if (rows[0][4], rows[0][5]) != (f.holder, f.epoch)}
        moved |= {leases[place - 1] for place in (rows[0][-1] if leases else None) or ()}
        if moved:
            raise _Fenced(moved)
    if held:
        now_rows = {row[1]: (row[2], row[3]) for row in rows}
        if any(now_rows.get(s.id) != s.read for s in held):
            raise _Conflict
    shift = first - base
    for event in events:
        provisional = event.revision
        event.revision += shift
        if event.body is not None and event.text is not None:
            event.body["metadata"]["resourceVersion"] = event.revision
            # What the server made of it (pass 1 made sure the pair is there once).
            event.text = restamped(event.text, provisional, event.revision)
            if too_large(event.text, event.body["metadata"]):
                # Other processes took more revisions than expected, and this body, at
                # the limit to the byte, grew a digit: run again, measured anew.
                raise _Conflict
    last = events[-1].revision
    return Committed(
        first,
        last,
        [made_real(r, shift) for r in results],
        [
            EventRow(e.revision, now, e.type, e.key, e.uid, w.actor, e.text, e.data, w.user)
            for e, w in zip(events, owners, strict=True)
        ],
        fenced,
    )


#: A commit's transaction begins (one round trip, as BEGIN alone would) with its plans
#: told to look rows up by key: a prepared statement keeps the plan it was given while
#: the store was new and its tables empty, where scanning a whole table was cheapest,
#: and would go on scanning them, ever larger, on every commit of the connection. And
#: told to use the plan made once: left to choose (``auto``), the server planned the
#: reservation anew at every commit (its generic plan looked dearer than a custom one
#: for an empty array of rows), 0.7 µs of server CPU a write at 100 writes a commit.
_BEGIN = (
    "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL enable_seqscan = off; "
    "SET LOCAL plan_cache_mode = force_generic_plan"
)


@contextlib.asynccontextmanager
async def _transaction(conn: Any) -> AsyncIterator[None]:
    """One commit's transaction: committed at the end, rolled back on any exception."""
    await conn.execute(_BEGIN)
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):  # a broken connection: the server rolls back
            await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


async def commit_batch(
    conn: Any,
    batch: Sequence[PendingWrite],
    now: float,
    *,
    channel: str,
    all_or_nothing: bool = False,
    reserved: Callable[[int], None] = lambda _first: None,
    expected: Callable[[], int] = lambda: 1,
    token: str | None = None,
    forget: str | None = None,
    staged: Callable[[Committed], None] = lambda _committed: None,
) -> Committed:
    """Apply ``batch`` in one transaction (see the module's story), running it again when
    another process's write got in the way; ``reserved`` is told the first revision of
    the block as soon as the transaction holds it; ``expected()`` is a revision the block
    will start at or after (the head this process knows, plus one: what bodies are
    measured against the size limit with, the check made exact in pass 2). With ``all_or_nothing`` the first
    mutation that raises rolls the whole batch back, and its exception is raised.

    ``token``, the batch's idempotency key, is written in the transaction (``forget``,
    the writer's previous one, deleted) and ``staged`` told what is about to commit just
    before ``COMMIT``: what the writer reports if the answer is lost but the key is
    found (see :mod:`.retrying`)."""
    import asyncpg  # noqa: PLC0415 - imported with the backend only

    retry = (
        _Conflict,
        asyncpg.DeadlockDetectedError,
        asyncpg.UniqueViolationError,
        asyncpg.ExclusionViolationError,
        asyncpg.SerializationError,
    )
    stale: set[Fence] = set()  # a lease that moved on never comes back: kept across attempts
    for _ in range(_ATTEMPTS):
        try:
            async with _transaction(conn):
                committed = await _attempt(
                    conn,
                    batch,
                    now,
                    channel=channel,
                    all_or_nothing=all_or_nothing,
                    reserved=reserved,
                    expected=expected(),
                    stale=stale,
                    token=token,
                    forget=forget,
                )
                if token is not None and committed.appended:  # its key is in the transaction
                    staged(committed)
        except _Fenced as fenced:
            stale |= fenced.stale
            continue
        except retry:
            continue
        return committed
    raise StoreError(f"a batch of {len(batch)} writes met other processes' writes {_ATTEMPTS} times; gave up")
