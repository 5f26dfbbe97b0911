"""The runner lock of an unsharded runner, acted on as Kubernetes' leader election is.

A Runtime without sharding reconciles a store alone, by its runner lock
(:meth:`~reconcile.store.contract.EventStore.claim`). On PostgreSQL the lock is a session
lock, which goes with its connection: a network cut, a terminated backend, a paused
process whose connection the server ended. The claim takes it again; if another runner
(a ``--standby``) took it meanwhile, the claim is *lost*.

What then, as client-go's ``OnStoppedLeading`` and controller-runtime's manager do
("leader election lost"): the runner stops its controllers at once, without the graceful
drain (its reconciles in flight are abandoned, which the log and the external markers keep
safe), and :meth:`~reconcile.runtime.Runtime.run_until_stopped` raises
:class:`~reconcile.errors.LockedError` naming the new holder; ``reconcile run`` exits 1
with that message. It does not take the lock back: the other runner reconciles the store
now, and a restarted one stands by (``--standby``) behind it.

Between the loss and the moment this runner notices it, its writes are *fenced*:
:class:`RunnerGate` hands every reconcile the claim's fence (the lock's epoch, counted up
by each runner that takes it), which the store checks in each write's transaction, so a
write made after another runner took the lock is refused
(:class:`~reconcile.errors.FencedError`, recorded), never stored. A store whose claim
cannot be lost (SQLite's lock file) gives no fence, and no gate is set.
"""

from __future__ import annotations

import attrs

from reconcile.model.meta import ObjectKey
from reconcile.store.contract import Claim
from reconcile.store.fencing import Fence

__all__ = ["RunnerGate"]


@attrs.define(eq=False)
class RunnerGate:
    """The controllers' gate (:class:`~reconcile.controller.gating.KeyGate`) of an
    unsharded runner whose lock fences: every key while the claim is held, none once it
    is lost; every write under the claim's fence."""

    claim: Claim
    fenced: Fence

    def owns(self, key: ObjectKey) -> bool:  # noqa: ARG002 - every key, or none
        """Whether this runner reconciles ``key`` now: while its lock is not lost."""
        return self.claim.lost is None

    def fence(self, key: ObjectKey) -> Fence | None:  # noqa: ARG002 - one fence for every key
        """The claim's fence."""
        return self.fenced

    def minimum(self, key: ObjectKey) -> int:  # noqa: ARG002 - no former holder to wait for
        """No revision to wait for: the runner began with the lock."""
        return 0
