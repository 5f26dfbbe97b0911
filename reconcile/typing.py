"""Protocols for the seams users and plugin authors implement or type against."""

from __future__ import annotations

from typing import Protocol

from reconcile.store.contract import EventStore, Mutation

__all__ = ["Clock", "EventStore", "Mutation"]


class Clock(Protocol):
    """Wall-clock time in seconds since the epoch (``time.time`` by default)."""

    def __call__(self) -> float:
        """The current time."""
