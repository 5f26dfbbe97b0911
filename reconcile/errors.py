"""Every error reconcile raises, under one root, split by what the caller does next.

* :class:`InvalidError` -- fix the input (a manifest, a patch, a field): nothing was stored.
* :class:`ConflictError` -- someone else wrote first: re-read and try again.
* :class:`NotFoundError` / :class:`AlreadyExistsError` -- the object is not in the state
  the call assumed.
* :class:`ExpiredError` -- a watch asked for history that compaction removed: relist.
* :class:`StoreError` -- the database cannot be used (not SQLite, corrupt, too new);
  :class:`CorruptError` names the event whose body cannot be decoded;
  :class:`StoreUnavailableError` says its server cannot take the call now (retry later).
* :class:`LockedError` -- another runner reconciles this store (``holder`` says who).

What reconcilers and providers raise, by what the engine does next:

* :class:`TransientError` -- retry (after ``retry_after`` when given); anything not
  listed here counts as transient too.
* :class:`DeadlineExceededError` -- (raised by the engine) a provider call did not answer
  in time and was cut short: transient, and whether it took effect is unknown.
* :class:`PermanentError` -- retrying will not help until the spec changes.
* :class:`NotOwnedError` -- the external resource exists but is not ours: never touch it.
* :class:`TerminalError` -- a reconciler's "stop": no retry, recorded in status
  (:class:`ConversionError`, a kind's conversion between versions that raised, is one).
* :class:`IncompleteListingError` -- a provider listed part of what a store owns
  (``found``), and says why not the rest.

Foreign errors (sqlite3, aiosqlite, yaml) are translated at the boundary and kept as the
``__cause__``; messages name the file or the field path, never a secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

__all__ = [
    "AdmissionWarning",
    "AlreadyExistsError",
    "AlreadyOwnedError",
    "ConflictError",
    "ConversionError",
    "CorruptError",
    "DeadlineExceededError",
    "ExpiredError",
    "FencedError",
    "FieldConflictError",
    "FieldError",
    "IncompleteListingError",
    "InvalidError",
    "LockedError",
    "NotFoundError",
    "NotOwnedError",
    "OwnershipCycleError",
    "PermanentError",
    "ProviderLoadError",
    "ReconcileError",
    "SchemaVersionError",
    "SpellingWarning",
    "StoreError",
    "StoreUnavailableError",
    "TerminalError",
    "TransientError",
    "VersionWarning",
]


class ReconcileError(Exception):
    """Root of every error raised by reconcile."""


class NotFoundError(ReconcileError, LookupError):
    """The object does not exist (or no longer exists)."""


class AlreadyExistsError(ReconcileError):
    """``create`` found an object with the same kind, namespace and name."""


class ConflictError(ReconcileError):
    """An optimistic-concurrency precondition failed: re-read the object and retry."""


class FieldConflictError(ConflictError):
    """A server-side apply declared fields another field manager owns, with other values
    (as Kubernetes' ``Apply failed with N conflicts``): leave the field to its owner, or
    take it with ``force=True`` (``--force-conflicts``).

    ``conflicts`` holds ``(field, manager)`` pairs: ``("spec.content", "site-controller")``.
    """

    def __init__(self, subject: str, conflicts: Sequence[tuple[str, str]]) -> None:
        self.subject = subject
        self.conflicts = tuple(conflicts)
        count = len(self.conflicts)
        listed = "; ".join(f'conflict with "{manager}": {field}' for field, manager in self.conflicts)
        super().__init__(
            f"{subject}: apply failed with {count} conflict{'s' if count != 1 else ''}: {listed} "
            "(leave the field out of the manifest, or take it over with force/--force-conflicts)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.subject, self.conflicts))


class AlreadyOwnedError(ConflictError):
    """An apply names a controller owner for an object another owner already controls
    (an object has at most one owner reference with ``controller: true``), as
    controller-runtime's ``AlreadyOwnedError``."""

    def __init__(self, subject: str, owner: str) -> None:
        self.subject = subject
        self.owner = owner
        super().__init__(f"{subject} is already controlled by {owner}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.subject, self.owner))


class ExpiredError(ReconcileError):
    """The requested revision is older than the compaction horizon (HTTP 410): relist."""

    def __init__(self, message: str, *, horizon: int) -> None:
        super().__init__(message)
        self.horizon = horizon


@attrs.frozen
class FieldError:
    """One reason an input was rejected: where (a field path such as
    ``spec.records[2].ttl``) and why (``must be >= 0``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidError(ReconcileError, ValueError):
    """Input was rejected at admission; every field error carries its path.

    ``source`` names where the input came from (``site.yaml, document 3``) when known.
    Nothing was stored.
    """

    def __init__(
        self,
        errors: list[FieldError] | tuple[FieldError, ...],
        *,
        subject: str = "",
        source: str = "",
    ) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.subject = subject
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = ": ".join(part for part in (self.source, self.subject) if part)
        reasons = "; ".join(str(error) for error in self.errors)
        return f"{where}: {reasons}" if where else reasons

    def with_source(self, source: str) -> InvalidError:
        """Return a copy of this error that also names its source (file and document)."""
        return InvalidError(self.errors, subject=self.subject, source=source)

    def __reduce__(self) -> tuple[object, ...]:  # pragma: no cover - pickling support
        return (_rebuild_invalid, (self.errors, self.subject, self.source))


def _rebuild_invalid(
    errors: tuple[FieldError, ...], subject: str, source: str
) -> InvalidError:  # pragma: no cover - pickling support
    return InvalidError(errors, subject=subject, source=source)


class StoreError(ReconcileError):
    """The database cannot be opened or used; the message names the file."""


class StoreUnavailableError(StoreError):
    """The store's server cannot take the call now: unreachable, restarting, or
    read-only (a standby, a failed-over primary not promoted yet). Transient: the store
    retried with backoff before raising it, and a later call may succeed once the
    server is back; the message names the server (password masked) and the reason."""


class CorruptError(StoreError):
    """A stored body cannot be decoded (a flipped byte on disk, a hand edit): the event's
    ``revision`` and object ``key`` say which. Retrying will not help; ``reconcile verify
    --deep`` lists every such event."""

    def __init__(self, revision: int, key: object, reason: str) -> None:
        self.revision = revision
        self.key = key
        self.reason = reason
        super().__init__(f"the store is corrupt: event {revision} ({key}) cannot be decoded: {reason}")


class FencedError(ReconcileError):
    """A controller write refused because its shard's lease has moved on (another runner
    holds it now, or holds it under a newer epoch): this runner no longer owns the key.
    The controller drops the key (its new owner reconciles it); the refusal is recorded
    in the store. ``shard`` and ``epoch`` say which lease the write carried."""

    def __init__(self, message: str, *, shard: int, epoch: int) -> None:
        super().__init__(message)
        self.shard = shard
        self.epoch = epoch


class SchemaVersionError(StoreError):
    """The database was written by a newer version of reconcile; it is left untouched."""


class LockedError(ReconcileError):
    """Another process holds an exclusive claim on the store (one runner at a time);
    ``holder`` says who: its pid, host and since when."""

    def __init__(self, message: str, *, holder: str) -> None:
        super().__init__(message)
        self.holder = holder


class SpellingWarning(FutureWarning):
    """A manifest was written in the old snake_case spelling (``api_version``), accepted
    for this release only; the message names the new spelling of each field."""


class AdmissionWarning(UserWarning):
    """An admission hook under the ``Ignore`` failure policy broke (raised, or did not
    answer in time) and the object was stored without it; the object's history records
    it too (``AdmissionHookIgnored``). The message names the hook and what happened."""


class VersionWarning(FutureWarning):
    """A manifest or a read used a deprecated version of its kind (Kubernetes'
    ``deprecationWarning``); the message is the kind's, or names the storage version."""


class ProviderLoadError(ReconcileError):
    """An entry point of the ``reconcile.providers`` group does not give a provider: it
    fails to import, its factory raises, or what it gives lacks ``name``, ``kinds`` or
    ``connect``. The message names the entry point."""


class TransientError(ReconcileError):
    """A failure that may pass: retry, after ``retry_after`` seconds when given."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeadlineExceededError(TransientError):
    """A provider call did not answer within its deadline and was cut short. Like gRPC's
    DEADLINE_EXCEEDED, it may or may not have taken effect: after a create cut short the
    engine keeps its pending marker, so the next reconcile finds out before creating again."""


class PermanentError(ReconcileError):
    """A failure retrying cannot fix (bad credentials, a refused name): wait for a new spec."""


class NotOwnedError(PermanentError):
    """The external resource exists but was not created by us: it is never touched."""


class IncompleteListingError(ReconcileError):
    """A provider listed only part of what a store owns (``ListingOwned.list_owned``):
    ``found`` holds what it could list, the message says what it could not."""

    def __init__(self, message: str, found: Sequence[Any]) -> None:
        super().__init__(message)
        self.found = list(found)


class OwnershipCycleError(InvalidError):
    """Owner references that would make an object its own owner, directly or through
    others: refused, as nothing in a cycle could ever be collected."""


class TerminalError(ReconcileError):
    """Raised by a reconciler to stop retrying this generation; recorded in status."""


class ConversionError(TerminalError):
    """A kind's conversion between two of its versions raised: the message names the
    kind, the object and the two versions. At admission the manifest is refused (an
    :class:`InvalidError` carrying this message); on read it is raised, and a reconcile
    of the object ends here (terminal: retrying converts the same body again) while the
    controller's other objects go on."""

    def __init__(self, kind: str, subject: str, source: str, target: str, reason: str) -> None:
        super().__init__(f"{kind} {subject}: converting {source} to {target} failed: {reason}")
        self.kind = kind
        self.subject = subject
        self.source = source
        self.target = target
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:  # pragma: no cover - pickling support
        return (type(self), (self.kind, self.subject, self.source, self.target, self.reason))
