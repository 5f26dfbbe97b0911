"""What a host gives the reconcilers it runs: a small, explicit bundle, not its internals.

A reconciler needs to read objects (from the cache, at least as new as its own last
write), to write them and record what it did (through the API), to tell time and to
trace. :class:`Context` carries exactly that; the Runtime makes one per controller and
hands it to the reconciler's factory (``Runtime.add_controller``).
"""

from __future__ import annotations

import attrs

from reconcile.controller.caching import CachedClient
from reconcile.controller.clocks import Clock
from reconcile.controller.owning import AppliedMemo, Children
from reconcile.controller.telemetry import Telemetry
from reconcile.model.kinds import Kind
from reconcile.model.resource import AnyResource

__all__ = ["Context"]


@attrs.frozen
class Context:
    """A reconciler's view of its host."""

    #: The kind the controller reconciles.
    kind: Kind
    #: Reads from the shared cache, writes through the API under the controller's field
    #: manager, and records events about objects (``client.record``; a recording
    #: reconciler's bookkeeping on ``client.engine``): the client protocols of
    #: :mod:`reconcile.typing`, as ``Client`` has them.
    client: CachedClient
    #: Monotonic time and sleeps; a FakeClock in tests.
    clock: Clock
    #: Spans and metrics (no-op unless the host installs an OpenTelemetry SDK).
    telemetry: Telemetry
    #: The kinds whose objects this controller owns (``add_controller(owns=...)``): a
    #: change of one it controls requeues its owner, and :meth:`children` prunes them.
    owns: tuple[Kind, ...] = ()
    #: What :meth:`children` applied on this controller's earlier passes (a child
    #: declared again as it was, and unchanged since, is not applied again).
    applied: AppliedMemo = attrs.field(factory=dict, eq=False, repr=False)

    def children(self, owner: AnyResource, *, manager: str | None = None, force: bool = True) -> Children:
        """The children one reconcile of ``owner`` declares
        (:class:`~reconcile.controller.owning.Children`): apply each with
        ``children.apply(manifest)`` (the owner made its controller, applied under this
        controller's field manager, or ``manager``); leaving ``async with`` without an
        error deletes those the owner controls that were not applied (of the kinds
        applied and the kinds in :attr:`owns`). ``force``: take over fields another
        manager set (a controller puts its children back as it declares them)."""
        return Children(self.client, owner, manager=manager, kinds=self.owns, force=force, memo=self.applied)
