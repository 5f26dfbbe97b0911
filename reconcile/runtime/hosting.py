"""What the Runtime needs to host a controller: how a reconciler is given (an object, a
factory taking the Context, or a decorated function) and what a registration records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import attrs

from reconcile.api.reading import KindRef
from reconcile.controller.context import Context
from reconcile.controller.reconciling import Reconciler, Request, Result

__all__ = ["ReconcileFunction", "ReconcilerFactory", "Registration", "factory_of", "function_reconciler"]

ReconcilerFactory = Callable[[Context], Reconciler]
ReconcileFunction = Callable[[Request, Context], Awaitable[Result | None]]


class FunctionReconciler:
    """A reconcile function (the decorator form) as a Reconciler, with its Context."""

    def __init__(self, function: ReconcileFunction, context: Context) -> None:
        self.function = function
        self.context = context

    async def reconcile(self, request: Request) -> Result | None:
        return await self.function(request, self.context)


@attrs.frozen
class Registration:
    """A controller to start: its kind, how to make its reconciler, and its settings."""

    kind: KindRef
    factory: ReconcilerFactory
    name: str | None
    manager: str | None
    workers: int | None
    resync_period: float | Literal["default"] | None
    ignore_own_writes: bool


def factory_of(reconciler: Reconciler | ReconcilerFactory) -> ReconcilerFactory:
    """A factory for what ``add_controller`` was given: a Reconciler as it is (its
    factory ignores the Context), or the factory itself."""
    if hasattr(reconciler, "reconcile"):
        given: Reconciler = reconciler
        return lambda _context: given
    factory: ReconcilerFactory = reconciler
    return factory


def function_reconciler(function: ReconcileFunction) -> ReconcilerFactory:
    """A factory making a Reconciler of a ``function(request, context)``."""
    return lambda context: FunctionReconciler(function, context)
