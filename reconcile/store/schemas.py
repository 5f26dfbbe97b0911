"""Schema versions: one mechanism for every backend.

A backend's schema is a list of numbered steps (:class:`Step`): step 1 makes the tables
of a new store, step N turns a store at version N-1 into version N. The list is the
whole story of the schema: its last number is the version this reconcile writes
(:func:`latest`), and a store is brought up to it by running, in order, the steps above
the version it holds (:func:`pending`: every step for a new store, which holds version
0). A store that holds a version above the last step was written by a newer reconcile:
refused by name, with both versions said (:class:`~reconcile.errors.SchemaVersionError`),
before anything is written.

Each backend runs its pending steps itself, all in one transaction with the version it
then records, so a store is never left between two versions: SQLite synchronously on
its connection's thread (``BEGIN IMMEDIATE``), PostgreSQL in a transaction holding the
schema's creation lock (two processes opening a store at once: the second finds it
current). What a step does is the backend's SQL; when it runs, and what is refused, is
decided here for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import attrs

from reconcile.errors import SchemaVersionError, StoreError

__all__ = ["Step", "check_steps", "check_version", "latest", "pending"]

F = TypeVar("F")


@attrs.frozen
class Step(Generic[F]):
    """The step that brings a store to ``version``: what it does, in words, and the
    backend's function that does it."""

    version: int
    summary: str
    run: F


def check_steps(steps: Sequence[Step[F]]) -> Sequence[Step[F]]:
    """The steps, numbered 1, 2, ... without a gap or a repeat (ValueError otherwise:
    a programming error, caught on import)."""
    numbers = [step.version for step in steps]
    if numbers != list(range(1, len(steps) + 1)):
        message = f"schema steps must be numbered 1..{len(steps)} in order, not {numbers}"
        raise ValueError(message)
    return steps


def latest(steps: Sequence[Step[F]]) -> int:
    """The version a store is at once every step has run."""
    return steps[-1].version if steps else 0


def check_version(stored: int, steps: Sequence[Step[F]], where: str) -> int:
    """``stored``, when this reconcile can use a store at that version (running the
    pending steps, if any); SchemaVersionError naming ``where`` when it is newer than the
    last step, StoreError when it is not a version at all."""
    known = latest(steps)
    if stored > known:
        raise SchemaVersionError(
            f"{where}: written by a newer reconcile (schema version {stored}; this "
            f"version knows up to {known}); upgrade reconcile to open it"
        )
    if stored < 0:
        raise StoreError(f"{where}: schema version {stored} is not a version")
    return stored


def pending(stored: int, steps: Sequence[Step[F]], where: str) -> list[Step[F]]:
    """The steps a store at version ``stored`` (0: a new one) needs, in order; refused
    as :func:`check_version` says."""
    check_version(stored, steps, where)
    return [step for step in steps if step.version > stored]
