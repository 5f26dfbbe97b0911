"""Operators: an application's own kinds and the controllers that reconcile them, declared
together, with no provider.

An :class:`Operator` is what kopf's decorators and controller-runtime's builder make: a
named set of kinds (``Kind`` values, with their admission hooks and printer columns) and
of controllers (a reconcile function, a Reconciler class, a Reconciler or a factory, as
:meth:`Runtime.add_controller <reconcile.runtime.Runtime.add_controller>` takes them).
Declaring one does nothing: it is a declaration, kept in the module that makes it, read by
whoever runs it::

    sites = reconcile.Operator("sites", kinds=[SITE])

    @sites.controller(SITE)
    async def reconcile_site(request, context):
        ...

A Runtime runs it when given it (``Runtime(operators=[sites])``, or
``runtime.include(sites)``), or when it is installed under the ``reconcile.providers``
entry points (``sites = "mysites:sites"``) and the Runtime discovers what is installed;
the CLI learns its kinds the same way (``get``, ``describe``, ``explain``, ``history``),
and ``reconcile run`` runs its controllers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeVar

import attrs

from reconcile.api.reading import KindRef
from reconcile.controller.reconciling import Reconciler
from reconcile.model.kinds import Kind
from reconcile.runtime.hosting import ReconcilerFactory, Registration, factory_of, function_reconciler

__all__ = ["Operator"]

T = TypeVar("T")


@attrs.define(eq=False)
class Operator:
    """Kinds and their controllers, declared together (see the module's docstring)."""

    #: The operator's name: what discovery and messages call it.
    name: str
    #: The kinds it declares (:meth:`kind` adds one).
    kinds: list[Kind] = attrs.field(factory=list, converter=list)
    #: The controllers it runs, as a Runtime registers them.
    registrations: list[Registration] = attrs.field(factory=list, init=False)

    def kind(self, kind: Kind) -> Kind:
        """Declare ``kind`` as this operator's; returns it (``SITE = ops.kind(Kind(...))``)."""
        if kind not in self.kinds:
            self.kinds.append(kind)
        return kind

    def add_controller(
        self,
        kind: KindRef,
        reconciler: Reconciler | ReconcilerFactory,
        *,
        name: str | None = None,
        manager: str | None = None,
        workers: int | None = None,
        resync_period: float | Literal["default"] | None = "default",
        ignore_own_writes: bool = True,
        owns: Sequence[KindRef] = (),
    ) -> None:
        """Run ``reconciler`` for ``kind`` wherever this operator runs: the arguments
        are :meth:`Runtime.add_controller <reconcile.runtime.Runtime.add_controller>`'s
        (``owns``: the kinds of the children it controls), checked now (TypeError for
        what is not a Reconciler, class or factory)."""
        factory = factory_of(reconciler)
        self.registrations.append(
            Registration(kind, factory, name, manager, workers, resync_period, ignore_own_writes, tuple(owns))
        )

    def controller(self, kind: KindRef, **options: Any) -> Callable[[T], T]:
        """The decorator form: on a reconcile function ``async def f(request, context)``
        or on a Reconciler class (instantiated with the Context when it starts)."""

        def register(reconciler: T) -> T:
            if isinstance(reconciler, type):
                self.add_controller(kind, reconciler, **options)
            else:
                self.add_controller(kind, function_reconciler(reconciler), **options)  # type: ignore[arg-type]
            return reconciler

        return register


def operators_among(candidates: Iterable[object]) -> list[Operator]:
    """The operators among what discovery found (kinds packages may be plain lists)."""
    return [candidate for candidate in candidates if isinstance(candidate, Operator)]
