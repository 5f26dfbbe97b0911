"""What the Runtime needs to host a controller: how a reconciler is given (an object, a
class or a factory taking the Context, or a decorated function) and what a registration
records.

What ``add_controller`` was given is sorted out when it is given, not when the first
reconcile fails: a mistake there would otherwise show only as every reconcile failing,
retried with backoff, in ``convergence().failures``."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal, cast

import attrs

from reconcile.api.reading import KindRef
from reconcile.controller.context import Context
from reconcile.controller.controlling import Controller
from reconcile.controller.reconciling import Reconciler, Request, Result
from reconcile.model.meta import ObjectKey

__all__ = [
    "ReconcileFunction",
    "ReconcilerFactory",
    "Registration",
    "factory_of",
    "function_reconciler",
    "last_failure",
]

ReconcilerFactory = Callable[[Context], Reconciler]
ReconcileFunction = Callable[[Request, Context], Awaitable[Result | None]]
#: Characters of a given object's repr an error message quotes.
_REPR_LENGTH = 60


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
    #: The kinds whose objects the controller's kind owns (controller-runtime's ``Owns``).
    owns: tuple[KindRef, ...] = ()


def factory_of(reconciler: object) -> ReconcilerFactory:
    """A factory for what ``add_controller`` was given, or TypeError naming it.

    Three forms are accepted, told apart in this order:

    * a class with a ``reconcile`` method: instantiated with the Context
      (``add_controller(kind, WidgetReconciler)``). The class has a ``reconcile``
      attribute too (the unbound function), so it is tested for first: taken for a
      ready Reconciler, it was called with the request as ``self`` and failed at every
      reconcile, visible only in ``convergence().failures``;
    * an object with a ``reconcile`` method (a Reconciler): used as it is;
    * any other callable taking one argument: a factory, called with the Context when
      the controller starts; it must return a Reconciler.

    A reconcile function (``async def f(request, context)``) is refused with a pointer to
    the decorator form, which is how it is hosted."""
    if isinstance(reconciler, type):
        if not callable(getattr(reconciler, "reconcile", None)):
            msg = f"add_controller: {_described(reconciler)} has no reconcile method"
            raise TypeError(msg)
        _check_takes_context(reconciler, "a reconciler class is instantiated with the Context")
        return cast("ReconcilerFactory", reconciler)
    if callable(getattr(reconciler, "reconcile", None)):
        given = cast("Reconciler", reconciler)
        return lambda _context: given
    if inspect.iscoroutinefunction(reconciler):
        msg = (
            f"add_controller: {_described(reconciler)} is a reconcile function; host it with "
            "the decorator, runtime.controller(kind)(function), or give a Reconciler, a "
            "Reconciler class or a factory taking the Context"
        )
        raise TypeError(msg)
    if not callable(reconciler):
        msg = (
            f"add_controller: {_described(reconciler)} is not a Reconciler (an object with a "
            "reconcile method), a Reconciler class, or a factory taking the Context"
        )
        raise TypeError(msg)
    _check_takes_context(reconciler, "a factory is called with the Context")
    factory = reconciler

    def checked(context: Context) -> Reconciler:
        made = factory(context)
        if not callable(getattr(made, "reconcile", None)):
            if inspect.iscoroutine(made):
                made.close()  # never awaited: said here, not as a warning at collection
            msg = (
                f"the factory {_described(factory)} returned {_described(made)}, "
                "which has no reconcile method"
            )
            raise TypeError(msg)
        return cast("Reconciler", made)

    return checked


def _check_takes_context(target: Callable[..., object], how: str) -> None:
    """TypeError unless ``target`` can be called with one positional argument."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # no signature to read (a builtin): the call will tell
    try:
        signature.bind(None)
    except TypeError:
        msg = f"add_controller: {_described(target)} cannot be called with one argument ({how})"
        raise TypeError(msg) from None


def _described(thing: object) -> str:
    """What was given, in an error message: a class or function by its qualified name,
    anything else by its type and a short repr."""
    if isinstance(thing, type):
        return f"the class {thing.__module__}.{thing.__qualname__}"
    if inspect.isfunction(thing) or inspect.ismethod(thing):
        return f"the function {thing.__module__}.{thing.__qualname__}"
    text = repr(thing)
    if len(text) > _REPR_LENGTH:
        text = text[: _REPR_LENGTH - 3] + "..."
    return f"{type(thing).__name__} {text}"


def last_failure(controllers: Iterable[Controller], key: ObjectKey) -> str | None:
    """Why the last reconcile of ``key`` failed, in the first of ``controllers`` that
    holds a failure of it (until one succeeds), or None: what a timed-out wait names."""
    return next((c.failures[key] for c in controllers if key in c.failures), None)


def function_reconciler(function: ReconcileFunction) -> ReconcilerFactory:
    """A factory making a Reconciler of a ``function(request, context)``."""
    return lambda context: FunctionReconciler(function, context)
