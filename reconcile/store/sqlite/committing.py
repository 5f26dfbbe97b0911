"""Group commit: one transaction, one fsync, for every write that queued meanwhile.

The backend's writer task takes all pending writes and commits them in two parts. On the
event loop, holding the write lock (:func:`begin`, ``BEGIN IMMEDIATE``, which also
serializes us with other processes on the same file; when another holds it,
:func:`begin_waiting` waits for it on the connection's thread), :func:`prepare_batch`
reads the head revision and the current rows of every key in the batch, runs each
write's mutation in submission order against the in-batch state, and makes every row:
JSON bodies, keys, revisions. Then :func:`commit_batch`, on the writer connection's
thread, only inserts the events and upserts the projection rows with ``executemany`` and
commits: no Python work per row there, so the thread holds the GIL for a few
statements per batch and the loop keeps working while SQLite writes and fsyncs.

A mutation that raises fails only its own write, except in an all-or-nothing batch
(``EventStore.write_many``), which it rolls back whole. Revisions are assigned under the
write lock, so they are gap-free and in commit order: a watcher can never see revision
N+1 before N.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, TypeVar

import attrs

from reconcile.errors import FieldError, InvalidError, NotFoundError
from reconcile.model.meta import ObjectKey
from reconcile.store.claiming import claimed
from reconcile.store.contract import (
    MAX_OBJECT_BYTES,
    Body,
    Mutation,
    Note,
    Put,
    Remove,
    StoredObject,
    WriteResult,
)
from reconcile.store.encoding import dumps, load_body
from reconcile.store.recent import EventRow

__all__ = [
    "PendingWrite",
    "Prepared",
    "begin",
    "begin_waiting",
    "commit_batch",
    "prepare_batch",
    "rollback",
    "waiting",
]

T = TypeVar("T")

_NAMES_PER_QUERY = 500
_HEAD_AND_NEXT_ID = (
    "SELECT value, (SELECT coalesce(max(id), 0) + 1 FROM objects) FROM meta WHERE key = 'revision'"
)
#: A batch of one write (a lone writer's, most of a reconcile's): the head, the next
#: object id and the key's row (see _load_slots), all in one statement made once. The
#: head's row is always there; the key's row is joined to it (NULLs when it is new).
_HEAD_AND_SLOT = (
    "SELECT m.value, (SELECT coalesce(max(id), 0) + 1 FROM objects), o.id, o.uid, o.resource_version, "
    "CASE WHEN o.live THEN e.body END, o.identity FROM meta m "
    "LEFT JOIN objects o ON o.api_group = ? AND o.kind = ? AND o.namespace = ? AND o.name = ? "
    "LEFT JOIN events e ON e.revision = o.resource_version WHERE m.key = 'revision'"
)
#: What a mutation returns when it makes one change (else a sequence of them).
_CHANGES = (Put, Remove, Note)


@attrs.define(eq=False)
class PendingWrite:
    """A write waiting for the next batch."""

    key: ObjectKey
    mutation: Mutation
    actor: str
    user: str | None = None


@attrs.define(eq=False)
class _Slot:
    """One key's row as the batch has left it so far."""

    id: int
    uid: str = ""
    revision: int = 0
    text: str | None = None
    dirty: bool = False
    identity: str | None = None

    def current(self, key: ObjectKey) -> StoredObject | None:
        # Each mutation gets its own parsed copy: mutations must not alter their argument,
        # and a failed one must leave nothing behind for the next write of this key.
        if self.text is None:
            return None
        return StoredObject(key, self.uid, self.revision, load_body(self.text, self.revision, key))


def _head_and_slot(conn: sqlite3.Connection, key: ObjectKey) -> tuple[int, int, dict[ObjectKey, _Slot]]:
    head, next_id, row_id, uid, revision, text, identity = conn.execute(
        _HEAD_AND_SLOT, (key.api_group, key.kind, key.namespace, key.name)
    ).fetchone()
    if row_id is None:
        return head, next_id, {}
    return head, next_id, {key: _Slot(row_id, uid, revision, text, identity=identity)}


def _load_slots(conn: sqlite3.Connection, keys: list[ObjectKey]) -> dict[ObjectKey, _Slot]:
    # Keys of one kind and namespace are fetched with one statement, ``name IN (...)``,
    # which SQLite answers with one index seek per name. (A row-value IN over all four
    # columns is planned as a scan of the whole table: O(objects) per batch.)
    groups: dict[tuple[str, str, str], list[str]] = {}
    for key in keys:
        groups.setdefault((key.api_group, key.kind, key.namespace), []).append(key.name)
    slots: dict[ObjectKey, _Slot] = {}
    for (group, kind, namespace), names in groups.items():
        for start in range(0, len(names), _NAMES_PER_QUERY):
            chunk = names[start : start + _NAMES_PER_QUERY]
            rows = conn.execute(
                "SELECT o.name, o.id, o.uid, o.resource_version, CASE WHEN o.live THEN e.body END, "
                "o.identity FROM objects o LEFT JOIN events e ON e.revision = o.resource_version "
                "WHERE o.api_group = ? "
                f"AND o.kind = ? AND o.namespace = ? AND o.name IN ({','.join('?' * len(chunk))})",
                (group, kind, namespace, *chunk),
            )
            for name, row_id, uid, revision, text, identity in rows:
                slots[ObjectKey(group, kind, namespace, name)] = _Slot(
                    row_id, uid, revision, text, identity=identity
                )
    return slots


def _stamp(body: Body, revision: int) -> str:
    metadata = body.setdefault("metadata", {})
    metadata["resourceVersion"] = revision
    text = dumps(body)
    # A character is at most 4 bytes of UTF-8: only long texts need encoding to measure.
    # An object being deleted is never refused for its size: deletion must always finish
    # (admission keeps ADMISSION_HEADROOM free, so only a status that grew past it gets here).
    deleting = metadata.get("deletionTimestamp") is not None
    if not deleting and len(text) > MAX_OBJECT_BYTES // 4 and len(text.encode("utf-8")) > MAX_OBJECT_BYTES:
        metadata["resourceVersion"] = None
        reason = f"object is larger than {MAX_OBJECT_BYTES} bytes when serialized"
        raise InvalidError([FieldError("", reason)])
    return text


def begin(conn: sqlite3.Connection) -> bool:
    """``BEGIN IMMEDIATE`` at once, on the loop (the writer connection waits for no lock
    unless asked: see :func:`waiting`): False when another connection holds the write
    lock (then :func:`begin_waiting` waits for it on the connection's thread)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # SQLITE_BUSY_RECOVERY too
            raise
        return False
    return True


def waiting(conn: sqlite3.Connection, wait_ms: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(conn, *args)`` with the busy timeout on (on the connection's thread): it waits
    up to ``wait_ms`` for another connection's lock, then back to no waiting."""
    conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
    try:
        return fn(conn, *args)
    finally:
        conn.execute("PRAGMA busy_timeout = 0")


def begin_waiting(conn: sqlite3.Connection, wait_ms: int) -> None:
    """``BEGIN IMMEDIATE``, waiting up to ``wait_ms`` (on the connection's thread)."""
    waiting(conn, wait_ms, _begin)


def _begin(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")


def rollback(conn: sqlite3.Connection) -> None:
    """End the open transaction, storing nothing of it."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@attrs.define(eq=False)
class Prepared:
    """A batch made ready under the write lock: the rows to insert, what each write
    returns, and the events appended (once committed)."""

    #: The head once committed.
    head: int
    results: list[WriteResult | BaseException]
    #: What the commit runs: each statement with its rows (``executemany``), the
    #: projection's rows that change, then the events (see :func:`_statements`).
    statements: list[tuple[str, list[Sequence[Any]]]]
    #: The events appended, every column (revision, time, object id, uid, type, actor,
    #: body, data, user).
    events: list[tuple[Any, ...]]
    appended: list[EventRow]


def prepare_batch(
    conn: sqlite3.Connection,
    batch: Sequence[PendingWrite],
    now: float,
    *,
    all_or_nothing: bool = False,
    watched: bool = True,
) -> Prepared:
    """Run ``batch``'s mutations in submission order against the rows as the open write
    transaction sees them (on the loop: reads are index seeks into the page cache), and
    make every row the commit writes. With ``all_or_nothing`` the first mutation that
    raises is raised (the caller rolls back). Not ``watched`` (no watch is open), the
    events for the recent window (:attr:`Prepared.appended`) are not made."""
    # The head and the next object id in one statement (the id is a seek to the end of
    # the table's b-tree: cheaper than a second statement for the batches that need it);
    # a batch of one write reads its key's row in that statement too.
    if len(batch) == 1:
        head, next_id, slots = _head_and_slot(conn, batch[0].key)
    else:
        head, next_id = conn.execute(_HEAD_AND_NEXT_ID).fetchone()
        slots = _load_slots(conn, list({w.key: None for w in batch}))
    claims = _Claims(conn, slots)
    events: list[tuple[Any, ...]] = []
    results: list[WriteResult | BaseException] = []
    for write in batch:
        slot = slots.get(write.key)
        if slot is None:
            slot = slots[write.key] = _Slot(next_id)
            next_id += 1
        try:
            results.append(_run_one(write, slot, head + 1, now, events, claims=claims))
        except Exception as exc:
            if all_or_nothing:
                raise  # the caller rolls back: nothing of the batch is stored
            results.append(exc)  # delivered to that write's caller
        if events:
            head = events[-1][0]
    statements = _statements(slots, events)
    if not (watched and events):
        return Prepared(head, results, statements, events, [])
    keys = {slot.id: key for key, slot in slots.items()}
    appended = [
        EventRow(revision, at, type_, keys[object_id], uid, actor, body, data, user)
        for revision, at, object_id, uid, type_, actor, body, data, user in events
    ]
    return Prepared(head, results, statements, events, appended)


# The statements a commit runs, each with the rows it takes. A NULL the row would bind is
# written in the statement instead, and ``live`` is bound as an int, not a bool: sqlite3
# binds only an exact int, float, str or bytearray directly, and anything else (None, a
# bool) through its adaptation protocol, about 0.3 µs per value per row (measured: the
# events' two usually-NULL columns took a third of their INSERT's time). And the rows go
# :data:`_ROWS_PER_STATEMENT` at a time into one statement (``VALUES (...), (...)``),
# the rest one at a time: ``executemany`` pays per statement it runs (a step of SQLite's
# with the interpreter's lock let go and taken back, a reset), and an event's INSERT
# took 1.8 µs one row a statement against 1.2 at 64 (20,000 events, measured). The rows
# and what is stored are the same either way.
_ROWS_PER_STATEMENT = 64


@attrs.frozen
class _Insert:
    """One statement, for one row and for :data:`_ROWS_PER_STATEMENT` rows."""

    one: str
    many: str
    #: Parameters per row.
    width: int


def _insert(head: str, values: str, tail: str = "") -> _Insert:
    many = ",".join([values] * _ROWS_PER_STATEMENT)
    return _Insert(f"{head} {values}{tail}", f"{head} {many}{tail}", values.count("?"))


_UPSERT_OBJECT_HEAD = (
    "INSERT INTO objects (id, api_group, kind, namespace, name, uid, resource_version, live, identity) VALUES"
)
_UPSERT_OBJECT_TAIL = (
    " ON CONFLICT (id) DO UPDATE SET uid = excluded.uid, resource_version = excluded.resource_version, "
    "live = excluded.live, identity = excluded.identity"
)
_UPSERT_OBJECT_DECLARING = _insert(_UPSERT_OBJECT_HEAD, "(?,?,?,?,?,?,?,?,?)", _UPSERT_OBJECT_TAIL)
_UPSERT_OBJECT_PLAIN = _insert(_UPSERT_OBJECT_HEAD, "(?,?,?,?,?,?,?,?,NULL)", _UPSERT_OBJECT_TAIL)
# The events' columns: revision, time, object_id, uid, type, actor, body, data, user.
_INSERT_EVENT = _insert("INSERT INTO events VALUES", "(?,?,?,?,?,?,?,?,?)")
_INSERT_EVENT_NO_DATA_NO_USER = _insert("INSERT INTO events VALUES", "(?,?,?,?,?,?,?,NULL,NULL)")
_INSERT_EVENT_NO_DATA = _insert("INSERT INTO events VALUES", "(?,?,?,?,?,?,?,NULL,?)")
_NO_DATA = itemgetter(0, 1, 2, 3, 4, 5, 6, 8)


def _statements(
    slots: dict[ObjectKey, _Slot], events: list[tuple[Any, ...]]
) -> list[tuple[str, list[Sequence[Any]]]]:
    """The projection's rows that change (upserted) and the ``events`` (inserted), each
    with the statement that writes it binding no NULL, many rows a statement (see
    above); statements with no row left out."""
    # Each statement's parameters, row after row in one list.
    plain: list[Any] = []
    declaring: list[Any] = []
    for key, slot in slots.items():
        if slot.dirty:
            live = 0 if slot.text is None else 1
            row = (slot.id, key.api_group, key.kind, key.namespace, key.name, slot.uid, slot.revision, live)
            if slot.identity is None:
                plain += row
            else:
                declaring += row
                declaring.append(slot.identity)
    bare: list[Any] = []  # neither data nor user
    by_user: list[Any] = []  # no data
    full: list[Any] = []
    for event in events:
        if event[7] is not None:
            full += event
        elif event[8] is None:
            bare += event[:7]
        else:
            by_user += _NO_DATA(event)
    statements: list[tuple[str, list[Sequence[Any]]]] = []
    for insert, flat in (
        (_UPSERT_OBJECT_PLAIN, plain),
        (_UPSERT_OBJECT_DECLARING, declaring),
        (_INSERT_EVENT_NO_DATA_NO_USER, bare),
        (_INSERT_EVENT_NO_DATA, by_user),
        (_INSERT_EVENT, full),
    ):
        width = insert.width
        step = width * _ROWS_PER_STATEMENT
        whole = len(flat) - len(flat) % step  # the parameters of the rows that fill statements
        if whole:
            statements.append((insert.many, [flat[at : at + step] for at in range(0, whole, step)]))
        if whole < len(flat):
            statements.append((insert.one, [flat[at : at + width] for at in range(whole, len(flat), width)]))
    return statements


def commit_batch(conn: sqlite3.Connection, prepared: Prepared) -> None:
    """Write a prepared batch and commit (on the connection's thread): an ``executemany``
    per statement (at most ten), the head and the commit, no Python work per row.
    Rolled back when any of them fails."""
    try:
        for statement, rows in prepared.statements:
            conn.executemany(statement, rows)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (prepared.head,))
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


@attrs.define(eq=False)
class _Claims:
    """Which live object declares an external resource, as the batch has left it: what
    this batch claimed (an index, kept as its writes succeed), the database for the rest
    (one indexed seek, made only by a write whose identity is new)."""

    conn: sqlite3.Connection
    slots: dict[ObjectKey, _Slot]
    claimed: dict[tuple[str, str, str], ObjectKey] = attrs.Factory(dict)

    def check(self, key: ObjectKey, slot: _Slot, identity: str) -> None:
        """InvalidError naming the other object when one declares ``identity``."""
        holder = self.claimed.get((key.api_group, key.kind, identity))
        if holder is not None and holder != key and self._holds(holder, identity):
            raise claimed(key, identity, holder)
        rows = self.conn.execute(
            "SELECT namespace, name FROM objects WHERE api_group = ? AND kind = ? AND identity = ? "
            "AND live AND id != ?",
            (key.api_group, key.kind, identity, slot.id),
        )
        for namespace, name in rows:
            other = ObjectKey(key.api_group, key.kind, namespace, name)
            if other not in self.slots or self._holds(other, identity):  # a slot of this batch is newer
                raise claimed(key, identity, other)

    def record(self, key: ObjectKey, identity: str) -> None:
        """``key``'s write that declares ``identity`` succeeded."""
        self.claimed[(key.api_group, key.kind, identity)] = key

    def _holds(self, key: ObjectKey, identity: str) -> bool:
        slot = self.slots[key]
        return slot.text is not None and slot.identity == identity


def _run_one(
    write: PendingWrite,
    slot: _Slot,
    revision: int,
    now: float,
    events: list[tuple[Any, ...]],
    *,
    claims: _Claims,
) -> WriteResult:
    current = None if slot.text is None else slot.current(write.key)
    outcome = write.mutation(current)
    if outcome is None:
        return WriteResult(current.resource_version if current else 0, current, written=False)
    changes = (outcome,) if isinstance(outcome, _CHANGES) else tuple(outcome)
    if not changes:
        return WriteResult(current.resource_version if current else 0, current, written=False)
    # Work on copies, so a change that fails (too large, no object) leaves nothing behind:
    # a write is all or nothing, whatever number of events it appends (its rows are
    # taken back out of ``events``).
    uid, text, stamped, body = slot.uid, slot.text, slot.revision, None
    identity = slot.identity
    object_id, actor, user = slot.id, write.actor, write.user
    first, at = len(events), revision - 1
    try:
        for change in changes:
            at += 1
            data = None if change.data is None else dumps(change.data)
            if isinstance(change, Note):
                if not uid:
                    raise NotFoundError(f"{write.key} not found")  # noqa: TRY301 - its rows taken out below
                events.append((at, now, object_id, uid, change.event_type, actor, None, data, user))
                continue
            body = change.body
            if isinstance(change, Put) and change.identity is not None and change.identity != identity:
                claims.check(write.key, slot, change.identity)
                identity = change.identity
            snapshot = _stamp(body, at)
            uid = str(body["metadata"].get("uid") or "")  # _stamp made sure of "metadata"
            events.append((at, now, object_id, uid, change.event_type, actor, snapshot, data, user))
            stamped = at
            text = None if isinstance(change, Remove) else snapshot
    except BaseException:
        del events[first:]
        raise
    if identity is not None and identity != slot.identity:
        claims.record(write.key, identity)
    if stamped != slot.revision or text != slot.text or identity != slot.identity:
        slot.dirty, slot.uid, slot.revision, slot.text = True, uid, stamped, text
        slot.identity = identity
    if text is None:
        return WriteResult(at, None, written=True)
    if body is None:  # notes only: the object is as it was
        return WriteResult(at, current, written=True)
    return WriteResult(at, StoredObject(write.key, uid, stamped, body), written=True)
