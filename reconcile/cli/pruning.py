"""``apply --prune``: what the manifests no longer declare goes (kubectl's ``--prune``,
what a Terraform user expects of a folder of declarations).

The set is named by a label selector (``-l app=site``) or ``--all``, never implied: a
folder that declares a few objects must not delete everything else in the store by
accident, so ``--prune`` without one is bad input. The objects pruned are the stored
ones, of every kind the command knows (the installed providers' and ``--import``'s), in
every namespace, that match the selector, are not among the applied documents and are
not already being deleted. ``-l`` also filters the documents applied, as ``kubectl apply
-l`` does, so the set applied and the set pruned are the same set.

Each pruned object is deleted only if it is still at the resource_version it was listed
at (a change since means the decision was made on stale state: a conflict, exit 1). The
deletions go in the apply's own transaction with ``--atomic`` (the default): all of it
is stored or none of it. With ``--no-atomic`` they come after every document was
stored, and only if every one was.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconcile.api import Client
from reconcile.cli.failing import BadInput, invalid_lines
from reconcile.cli.reading import list_all
from reconcile.errors import InvalidError
from reconcile.model.meta import ObjectKey
from reconcile.model.selectors import LabelSelector

__all__ = ["Pruning", "prune_targets"]


class Pruning:
    """What ``--prune`` selects: a label selector, or everything (``--all``)."""

    def __init__(self, selector: str | None, *, everything: bool) -> None:
        if selector is not None and everything:
            raise BadInput("--prune: give -l SELECTOR or --all, not both")
        try:
            self.selector = LabelSelector.parse(selector)
        except InvalidError as exc:
            raise BadInput(*(f"-l: {line}" for line in invalid_lines(exc))) from None
        self.everything = everything

    def matches(self, labels: dict[str, str] | None) -> bool:
        """Whether a document with these labels is in the set (``-l`` filters them)."""
        return self.selector.matches(labels or {})


async def prune_targets(
    client: Client, pruning: Pruning, applied: Sequence[ObjectKey]
) -> list[tuple[ObjectKey, int]]:
    """The stored objects ``pruning`` selects that ``applied`` does not declare and that
    are not being deleted yet, each with the resource_version it was listed at."""
    declared = set(applied)
    found = await list_all(client, list(client.kinds), None, str(pruning.selector) or None)
    return [
        (obj.key, obj.metadata.resource_version or 0)
        for obj in sorted(found, key=lambda o: (o.key.api_group, o.key.kind, o.key.namespace, o.key.name))
        if obj.key not in declared and obj.metadata.deletion_timestamp is None
    ]
