"""Stopping a one-shot command on SIGINT or SIGTERM: at a point of its choosing, never in
the middle of a write, and saying what was done.

Python turns SIGINT into a KeyboardInterrupt wherever the program happens to be, and
SIGTERM's default action ends the process on the spot: either way a command that writes
in steps (``apply`` commits a run of documents at a time) would stop with some of its
writes stored and nothing said. :func:`stopping_on_signals` records the signal instead,
through the event loop's own handlers, and the command asks :class:`Stop` between its
steps; its :meth:`Stop.interrupted` failure exits with the shells' code for the signal
(128 + its number: 130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

from reconcile.cli.failing import Interrupted

__all__ = ["Stop", "stopping_on_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stop:
    """Whether a stop was asked for, and by which signal (the first one)."""

    def __init__(self) -> None:
        self.signum: signal.Signals | None = None

    def __call__(self) -> bool:
        """True once SIGINT or SIGTERM arrived."""
        return self.signum is not None

    def request(self, signum: signal.Signals) -> None:
        """Record a signal (the first one names the stop)."""
        if self.signum is None:
            self.signum = signum

    def interrupted(self, *lines: str) -> Interrupted:
        """The failure to raise: ``lines`` after one naming the signal, exit 128 + its number."""
        assert self.signum is not None
        return Interrupted(f"interrupted by {self.signum.name}", *lines, signum=self.signum)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[Stop]:
    """While inside, SIGINT and SIGTERM set the yielded :class:`Stop` instead of ending
    the process (call from a coroutine: the running loop's handlers are used). The
    previous handling is put back on the way out."""
    loop = asyncio.get_running_loop()
    stop = Stop()
    for signum in _SIGNALS:
        loop.add_signal_handler(signum, stop.request, signum)
    try:
        yield stop
    finally:
        for signum in _SIGNALS:
            loop.remove_signal_handler(signum)
