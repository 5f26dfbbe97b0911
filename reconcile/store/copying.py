"""Copying a whole store into an empty one, across backends (``reconcile migrate``):
SQLite to PostgreSQL when a user outgrows one machine, and back.

Everything goes through the store contract, so any backend copies into any other: the
source is read in one consistent snapshot (:meth:`EventStore.snapshot`), streamed a
batch at a time (a store larger than memory copies), and written into the target in one
transaction (:meth:`EventStore.importing`), which sets the copied head revision, horizon,
identity, secret mark key and remembered settings at its end, so the target's revisions
continue from the source's head and a failure leaves the target as empty as it was.

Every event is copied as it is stored: revision, time, type, key, uid, actor, user, body
and data text, byte for byte. The copy is then checked, not trusted: the target is read
back through its own snapshot and its counts, its meta and two checksums (over the events
in revision order, and over the projection in key order, computed by one function for
both sides: :class:`Checksums`) must equal the source's; then the target's projection is
rebuilt from its log (``verify``).

Refused, with nothing written, before the target is opened for writing: a source that
does not exist, a target that is the source (the same identity, however its URL is
spelled), a target that is not empty (named: what it holds), and a runner at work on
either (``reconcile run`` holds the ``runner`` claim; migrate takes both claims for the
copy's length, so none starts meanwhile). A one-shot write to the source during the copy
(an ``apply``) is wholly in the snapshot or wholly out of it; one that lands after the
snapshot began is not in the copy, and the report says the source moved on.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import attrs
import orjson

from reconcile.errors import LockedError, StoreError
from reconcile.store.contract import EventStore, ObjectRecord, RawEvent, StoreHeader
from reconcile.store.urls import locate_store, open_store

__all__ = [
    "Checksums",
    "CopyMismatchError",
    "CopyRefusedError",
    "CopyReport",
    "Progress",
    "check_copy",
    "copy_store",
    "migrate",
]

#: Rows per batch: read, checksummed and written together.
BATCH = 2000
#: ``progress(stage, done, total)``: after each batch, stage ``"objects"`` or ``"events"``.
Progress = Callable[[str, int, int], None]


class CopyRefusedError(StoreError):
    """The copy was refused before anything was written (bad input: fix it and retry)."""


class CopyMismatchError(StoreError):
    """The copy was committed, but reading it back (or verifying it) found a difference
    from the source: the target holds a copy not to be trusted (empty it and copy again)."""


class Checksums:
    """SHA-256 over the events in revision order and over the projection in key order:
    each row folded in as one JSON array of its fields (self-delimiting, so no two
    different rows hash alike; a time as the shortest text that reads back as the same
    double, exact), the same function on both sides of a copy."""

    def __init__(self) -> None:
        self._events = hashlib.sha256()
        self._objects = hashlib.sha256()

    def add_events(self, batch: Sequence[RawEvent]) -> None:
        """Fold events in (in revision order)."""
        update = self._events.update
        for e in batch:
            key = e.key
            update(
                orjson.dumps(
                    [
                        e.revision,
                        e.time,
                        e.type,
                        key.api_group,
                        key.kind,
                        key.namespace,
                        key.name,
                        e.uid,
                        e.actor,
                        e.user,
                        e.body_text,
                        e.data_text,
                    ]
                )
            )

    def add_objects(self, batch: Sequence[ObjectRecord]) -> None:
        """Fold projection rows in (in key order)."""
        update = self._objects.update
        for row in batch:
            key = row.key
            update(
                orjson.dumps(
                    [
                        key.api_group,
                        key.kind,
                        key.namespace,
                        key.name,
                        row.uid,
                        row.resource_version,
                        row.live,
                        row.identity,
                    ]
                )
            )

    @property
    def events(self) -> str:
        """The events' checksum, hexadecimal."""
        return self._events.hexdigest()

    @property
    def objects(self) -> str:
        """The projection's checksum, hexadecimal."""
        return self._objects.hexdigest()


@attrs.frozen
class CopyReport:
    """What a copy did: the source's header (what was copied), the checksums both sides
    agree on, the target's verify, how long it took, and how far the source moved on
    meanwhile (0: not at all)."""

    header: StoreHeader
    events_checksum: str
    objects_checksum: str
    seconds: float
    verified: bool = False
    source_moved: int = 0


async def copy_store(
    source: EventStore, target: EventStore, *, batch: int = BATCH, progress: Progress | None = None
) -> CopyReport:
    """Copy ``source`` (one snapshot) into the empty ``target`` (one transaction), then
    check the copy (:func:`check_copy`); StoreError when the target is not empty or the
    copy differs."""
    started = time.monotonic()
    sums = Checksums()
    async with source.snapshot() as snapshot:
        header = snapshot.header
        async with target.importing(header) as writing:
            done = 0
            async for objects in snapshot.objects(batch):
                sums.add_objects(objects)
                await writing.objects(objects)
                done += len(objects)
                if progress is not None:
                    progress("objects", done, header.objects)
            done = 0
            async for events in snapshot.events(batch):
                sums.add_events(events)
                await writing.events(events)
                done += len(events)
                if progress is not None:
                    progress("events", done, header.events)
    if progress is not None:
        progress("checking", 0, header.events)
    await check_copy(header, sums, target, batch=batch)
    report = await target.verify()
    if not report.ok:
        raise CopyMismatchError(
            f"{target.url}: the copy does not verify: {'; '.join(report.differences[:5])}"
        )
    moved = max(0, await source.revision() - header.revision)
    return CopyReport(
        header, sums.events, sums.objects, time.monotonic() - started, verified=True, source_moved=moved
    )


async def check_copy(header: StoreHeader, sums: Checksums, target: EventStore, *, batch: int = BATCH) -> None:
    """Read ``target`` back and compare it with what was copied: the counts, the head,
    horizon, identity, mark key (compared, never shown) and settings, and both checksums;
    CopyMismatchError naming every difference."""
    again = Checksums()
    async with target.snapshot() as snapshot:
        copied = snapshot.header
        async for objects in snapshot.objects(batch):
            again.add_objects(objects)
        async for events in snapshot.events(batch):
            again.add_events(events)
    differences = [
        f"{name}: source {mine}, copy {theirs}"
        for name, mine, theirs in (
            ("events", header.events, copied.events),
            ("objects", header.objects, copied.objects),
            ("live objects", header.live, copied.live),
            ("head revision", header.revision, copied.revision),
            ("horizon", header.horizon, copied.horizon),
            ("identity", header.identity or copied.identity, copied.identity),
            ("settings", dict(header.settings), dict(copied.settings)),
            ("events checksum", sums.events, again.events),
            ("objects checksum", sums.objects, again.objects),
        )
        if mine != theirs
    ]
    if header.mark_key and header.mark_key != copied.mark_key:
        differences.append("mark key: differs (not shown)")
    if differences:
        raise CopyMismatchError(f"{target.url}: the copy differs from the source: {'; '.join(differences)}")


@contextlib.asynccontextmanager
async def _claimed(store: EventStore, role: str) -> AsyncIterator[None]:
    try:
        claim = await store.claim("runner")
    except LockedError as exc:
        raise CopyRefusedError(
            f"{store.url}: the {role} is in use: {exc.holder} holds the runner lock (stop "
            "`reconcile run` there first: a runner's writes after the copy began would not be in it)"
        ) from exc
    try:
        yield
    finally:
        claim.release()


async def _check_target(target_url: str | Path, header: StoreHeader, source: EventStore) -> None:
    """Refuse, reading only, a target that is the source or is not empty."""
    location = locate_store(target_url)
    if not location.exists() or location.size() == 0:
        return
    existing = await open_store(target_url, read_only=True)
    try:
        async with existing.snapshot() as snapshot:
            held = snapshot.header
    finally:
        await existing.close()
    if held.identity and held.identity == header.identity:
        raise CopyRefusedError(
            f"{location.where} has the identity of the source ({source.url}): it is the same store, "
            "or a copy of it already"
        )
    if not held.empty:
        raise CopyRefusedError(
            f"{location.where}: not empty: holds {held.holds()}; migrate copies into an empty store only "
            "(give a new database, schema or file)"
        )


async def migrate(
    source_url: str | Path, target_url: str | Path, *, batch: int = BATCH, progress: Progress | None = None
) -> CopyReport:
    """Copy the store at ``source_url`` into the empty store at ``target_url`` (created if
    need be), claims held on both: see the module's docstring. CopyRefusedError for what
    is refused before anything is written; StoreError for a failure during the copy
    (the target's transaction rolled back: it is left empty)."""
    with _refusing():
        source_location = locate_store(source_url)
        target_location = locate_store(target_url)
        if not source_location.exists():
            raise CopyRefusedError(f"{source_location.where}: no store there to copy")
        if source_location.where == target_location.where:
            raise CopyRefusedError(f"{source_location.where}: the source and the target are the same store")
        source = await open_store(source_url, read_only=True)
    try:
        async with _claimed(source, "source"):
            with _refusing():
                async with source.snapshot() as peek:
                    header = peek.header
                await _check_target(target_url, header, source)
                target = await open_store(target_url)
            try:
                async with _claimed(target, "target"):
                    return await copy_store(source, target, batch=batch, progress=progress)
            finally:
                await target.close()
    finally:
        await source.close()


@contextlib.contextmanager
def _refusing() -> Iterator[None]:
    """What fails before the copy begins (a malformed URL, a server out of reach, a file
    that is not a store) is a refusal: nothing was written."""
    try:
        yield
    except CopyRefusedError:
        raise
    except StoreError as exc:
        raise CopyRefusedError(str(exc)) from exc
