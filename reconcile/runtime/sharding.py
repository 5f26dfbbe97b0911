"""Sharding: a Runtime that shares its store with other runners holds leases on some of
the store's shards and reconciles only their keys (see :mod:`reconcile.store.fencing`
for the shards, leases and fences; :mod:`reconcile.store.postgres.leasing` for how a
renewal rebalances).

:class:`Sharding` renews every ``renew_interval`` seconds. What a renewal returns is
what the runner holds: shards held beyond the fair share (a runner joined) are
*drained*: their keys are no longer taken, and they are released at the next renewal,
once the reconciles in flight on them had a renew interval to finish under a valid
lease; shards lost stop being taken from the queues. A runner whose last renewal began
a whole lease duration ago (the database unreachable, or the process paused and
resumed) takes no key until a renewal succeeds, on its own monotonic clock: the fence
would refuse its writes anyway, this spares the work and the external calls.

A key whose shard is not owned (:meth:`Sharding.owns`) is dropped when a worker takes
it; gaining ownership is what brings it back (controller-runtime's way: a key not ours
is not processed). Every shard a renewal makes owned that was not just before -- a new
epoch, the same epoch after a lapse of validity, the end of its draining -- has its
cached keys enqueued in every controller at once (:func:`enqueue_shards`): so every key
of a shard this runner holds, not draining, is reconciled after the runner gains or
regains it (the previous holder may have left it half done).

The controllers ask :meth:`Sharding.owns` and :meth:`Sharding.fence` (the
:class:`~reconcile.controller.controlling.KeyGate` protocol). With a store that does
not share (SQLite), :meth:`start` finds sharding off and every key is owned, unfenced.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Callable, Iterable, Mapping

from reconcile.api.client import Client
from reconcile.controller.clocks import Clock
from reconcile.controller.controlling import Controller
from reconcile.controller.queueing import Priority
from reconcile.model.meta import ObjectKey
from reconcile.runtime.health import ShardingHealth
from reconcile.runtime.options import RuntimeOptions
from reconcile.runtime.supervising import Supervisor
from reconcile.store.contract import EventStore
from reconcile.store.fencing import Fence, Leases, shard_of

__all__ = ["Sharding", "enqueue_shards", "share"]

LOG = logging.getLogger("reconcile.runtime")


class Sharding:
    """A runner's shard leases, renewed in the background (:meth:`run`)."""

    def __init__(
        self,
        store: EventStore,
        *,
        clock: Clock,
        lease_duration: float,
        renew_interval: float,
        shards: int | None = None,
    ) -> None:
        if renew_interval >= lease_duration:
            msg = (
                f"renew_interval ({renew_interval:g} s) must be shorter than "
                f"lease_duration ({lease_duration:g} s)"
            )
            raise ValueError(msg)
        host = socket.gethostname()
        self.runner = f"{host}:{os.getpid()}:{secrets.token_hex(3)}"
        self.about = f"pid {os.getpid()} on {host}"
        self.store = store
        self.clock = clock
        self.lease_duration = lease_duration
        self.renew_interval = renew_interval
        self.requested_shards = shards
        #: Whether the store shares (False on SQLite: every key is this runner's).
        self.enabled = False
        self.count = 1
        self.held: dict[int, int] = {}
        #: Held shards beyond the fair share: no longer worked on, released at the next
        #: renewal (their reconciles in flight finish under a valid lease meanwhile).
        self.draining: set[int] = set()
        self.runners = 1
        #: shard -> the revision the cache must reach before its keys are reconciled.
        self._minimum: dict[int, int] = {}
        self._renewed_at = 0.0
        self._gained: list[Callable[[set[int]], None]] = []

    def on_gained(self, listener: Callable[[set[int]], None]) -> None:
        """Call ``listener(shards)`` with the shards a renewal makes owned (see
        :meth:`owns`) that were not just before: gained, regained after a lapse of
        validity, or no longer draining."""
        self._gained.append(listener)

    # -- the gate the controllers ask ------------------------------------------------------

    def shard(self, key: ObjectKey) -> int:
        """The shard of ``key``."""
        return shard_of(key, self.count)

    def owns(self, key: ObjectKey) -> bool:
        """Whether this runner reconciles ``key`` now."""
        if not self.enabled:
            return True
        shard = shard_of(key, self.count)
        if shard not in self.held or shard in self.draining:
            return False
        # Past the lease duration since the last renewal began (a pause, a stalled
        # database), the leases may be another runner's already: take no key until a
        # renewal says (client-go's leader election stops leading at its renew deadline).
        return self.clock.now() - self._renewed_at < self.lease_duration

    def minimum(self, key: ObjectKey) -> int:
        """The revision the cache must reach before ``key`` is reconciled (0: none)."""
        if not self._minimum:
            return 0
        return self._minimum.get(shard_of(key, self.count), 0)

    def fence(self, key: ObjectKey) -> Fence | None:
        """The fence the writes of a reconcile of ``key`` carry (None: unsharded)."""
        if not self.enabled:
            return None
        shard = shard_of(key, self.count)
        epoch = self.held.get(shard)
        # A shard lost since the key was taken: epoch -1 matches no lease, so every write
        # of this reconcile is refused, as it must be.
        return Fence(shard, -1 if epoch is None else epoch, self.runner)

    # -- renewing ----------------------------------------------------------------------------

    async def start(self) -> bool:
        """The first renewal: whether the store shares (sharding is on)."""
        started = self.clock.now()
        leases = await self.store.lease_shards(
            self.runner, about=self.about, duration=self.lease_duration, shards=self.requested_shards
        )
        if leases is None:
            return False
        self.enabled = True
        self._apply(leases, started)
        LOG.info(
            "%s: runner %s holds %d of %d shards", self.store.url, self.runner, len(self.held), self.count
        )
        return True

    def _owned(self) -> dict[int, int]:
        """The shards whose keys owns() admits now, with their epochs."""
        if self.clock.now() - self._renewed_at >= self.lease_duration:
            return {}
        return {s: epoch for s, epoch in self.held.items() if s not in self.draining}

    def _apply(self, leases: Leases, started: float) -> None:
        # What owns() admitted until now: on a lapse of validity (the renewal ended more
        # than a lease after the last one began, even if it began within), nothing.
        before, was_owned = self.held, self._owned()
        held = leases.held
        if leases.shards != self.count:
            # (Fixed when the table is made; but a shard number means another set of
            # keys under another count: nothing known is owned still.)
            before, was_owned = {}, {}
        self.count, self.held, self.runners = leases.shards, dict(held), leases.runners
        self._renewed_at = started
        surplus = len(held) - leases.fair
        self.draining = set(sorted(held)[-surplus:]) if surplus > 0 else set()
        if self.draining:
            LOG.info("%s: draining shards %s (beyond the fair share)", self.runner, sorted(self.draining))
        for shard, epoch in held.items():
            if before.get(shard) != epoch:
                # A new holder: the former one's last writes must be in the cache first.
                self._minimum[shard] = leases.revision
        lost = set(before) - set(held)
        if lost:
            LOG.info("%s: released or lost shards %s", self.runner, sorted(lost))
        # Every shard owned now and not just before (a new epoch, the same one after a
        # lapse of validity, the end of its draining): its keys were dropped while not
        # owned, or are the former holder's; all are announced, so each gets reconciled.
        gained = {s for s, epoch in self._owned().items() if was_owned.get(s) != epoch}
        if gained:
            LOG.info("%s: gained shards %s", self.runner, sorted(gained))
            for listener in self._gained:
                listener(gained)

    async def run(self) -> None:
        """Renew every ``renew_interval`` until cancelled."""
        while True:
            await self.clock.sleep(self.renew_interval)
            await self.renew_once()

    async def renew_once(self) -> None:
        """One renewal; a failure is logged, and a whole lease duration without one
        drops every shard (its writes would be refused anyway)."""
        started = self.clock.now()
        try:
            leases = await self.store.lease_shards(
                self.runner,
                about=self.about,
                duration=self.lease_duration,
                shards=self.requested_shards,
                release=frozenset(self.draining),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - retried at the next interval
            LOG.warning("%s: cannot renew the shard leases: %s", self.runner, exc)
            if self.held and self.clock.now() - self._renewed_at >= self.lease_duration:
                LOG.warning(
                    "%s: no renewal for %g s: every shard is given up", self.runner, self.lease_duration
                )
                self.held = {}
            return
        if leases is not None:
            self._apply(leases, started)

    async def release(self) -> None:
        """Give every lease up (a clean stop: the others take over at their next renewal)."""
        if not self.enabled:
            return
        self.held = {}
        try:
            await self.store.release_shards(self.runner)
        except Exception as exc:  # noqa: BLE001 - the leases expire on their own
            LOG.warning(
                "%s: could not release the shard leases (%s); they expire on their own", self.runner, exc
            )

    def health(self) -> ShardingHealth | None:
        """What this runner holds (None: sharding is off)."""
        if not self.enabled:
            return None
        return ShardingHealth(
            self.runner,
            self.count,
            tuple(sorted(self.held)),
            tuple(sorted(self.draining)),
            self.runners,
            max(0.0, self.clock.now() - self._renewed_at),
        )


async def share(
    store: EventStore,
    options: RuntimeOptions,
    client: Client,
    controllers: Mapping[str, Controller],
    supervisor: Supervisor,
) -> Sharding | None:
    """A Runtime's share of the store's leases, renewed under ``supervisor``; each gain
    enqueues its keys in ``controllers`` (read at each gain: controllers started later
    count), and ``client``'s writes say which runner made them (its ``user``). None
    when the store does not share."""
    sharding = Sharding(
        store,
        clock=options.clock,
        lease_duration=options.lease_duration,
        renew_interval=options.renew_interval,
        shards=options.shards,
    )
    if not await sharding.start():
        return None
    client.user = sharding.runner
    sharding.on_gained(lambda shards: enqueue_shards(controllers.values(), sharding, shards))
    supervisor.start("shard-leases", sharding.run)
    return sharding


def enqueue_shards(controllers: Iterable[Controller], sharding: Sharding, shards: set[int]) -> None:
    """Enqueue every cached key of ``shards`` in every controller: shards just gained,
    whose previous holder may have left their keys half done."""
    for controller in controllers:
        keys = [key for key in controller.informer.cached_keys() if sharding.shard(key) in shards]
        if keys:
            controller.enqueue_many(keys, Priority.CHANGE)
