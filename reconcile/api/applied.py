"""One apply as a store write: the mutation the store runs and, once it is durable, what
the caller is told (:class:`~reconcile.api.bulk.Applied`).

One object per document, not a closure per step: a bulk apply makes one for each of
thousands of documents, and the store calls it once (twice for a retried transaction:
the last run is the one told).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconcile.api.bulk import Applied, Deferred, Outcome
from reconcile.api.changing import same

if TYPE_CHECKING:
    from reconcile.api.admission import Admitted
    from reconcile.api.decoding import Decoder
    from reconcile.model.meta import ObjectKey
    from reconcile.model.resource import AnyResource
    from reconcile.store.contract import Change, Mutation, StoredObject, WriteResult

__all__ = ["ApplyWrite"]


class ApplyWrite:
    """The write of one admitted manifest: called by the store with what is stored (in
    any spelling or version: it is read in the current one), then :meth:`finish` makes
    its result."""

    __slots__ = ("_admitted", "_before", "_change", "_decoder", "_mutation", "key")

    def __init__(self, key: ObjectKey, mutation: Mutation, admitted: Admitted, decoder: Decoder) -> None:
        #: The object's key. (``mutation`` is the apply's own, given the stored object as
        #: the decoder reads it.)
        self.key: ObjectKey = key
        self._mutation, self._admitted, self._decoder = mutation, admitted, decoder
        self._before: StoredObject | None = None
        self._change: Any = None

    def __call__(self, current: StoredObject | None) -> Change | Any:
        """The apply's change to ``current`` (what the store calls)."""
        self._before = current
        if current is not None:
            current = self._decoder.current(current)
        self._change = change = self._mutation(current)
        return change

    def finish(self, result: WriteResult) -> Applied:
        """The :class:`Applied` of the write (``created``, ``configured``, ``unchanged``),
        its object decoded when first read."""
        key, admitted = self.key, self._admitted
        outcome: Outcome = (
            "created" if self._before is None else "configured" if result.written else "unchanged"
        )
        if result.object is None:
            # The apply released the last finalizer of an object being deleted, which
            # completed its deletion: what is returned is its last state, the body the
            # Remove kept in the log (stamped with its revision by the store).
            return Applied(key, outcome, self._decoder.resource(self._change.body))
        made = _Decoded(self._decoder, result.object.body, admitted)
        if admitted.ignored:
            return Applied(key, outcome, made, warnings=admitted.hook_warnings)
        return Applied(key, outcome, made)


class _Decoded(Deferred):
    """A written body, decoded when the caller asks for the object (a bulk apply's caller
    seldom does)."""

    __slots__ = ("_admitted", "_body", "_decoder")

    def __init__(self, decoder: Decoder, body: dict[str, Any], admitted: Admitted) -> None:
        self._make, self._value = None, None
        self._decoder, self._body, self._admitted = decoder, body, admitted

    def get(self) -> AnyResource | None:
        """The object (decoded now if this is the first time)."""
        if self._value is None:
            # apply stores the admitted spec as it is (unless fields of other managers
            # were kept: server-side apply): then its structured form is reused.
            body, admitted = self._body, self._admitted
            spec = admitted.spec if same(body["spec"], admitted.body["spec"]) else None
            self._value = self._decoder.resource(body, spec=spec)
        return self._value
