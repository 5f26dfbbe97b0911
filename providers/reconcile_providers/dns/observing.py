"""What a record set's observation says: the spec's records as observe reports them, the
records a server answered in that form, and the differences between the two (records,
TTL, the stale lines of its ownership mark)."""

from __future__ import annotations

from typing import Any

import dns.rdata

import reconcile
from reconcile_providers.dns.marks import stale_difference, subject_of
from reconcile_providers.dns.records import (
    canonical_records,
    canonical_spec_records,
    fqdn_text,
    parse_record,
    spec_wires,
)
from reconcile_providers.dns.wire import Answer

__all__ = ["found_texts", "observation", "wanted_records", "wanted_texts"]


def wanted_records(resource: reconcile.Resource[Any, Any]) -> list[dns.rdata.Rdata]:
    """The spec's records, parsed."""
    spec = resource.spec
    return [parse_record(spec.type, text, spec.zone) for text in spec.records]


def wanted_texts(resource: reconcile.Resource[Any, Any]) -> list[str]:
    """The spec's records as observe reports them."""
    spec = resource.spec
    return list(canonical_spec_records(spec.type, tuple(spec.records), spec.zone))


def found_texts(resource: reconcile.Resource[Any, Any], answer: Answer) -> list[str]:
    """The records of ``answer`` as observe reports them: the spec's own texts when the
    answer holds exactly the spec's records' bytes (no parsing), else parsed."""
    spec = resource.spec
    if answer.wires is not None and frozenset(answer.wires) == spec_wires(
        spec.type, tuple(spec.records), spec.zone
    ):
        return wanted_texts(resource)
    return canonical_records(answer.rdatas)


def observation(
    resource: reconcile.Resource[Any, Any],
    answer: Answer | None,
    owner: str | None,
    *,
    key: bytes,
    store_owner: str,
    stale: list[dns.rdata.Rdata] | None = None,
    found: list[str] | None = None,
) -> reconcile.Observation:
    """What observe reports of ``resource`` from ``answer`` (its RRset; None: there is
    none): the records' differences from the spec, the TTL's, and the stale lines of its
    mark (signed with ``key`` for ``store_owner``)."""
    if answer is None:
        return reconcile.Observation(exists=False, owner=owner)
    spec = resource.spec
    found = found_texts(resource, answer) if found is None else found
    wanted = wanted_texts(resource)
    differences = [f"-{r}" for r in found if r not in wanted] + [f"+{r}" for r in wanted if r not in found]
    if answer.ttl != spec.ttl:
        differences.append(f"ttl {answer.ttl} -> {spec.ttl}")
    subject = subject_of(spec.zone, spec.name)
    differences += [stale_difference(key, subject, old, store_owner) for old in stale or ()]
    observed = {
        "fqdn": fqdn_text(spec.zone, spec.name),
        "type": spec.type,
        "ttl": answer.ttl,
        "records": found,
    }
    return reconcile.Observation.present(differences, observed=observed, owner=owner)
