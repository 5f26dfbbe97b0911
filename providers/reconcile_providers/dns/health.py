"""Which servers answer: a server that stopped answering is noticed once, by the first
exchange with it that fails, and backs off as one server, not as every change waiting
for it.

Without this, a frozen server (``SIGSTOP``, a hung process, packets dropped) costs every
exchange its whole ``timeout``, one after another, ``max_connections`` at a time: with a
few thousand record sets waiting, most waited minutes before their first failure, and
the conditions said nothing meanwhile. Here, the first exchange that gets no answer (or
cannot connect) marks the server down, with the reason and the time; from then on every
exchange with it fails at once, naming the server, why and since when, with
``retry_after`` set to when the server is tried again, so the work queue brings the
changes back then rather than each on its own backoff. When that time comes, one
exchange goes through as a probe (the others still fail at once until its answer is
known): an answer marks the server up, another failure doubles the wait, from
:data:`FIRST_WAIT` up to six times the timeout. Exchanges that were already on the wire
when the server went down fail on their own deadline without doubling anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

from reconcile.errors import TransientError
from reconcile_providers.dns.config import Server

__all__ = ["FIRST_WAIT", "Health", "ServerDownError"]

LOG = logging.getLogger("reconcile_providers.dns")

#: Seconds before a server that stopped answering is tried again, the first time.
FIRST_WAIT = 1.0


class ServerDownError(TransientError):
    """An exchange not attempted: the server stopped answering (it says which, why, since
    when, and when it is tried again)."""


@attrs.define
class _Down:
    #: Which time the server went down (exchanges begun before it are not its probes).
    epoch: int
    reason: str
    #: When it was marked down, and its wall-clock time for messages.
    since: float
    since_wall: float
    #: When it is tried again, and how long the next wait is if that fails too.
    retry_at: float
    wait: float


def where(server: Server) -> str:
    """``address:port``, as messages name a server."""
    return f"{server.address}:{server.port}"


class Health:
    """Per server: up, or down since when and until when (see the module)."""

    def __init__(
        self,
        timeout: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.timeout = timeout
        #: The longest wait between probes of a server that stays down.
        self.most = max(FIRST_WAIT, 6 * timeout)
        self._clock, self._wall = clock, wall
        self._down: dict[Server, _Down] = {}
        #: Counts the times any server went down: an exchange's start, cheaper than a clock.
        self._epoch = 0
        #: Exchanges refused at once because their server was down (for tests, benchmarks).
        self.refused = 0

    def refuse_if_down(self, server: Server) -> None:
        """ServerDownError, at once, when ``server`` is down and not due to be tried (a
        look only: the probe is claimed by :meth:`check`)."""
        down = self._down.get(server)
        if down is not None:
            now = self._clock()
            if now < down.retry_at:
                self.refused += 1
                raise self._error(server, down, now)

    def check(self, server: Server) -> int:
        """Before an exchange: when it began (for :meth:`failed`), when the server is up or
        due to be tried (then this exchange is the probe); ServerDownError, at once, when
        it is down."""
        down = self._down.get(server)
        if down is None:
            return self._epoch
        now = self._clock()
        if now >= down.retry_at:
            down.retry_at = now + self.timeout  # (the others wait for the probe's answer)
            return self._epoch
        self.refused += 1
        raise self._error(server, down, now)

    def answered(self, server: Server) -> None:
        """An exchange with ``server`` was answered: it is up."""
        down = self._down.pop(server, None)
        if down is not None:
            LOG.warning(
                "DNS server %s answers again (it was down for %.1f s: %s)",
                where(server),
                self._clock() - down.since,
                down.reason,
            )

    def failed(self, server: Server, reason: str, started: int) -> ServerDownError:
        """An exchange with ``server`` begun at ``started`` failed for ``reason`` (no
        answer in time, no connection): mark it down, or, when this was the probe, wait
        twice as long; the error to raise (exchanges on the wire before it went down change
        nothing)."""
        now = self._clock()
        down = self._down.get(server)
        if down is None:
            self._epoch += 1
            wait = min(2 * FIRST_WAIT, self.most)
            down = _Down(self._epoch, reason, now, self._wall(), now + FIRST_WAIT, wait)
            self._down[server] = down
            LOG.warning("DNS server %s stopped answering: %s", where(server), reason)
        elif started >= down.epoch:  # the probe (or an exchange begun after it went down)
            down.reason, down.retry_at = reason, now + down.wait
            down.wait = min(2 * down.wait, self.most)
        return self._error(server, down, now)

    def _error(self, server: Server, down: _Down, now: float) -> ServerDownError:
        since = time.strftime("%H:%M:%S", time.gmtime(down.since_wall))
        wait = max(down.retry_at - now, 0.0)
        return ServerDownError(
            f"DNS server {where(server)} is unreachable: {down.reason} (not answering since {since} UTC; "
            f"tried again in {wait:.1f} s)",
            retry_after=wait,
        )

    def statistics(self) -> dict[str, int]:
        """Servers down now, and exchanges refused at once because theirs was."""
        return {"down": len(self._down), "refused": self.refused}
