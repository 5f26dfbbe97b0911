"""Applying many manifests at once: every document admitted in one pass, one mutation per
document (its immutable-field, version and deletion checks inside it), writes queued
at once so they share group commits (no task per document), one result per document.

What the CLI's ``apply -f dir/``, the Runtime and the benchmarks use instead of batching
``Client.apply`` calls of their own.

``check_all_first`` makes it all or nothing *before any write*: every document is
admitted, and every mutation is dry-run against what is stored (the same function the
write runs, so the same checks) together with the identity claims, and if any is refused
nothing is written. The writes themselves are one store write per object, committed in
group commits, not one multi-object transaction: a store failure in the middle (a full
disk), or a process killed in the middle, leaves the documents before it applied and
says so in their results. ``stop`` is asked before each run of writes is queued: a
caller stopping on a signal ends the apply cleanly after the run in flight, the rest
``skipped``.

``atomic`` makes it all or nothing *through the writes too*: it implies
``check_all_first``, and every document is written in one store transaction
(``EventStore.write_many``), so a refusal found only then (a conflicting write that came
after the check), a full disk, a crash or a SIGKILL leaves none of them stored. It costs
holding the store's write lock for the whole apply (other writers wait: about 0.2 s for
10,000 small documents) and every serialized body in memory at once.

``prune`` deletes objects with the documents (kubectl's ``apply --prune``: what the
caller found selected but not declared any more), each only if it is still at the
resource_version the caller saw (a ConflictError otherwise: somebody changed it since,
so the decision to delete it was made on stale state). With ``atomic`` the deletions go
in the same transaction as the documents: all of it or none. Without, they are written
after every document was, and only if none was refused or failed and no stop was asked:
a document that did not land never leaves its old self pruned. Their results follow the
documents', ``pruned`` (or ``unchanged`` for one already being deleted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs

from reconcile.api.admission import Admission, Admitted, warned
from reconcile.api.conflicts import Declared, conflict_error, conflicting
from reconcile.api.decoding import Decoder
from reconcile.api.owning import check_cycle
from reconcile.api.reading import KindRef
from reconcile.errors import FieldError, InvalidError, OwnershipCycleError, ReconcileError, StoreError
from reconcile.model.meta import ObjectKey
from reconcile.model.resource import AnyResource
from reconcile.store.contract import EventStore, Mutation, StoredObject, WriteResult

__all__ = ["Applied", "Deferred", "Outcome", "Write", "Writer", "apply_many"]

Outcome = Literal["created", "configured", "unchanged", "refused", "skipped", "pruned"]


class Deferred:
    """A value made when first asked for, then kept."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], AnyResource | None]) -> None:
        self._make: Callable[[], AnyResource | None] | None = make
        self._value: AnyResource | None = None

    def get(self) -> AnyResource | None:
        """The value (made now if this is the first time)."""
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value


def _resolved(value: AnyResource | Deferred | None) -> AnyResource | None:
    return value.get() if isinstance(value, Deferred) else value


@attrs.frozen
class Applied:
    """What applying one manifest did."""

    #: The object's key (None when the manifest did not get as far as having one).
    key: ObjectKey | None
    #: ``created``, ``configured``, ``unchanged``; ``refused`` (``error`` says why);
    #: ``skipped`` (not written because another document was refused, with
    #: ``check_all_first``); ``pruned`` (deleted by ``prune``).
    outcome: Outcome
    _object: AnyResource | Deferred | None = attrs.field(
        default=None, alias="object", eq=_resolved, repr=lambda value: repr(_resolved(value))
    )
    error: Exception | None = None
    #: What the caller should hear about: each admission hook that broke under
    #: ``Ignore`` (the object's history records it as ``AdmissionHookIgnored``).
    warnings: tuple[str, ...] = ()

    @property
    def object(self) -> AnyResource | None:
        """The object after the apply (None unless it was written or was unchanged).
        Decoded when first read: a bulk apply whose caller reads only the outcomes (the
        CLI's ``apply -f``) decodes nothing."""
        return _resolved(self._object)


class Write(Protocol):
    """One document's apply as a store write (:meth:`Writer.apply_writes` makes them):
    the store's mutation, with its object's key and what makes its result."""

    @property
    def key(self) -> ObjectKey:
        """The object's key."""

    def __call__(self, current: StoredObject | None) -> Any:
        """The apply's change to ``current`` (what the store calls)."""

    def finish(self, result: WriteResult) -> Applied:
        """The :class:`Applied` of the write, once it is durable."""


class Writer(Protocol):
    """What the bulk apply needs of a client: a client's engine-facing side,
    :class:`~reconcile.api.engine.Engine`, is one (``Client.apply_many`` calls
    :func:`apply_many` with its ``engine``, so this module imports neither)."""

    @property
    def store(self) -> EventStore:
        """The store written to."""

    @property
    def user(self) -> str | None:
        """Who asks for the writes (recorded beside the manager)."""

    @property
    def admission(self) -> Admission:
        """What admits each manifest."""

    @property
    def decoder(self) -> Decoder:
        """What reads the stored bodies."""

    async def review(self, admitted: Admitted) -> Admitted:
        """``admitted`` through its kind's admission hooks, or InvalidError."""

    def apply_mutation(
        self,
        admitted: Admitted,
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
    ) -> tuple[ObjectKey, Mutation]:
        """The key and the mutation that applying ``admitted`` is."""

    def apply_write(
        self,
        admitted: Admitted,
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
        now: str | None = None,
    ) -> tuple[ObjectKey, Mutation, Callable[[WriteResult], Applied]]:
        """The key, the mutation and what makes the :class:`Applied` of its write
        (``now``: the creation time of an object it creates; None: the clock's)."""

    def apply_writes(
        self,
        admitted: Sequence[Admitted],
        *,
        manager: str | None = None,
        create_only: bool = False,
        force: bool = False,
        now: str | None = None,
    ) -> Sequence[Write]:
        """:meth:`apply_write` of each, made at once (``now`` taken once for them all)."""

    def now(self) -> str:
        """The time a write made now is stamped with."""

    def delete_mutation(self, key: ObjectKey, *, resource_version: int | None = None) -> Mutation:
        """The mutation that deleting ``key`` is."""

    async def claimant(self, kind: KindRef, spec: Mapping[str, Any]) -> ObjectKey | None:
        """The live object that declares the external resource ``spec`` names, if any."""


async def apply_many(
    client: Writer,
    manifests: Sequence[Mapping[str, Any] | AnyResource | Admitted],
    *,
    manager: str,
    origins: Sequence[Path | None] | None = None,
    check_all_first: bool = False,
    batch: int = 1024,
    on_applied: Callable[[Applied], None] | None = None,
    atomic: bool = False,
    stop: Callable[[], bool] | None = None,
    prune: Sequence[tuple[ObjectKey, int]] = (),
    force: bool = False,
) -> list[Applied]:
    """Apply every manifest; one :class:`Applied` per manifest, in order. A later
    document declaring the same object as an earlier one is applied after it (never in
    the same concurrent run), so it wins, as it would one by one. ``on_applied`` hears of
    each written document as soon as its write is durable (a cache puts it in at once).
    With ``atomic``, all are stored in one transaction or none is. ``stop`` is asked
    before each run of ``batch`` writes (before the one transaction, with ``atomic``):
    when it answers True, the apply ends there, the documents not written ``skipped``.
    ``prune``: objects (key, resource_version) deleted with them (see the module's
    docstring); their results follow the documents'. ``force``: take over the fields
    other field managers own (server-side apply's conflicts)."""
    results: list[Applied | None] = [None] * (len(manifests) + len(prune))
    admitted = await _admit(client, manifests, results, origins=origins)
    pruning = [
        (len(manifests) + offset, key, client.delete_mutation(key, resource_version=version))
        for offset, (key, version) in enumerate(prune)
    ]
    if check_all_first or atomic:
        await _check_all(client, admitted, results, manager, force=force)
        if any(r is not None for r in results):
            return _finished(results, admitted, len(manifests), prune)
    # Every document admitted first, then written run after run. (Admitting a chunk while
    # the one before commits was measured too: no faster, the writer's thread and the
    # loop's holding the one interpreter by turns.)
    writes = _Writes(client, manager, results, on_applied, force=force)
    if atomic:
        if stop is None or not stop():
            await writes.write_all(admitted, pruning)
    else:
        for run in _runs(admitted, batch):
            if stop is not None and stop():
                break
            await writes.write(run)
        landed = all(r is not None and r.error is None for r in results[: len(manifests)])
        if pruning and landed and (stop is None or not stop()):
            await writes.prune(pruning)
    return _finished(results, admitted, len(manifests), prune)


def _finished(
    results: list[Applied | None],
    admitted: list[tuple[int, Admitted]],
    count: int,
    prune: Sequence[tuple[ObjectKey, int]],
) -> list[Applied]:
    """The results, every one not written ``skipped``: the documents', then the prunes'."""
    documents = [
        r or Applied(_key(a), "skipped")
        for r, a in zip(results[:count], _by_index(admitted, count), strict=True)
    ]
    pruned = [r or Applied(key, "skipped") for r, (key, _) in zip(results[count:], prune, strict=True)]
    return documents + pruned


async def _admit(
    client: Writer,
    manifests: Sequence[Mapping[str, Any] | AnyResource | Admitted],
    results: list[Applied | None],
    *,
    origins: Sequence[Path | None] | None,
) -> list[tuple[int, Admitted]]:
    """Admit every manifest; a refusal goes into ``results``, and so does a document that
    cannot coexist with another live object or an earlier document of this apply."""
    admitted: list[tuple[int, Admitted]] = []
    hooked: list[int] = []  # positions in ``admitted`` of those whose kind has hooks
    # Admitted by the caller, who hears of warnings from the results.
    given = {index for index, manifest in enumerate(manifests) if isinstance(manifest, Admitted)}
    # Every other document admitted in one pass (each type's converter functions looked
    # up once for all of them), their outcomes taken in order below.
    admissions = iter(
        client.admission.admit_many(
            [m for index, m in enumerate(manifests) if index not in given],  # type: ignore[misc]
            None if origins is None else [o for index, o in enumerate(origins) if index not in given],
        )
    )
    for index, manifest in enumerate(manifests):
        if index in given:
            assert isinstance(manifest, Admitted)
            item = manifest
        else:
            outcome = next(admissions)
            if isinstance(outcome, InvalidError):
                results[index] = Applied(None, "refused", error=outcome)
                continue
            # (warned() only when there is something to say: it is called per document)
            item = warned(outcome) if outcome.warnings or outcome.ignored else outcome
        if item.kind.hooks and not item.reviewed:
            hooked.append(len(admitted))
        admitted.append((index, item))
    if hooked:
        admitted = await _review(client, admitted, hooked, results, given)
    if any(item.kind.conflicts is not None for _, item in admitted):
        await _refuse_conflicts(client, admitted, results)
        admitted = [(index, item) for index, item in admitted if results[index] is None]
    return admitted


async def _review(
    client: Writer,
    admitted: list[tuple[int, Admitted]],
    hooked: Sequence[int],
    results: list[Applied | None],
    given: set[int],
) -> list[tuple[int, Admitted]]:
    """The admitted documents, those of kinds with admission hooks through their chains
    (concurrently: a hook that waits on something holds up only its own document); a
    refusal goes into ``results`` and the document leaves the list."""
    reviewed = await asyncio.gather(
        *(client.review(admitted[position][1]) for position in hooked), return_exceptions=True
    )
    for position, outcome in zip(hooked, reviewed, strict=True):
        index = admitted[position][0]
        if isinstance(outcome, InvalidError):
            results[index] = Applied(None, "refused", error=outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            admitted[position] = (index, outcome if index in given else warned(outcome, spelling=False))
    return [(index, item) for index, item in admitted if results[index] is None]


@attrs.define(eq=False)
class _Writes:
    """The writes of an apply: each run queued with the store at once (its writes share
    group commits), each result recorded as its write is durable."""

    client: Writer
    manager: str
    results: list[Applied | None]
    on_applied: Callable[[Applied], None] | None
    force: bool = False
    raised: list[BaseException] = attrs.Factory(list)

    async def write(self, run: list[tuple[int, Admitted]]) -> None:
        """Queue ``run``'s writes and wait until each is durable."""
        # One creation time for the run: the documents are applied together.
        now, manager = self.client.now(), self.manager
        writes = self.client.apply_writes(
            [item for _, item in run], manager=manager, force=self.force, now=now
        )
        futures = self.client.store.submit_many(
            [(write.key, write) for write in writes], actor=manager, user=self.client.user
        )
        # The store resolves a run's futures in the order they were queued, a commit's all
        # at once: this task waits on the first one not done, then takes every one done by
        # then (no callback, and no handle on the loop, per write). It wakes before the
        # watches hear of the commit (their wake-ups are scheduled after its), so a cache
        # that ``on_applied`` fills has each object before its watch event.
        taken = 0
        while taken < len(futures):
            future = futures[taken]
            if not future.done():
                try:
                    await future
                except asyncio.CancelledError:  # as a gather would: the writes not begun are not made
                    for each in futures:
                        each.cancel()
                    raise
                except Exception:  # noqa: BLE001, S110 - the write's own error, taken below
                    pass
            while taken < len(futures) and futures[taken].done():
                self._landed(run[taken], writes[taken], futures[taken])
                taken += 1
        if self.raised:
            raise self.raised[0]

    async def write_all(
        self, admitted: list[tuple[int, Admitted]], pruning: Sequence[tuple[int, ObjectKey, Mutation]] = ()
    ) -> None:
        """Write every document, and delete every pruned object, in one store
        transaction: all results, or one refusal (that document or deletion ``refused``,
        the others ``skipped``) and nothing stored."""
        writes = self.client.apply_writes(
            [item for _, item in admitted], manager=self.manager, force=self.force, now=self.client.now()
        )
        # The write whose mutation ran last: when one raises, it names the refused one.
        running: list[tuple[int, ObjectKey | None]] = []

        def tracked(index: int, key: ObjectKey | None, mutation: Mutation) -> Mutation:
            def run(current: StoredObject | None) -> Any:
                running.append((index, key))
                return mutation(current)

            return run

        everything = [
            (write.key, tracked(index, write.key, write))
            for (index, _), write in zip(admitted, writes, strict=True)
        ]
        everything += [(key, tracked(index, key, mutation)) for index, key, mutation in pruning]
        try:
            done = await self.client.store.write_many(everything, actor=self.manager, user=self.client.user)
        except (ReconcileError, OSError) as exc:
            if isinstance(exc, ReconcileError) and not isinstance(exc, StoreError) and running:
                index, key = running[-1]
                self.results[index] = Applied(key, "refused", error=exc)
            else:  # the store failed (a full disk), not a document: every one says so
                for index, item in admitted:
                    self.results[index] = Applied(_key(item), "refused", error=exc)
                for index, key, _ in pruning:
                    self.results[index] = Applied(key, "refused", error=exc)
            return
        for (index, _), write, result in zip(admitted, writes, done[: len(writes)], strict=True):
            applied = self.results[index] = write.finish(result)
            self._heard(applied)
        for (index, key, _), result in zip(pruning, done[len(writes) :], strict=True):
            self.results[index] = _pruned(key, result)

    async def prune(self, pruning: Sequence[tuple[int, ObjectKey, Mutation]]) -> None:
        """Delete the pruned objects (after the documents, without ``atomic``): each
        deletion stands alone, a refused one (changed since) ``refused``."""
        futures = self.client.store.submit_many(
            [(key, mutation) for _, key, mutation in pruning], actor=self.manager, user=self.client.user
        )
        for (index, key, _), outcome in zip(
            pruning, await asyncio.gather(*futures, return_exceptions=True), strict=True
        ):
            if isinstance(outcome, ReconcileError | OSError):
                self.results[index] = Applied(key, "refused", error=outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                self.results[index] = _pruned(key, outcome)

    def _landed(self, document: tuple[int, Admitted], write: Write, future: Any) -> None:
        # At once, as each write is durable: a cache puts it in before its watch event.
        index, item = document
        try:
            applied = self.results[index] = write.finish(future.result())
        except (ReconcileError, OSError) as exc:
            self.results[index] = Applied(_key(item), "refused", error=exc)
            return
        except BaseException as exc:  # noqa: BLE001 - raised by submit or drain, out of the callback
            self.raised.append(exc)
            return
        if self.on_applied is not None:
            self._heard(applied)

    def _heard(self, applied: Applied) -> None:
        """Tell ``on_applied``; its failure is its own: logged (as the loop logs a failed
        callback), and the apply goes on, every result recorded."""
        if self.on_applied is None:
            return
        try:
            self.on_applied(applied)
        except Exception as exc:  # noqa: BLE001 - see above
            asyncio.get_running_loop().call_exception_handler(
                {"message": f"apply_many: on_applied failed for {applied.key}", "exception": exc}
            )


async def _refuse_conflicts(
    client: Writer, admitted: list[tuple[int, Admitted]], results: list[Applied | None]
) -> None:
    """Refuse (in ``results``) each document that declares what another live object, or
    an earlier document of this apply, cannot coexist with (``Kind.conflicts``)."""
    declared: Declared = {}
    # Every lookup of the store queued at once: the reader connection answers them one
    # after the other, without a round trip of the loop's between them (a thousand DNS
    # record sets are a thousand lookups).
    wanted = list(dict.fromkeys(identity for _, item in admitted for identity in conflicting(item)))
    found = await asyncio.gather(*(client.store.claimant(*identity) for identity in wanted))
    claimants = dict(zip(wanted, found, strict=True))
    for index, item in admitted:
        key = _key(item)
        assert key is not None
        if item.kind.conflicts is not None:
            refusal = await conflict_error(client.store, key, item, declared, claimants)
            if refusal is not None:
                results[index] = Applied(key, "refused", error=refusal)
                continue
        identity = item.kind.identity_of(item.body["spec"])
        if identity is not None:
            declared[(item.kind.api_group, item.kind.kind, identity)] = key


def _pruned(key: ObjectKey, result: WriteResult) -> Applied:
    """A prune's result: ``pruned``, or ``unchanged`` when it was already being deleted."""
    return Applied(key, "pruned" if result.written else "unchanged")


def _key(admitted: Admitted | None) -> ObjectKey | None:
    if admitted is None:
        return None
    meta = admitted.metadata
    return ObjectKey(admitted.kind.api_group, admitted.kind.kind, meta["namespace"], meta["name"])


def _by_index(admitted: list[tuple[int, Admitted]], count: int) -> list[Admitted | None]:
    found: list[Admitted | None] = [None] * count
    for index, item in admitted:
        found[index] = item
    return found


def _runs(admitted: list[tuple[int, Admitted]], size: int) -> list[list[tuple[int, Admitted]]]:
    """Runs of documents to write concurrently (sharing group commits): at most ``size``,
    and never the same object twice in a run, so later documents still win."""
    # Each key as a plain tuple (equal to its ObjectKey, and cheaper to make).
    keys = [
        (
            item.kind.api_group,
            item.kind.kind,
            item.body["metadata"]["namespace"],
            item.body["metadata"]["name"],
        )
        for _, item in admitted
    ]
    if size > 0 and len(set(keys)) == len(keys):  # no object twice (nearly every apply)
        return [admitted[start : start + size] for start in range(0, len(admitted), size)] or [[]]
    runs: list[list[tuple[int, Admitted]]] = [[]]
    seen: set[tuple[str, str, str, str]] = set()
    for document, key in zip(admitted, keys, strict=True):
        if len(runs[-1]) >= size or key in seen:
            runs.append([])
            seen.clear()
        runs[-1].append(document)
        seen.add(key)
    return runs


async def _check_all(
    client: Writer,
    admitted: list[tuple[int, Admitted]],
    results: list[Applied | None],
    manager: str,
    *,
    force: bool = False,
) -> None:
    """Dry-run every document's mutation on what is stored, and check its identity claim;
    record each refusal in ``results``."""
    keys = [_key(item) for _, item in admitted]
    # Every read and every claim lookup queued at once: the reader connection answers
    # them one after the other without a round trip of the loop's between them.
    stored = await asyncio.gather(*(client.store.read(key) for key in keys if key is not None))
    claims = await asyncio.gather(*(client.claimant(item.kind, item.body["spec"]) for _, item in admitted))
    for (index, item), current, other in zip(admitted, stored, claims, strict=True):
        key, mutation = client.apply_mutation(item, manager=manager, force=force)
        try:
            mutation(current)
        except ReconcileError as exc:
            results[index] = Applied(key, "refused", error=exc)
            continue
        references = item.metadata.get("ownerReferences")
        if references and key is not None:
            try:
                await check_cycle(client.store, key, references)
            except OwnershipCycleError as exc:
                results[index] = Applied(key, "refused", error=exc)
                continue
        if other is not None and other != key:
            identity = item.kind.identity_of(item.body["spec"])
            reason = (
                f"{identity} is already declared by {other.kind} {other.namespace}/{other.name}: "
                "one external resource is declared by one object"
            )
            error = InvalidError(
                [FieldError("spec", reason)], subject=f"{key.kind} {key.namespace}/{key.name}"
            )
            results[index] = Applied(key, "refused", error=error)
