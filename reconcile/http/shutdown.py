"""Ending long requests when the server stops: a list of hooks in the app's state.

A graceful stop (``reconcile serve`` on SIGTERM) stops accepting connections, runs these
hooks (the watch registry registers one that ends every open watch stream cleanly), then
waits up to ``--shutdown-timeout`` seconds for the requests in flight to finish. A host
that mounts the app runs :func:`shut_down` itself, before it waits for its connections.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from reconcile.http.context import ApiState

__all__ = ["SHUTDOWN_HOOKS", "on_shutdown", "shut_down"]

logger = logging.getLogger("reconcile.http")

#: The key of the hooks' list in :attr:`ApiState.extras`.
SHUTDOWN_HOOKS = "shutdown_hooks"

ShutdownHook = Callable[[], Awaitable[None]]


def on_shutdown(state: ApiState, hook: ShutdownHook) -> None:
    """Run ``hook`` when the server stops (after it stops accepting connections)."""
    state.extras.setdefault(SHUTDOWN_HOOKS, []).append(hook)


async def shut_down(state: ApiState) -> None:
    """Run every shutdown hook, in order; one that fails is logged and the rest still run."""
    hooks: list[ShutdownHook] = state.extras.get(SHUTDOWN_HOOKS, [])
    for hook in hooks:
        try:
            await hook()
        except Exception:
            logger.exception("a shutdown hook failed")
