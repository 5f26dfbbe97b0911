"""Naming rules, as Kubernetes has them (``k8s.io/apimachinery/pkg/util/validation``).

Names are DNS-1123 subdomains, namespaces DNS-1123 labels; label and annotation keys are
qualified names with an optional DNS-subdomain prefix; label values are short and plain.
Each check returns the reasons a value is invalid, empty when it is valid. They are pure
functions of short strings that repeat (namespaces, label keys), so results are cached.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "dns1123_label",
    "dns1123_subdomain",
    "label_value",
    "qualified_name",
]

_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@functools.lru_cache(maxsize=4096)
def dns1123_label(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a DNS-1123 label (a namespace)."""
    if len(value) > _LABEL_MAX:
        return ("must be no more than 63 characters",)
    if not _DNS1123_LABEL.fullmatch(value):
        return (
            (
                "must consist of lower case alphanumeric characters or '-', and must start "
                "and end with an alphanumeric character"
            ),
        )
    return ()


@functools.lru_cache(maxsize=4096)
def dns1123_subdomain(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a DNS-1123 subdomain (an object name)."""
    if len(value) > _SUBDOMAIN_MAX:
        return ("must be no more than 253 characters",)
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            (
                "must consist of lower case alphanumeric characters, '-' or '.', and must "
                "start and end with an alphanumeric character"
            ),
        )
    return ()


@functools.lru_cache(maxsize=4096)
def qualified_name(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a qualified name (a label, annotation or finalizer key)."""
    prefix, slash, name = value.rpartition("/")
    reasons: list[str] = []
    if slash:
        if not prefix:
            reasons.append("prefix part must be non-empty")
        else:
            reasons.extend(f"prefix part {r}" for r in dns1123_subdomain(prefix))
    if not name:
        reasons.append("name part must be non-empty")
    elif len(name) > _LABEL_MAX:
        reasons.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.fullmatch(name):
        reasons.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character"
        )
    return tuple(reasons)


@functools.lru_cache(maxsize=4096)
def label_value(value: str) -> tuple[str, ...]:
    """Reasons ``value`` is not a valid label value."""
    if len(value) > _LABEL_MAX:
        return ("must be no more than 63 characters",)
    if not _LABEL_VALUE.fullmatch(value):
        return (
            (
                "must be empty or consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character"
            ),
        )
    return ()
