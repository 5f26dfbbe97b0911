"""Declarations that cannot coexist though they name different external resources
(``Kind.conflicts``: a DNS CNAME and any other data at one name), refused at apply.

Checked against the live objects the store holds and the documents of the same bulk apply
written before it, before the write: not in the committing transaction, as identity
claims are, so two racing applies can both pass; the provider enforces the rule itself
too (the dns provider's prerequisites).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from reconcile.errors import FieldError, InvalidError
from reconcile.model.meta import ObjectKey

if TYPE_CHECKING:
    from reconcile.api.admission import Admitted
    from reconcile.store.contract import EventStore

__all__ = ["Declared", "conflict_error", "conflicting"]

#: Identities declared by documents of a bulk apply so far: (api group, kind, identity).
Declared = dict[tuple[str, str, str], ObjectKey]


def conflicting(admitted: Admitted) -> list[tuple[str, str, str]]:
    """What ``admitted`` cannot coexist with, as (api group, kind, identity): the
    store's claimants of these are what :func:`conflict_error` looks up."""
    kind = admitted.kind
    if kind.conflicts is None:
        return []
    identities = (kind.identity_of(spec) for _, spec, _ in kind.conflicts(admitted.body["spec"]))
    return [(kind.api_group, kind.kind, identity) for identity in identities if identity is not None]


async def conflict_error(
    store: EventStore,
    key: ObjectKey,
    admitted: Admitted,
    declared: Mapping[tuple[str, str, str], ObjectKey],
    claimants: Mapping[tuple[str, str, str], ObjectKey | None] | None = None,
) -> InvalidError | None:
    """The refusal of ``admitted`` when another live object (or an earlier document of
    the same apply, in ``declared``) declares something it cannot coexist with; None
    when nothing does. ``claimants``: the store's answers looked up already (a bulk
    apply asks for all its documents' at once); what is not there is asked now."""
    kind = admitted.kind
    assert kind.conflicts is not None, "called for a kind that declares conflicts"
    errors = []
    for field, spec, reason in kind.conflicts(admitted.body["spec"]):
        identity = kind.identity_of(spec)
        if identity is None:
            continue
        declaring = (kind.api_group, kind.kind, identity)
        other = declared.get(declaring)
        if other is None:
            if claimants is not None and declaring in claimants:
                other = claimants[declaring]
            else:
                other = await store.claimant(*declaring)
        if other is not None and other != key:
            where = f"{other.kind} {other.namespace}/{other.name}"
            errors.append(FieldError(f"spec.{field}", f"{reason}: {where} declares {identity}"))
    if not errors:
        return None
    return InvalidError(errors, subject=f"{key.kind} {key.namespace}/{key.name}")
