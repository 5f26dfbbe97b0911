"""Finishing: clean-up that a cancellation must not cut in half.

Closing a store ends aiosqlite's connection threads; closing a Runtime drains its
controllers and then closes the store. Cut short by a cancellation (a caller's timeout,
Ctrl-C, ``asyncio.run`` cancelling what is left at its end), either would leave threads
that keep the process from exiting and connections that a second ``close()`` no longer
knows about. So a close runs as one task, made once: every ``close()`` call awaits that
same task through :func:`finish`, which keeps waiting when the caller is cancelled and
re-raises the cancellation only once the task is done (the way trio shields clean-up).
A second ``close()`` therefore finds the first one's work done or finishes it.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

__all__ = ["finish"]

T = TypeVar("T")


async def finish(task: asyncio.Future[T]) -> T:
    """Await ``task`` to its end even if this caller is cancelled meanwhile; then return
    its result, or re-raise the cancellation this caller received."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done() and task.cancelled():
                raise
            cancelled = True
    if cancelled:
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        raise asyncio.CancelledError
    return task.result()
