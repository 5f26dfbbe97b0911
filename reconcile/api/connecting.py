"""``reconcile.connect``: open a store by URL and get a Client, as a context manager."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from reconcile.api.client import DEFAULT_MANAGER, Client
from reconcile.model.registry import KindRegistry
from reconcile.store.urls import open_store

__all__ = ["connect"]


@contextlib.asynccontextmanager
async def connect(
    url: str | Path = "sqlite:///reconcile.db",
    *,
    kinds: KindRegistry | None = None,
    clock: Callable[[], float] = time.time,
    provider_config: Mapping[str, Mapping[str, Any]] | None = None,
    manager: str = DEFAULT_MANAGER,
    user: str | None = None,
    **store_options: Any,
) -> AsyncIterator[Client]:
    """Open the store at ``url`` and yield a :class:`Client`; close it on exit.

    ``kinds`` defaults to every kind the installed providers declare (the
    ``reconcile.providers`` entry points). ``provider_config`` (by provider name) is what
    kinds' admission hooks check against, e.g. the roots the files provider may write.
    ``manager`` and ``user`` are who the client's writes are recorded as (the field
    manager, and the person or service that asked: see :class:`Client`).
    """
    registry = KindRegistry.from_entry_points() if kinds is None else kinds
    store = await open_store(url, clock=clock, **store_options)
    try:
        yield Client(
            store, registry, clock=clock, provider_config=provider_config, manager=manager, user=user
        )
    finally:
        await store.close()
