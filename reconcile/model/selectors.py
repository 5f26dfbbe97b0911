"""Kubernetes label selectors: ``app=web,tier!=db,env in (prod,staging),!canary,team``.

A selector is a conjunction of requirements; parsing is strict and errors name the
offending requirement. Parsed selectors are frozen values, cheap to match.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from reconcile.errors import FieldError, InvalidError
from reconcile.model.validation import label_value, qualified_name

__all__ = ["LabelSelector", "Requirement"]

_SET_FORM = re.compile(r"\s*(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*")
_EQUALITY_FORM = re.compile(r"\s*(?P<key>[^\s!=()]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*")
_EXISTS_FORM = re.compile(r"\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)\s*")


@attrs.frozen
class Requirement:
    """One clause of a selector."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this clause."""
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "==", "in"):
            return present and labels[self.key] in self.values
        # != and notin also match objects that lack the key, as in Kubernetes.
        return not present or labels[self.key] not in self.values


def _order(requirement: Requirement) -> tuple[str, str, tuple[str, ...]]:
    return requirement.key, requirement.operator, tuple(sorted(requirement.values))


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _check(key: str, values: frozenset[str], clause: str) -> list[FieldError]:
    errors = [FieldError("label_selector", f"{clause!r}: key {r}") for r in qualified_name(key)]
    for value in sorted(values):
        errors.extend(FieldError("label_selector", f"{clause!r}: value {r}") for r in label_value(value))
    return errors


def _parse_clause(clause: str) -> tuple[Requirement | None, list[FieldError]]:
    if match := _SET_FORM.fullmatch(clause):
        values = frozenset(v.strip() for v in match["values"].split(","))
        requirement = Requirement(match["key"], match["op"], values)
    elif match := _EQUALITY_FORM.fullmatch(clause):
        op = "=" if match["op"] == "==" else match["op"]
        requirement = Requirement(match["key"], op, frozenset([match["value"]]))
    elif match := _EXISTS_FORM.fullmatch(clause):
        requirement = Requirement(match["key"], "!" if match["neg"] else "exists")
    else:
        return None, [FieldError("label_selector", f"{clause.strip()!r}: cannot parse")]
    return requirement, _check(requirement.key, requirement.values, clause.strip())


@attrs.frozen
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str | Mapping[str, str] | LabelSelector | None) -> LabelSelector:
        """Parse the string form, or take a mapping as equality requirements."""
        if text is None:
            return cls()
        if isinstance(text, LabelSelector):
            return text
        if isinstance(text, Mapping):
            text = ",".join(f"{k}={v}" for k, v in text.items())
        if not text.strip():
            return cls()
        requirements, errors = [], []
        for clause in _split(text):
            requirement, clause_errors = _parse_clause(clause)
            errors.extend(clause_errors)
            if requirement is not None:
                requirements.append(requirement)
        if errors:
            raise InvalidError(errors)
        # Canonical, as Kubernetes sorts them by key: "x=a,a=x" and "a=x,x=a" are one
        # selector, print alike and compare equal.
        return cls(tuple(sorted(requirements, key=_order)))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every requirement."""
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        parts = []
        for r in self.requirements:
            if r.operator == "exists":
                parts.append(r.key)
            elif r.operator == "!":
                parts.append(f"!{r.key}")
            elif r.operator in ("in", "notin"):
                parts.append(f"{r.key} {r.operator} ({','.join(sorted(r.values))})")
            else:
                parts.append(f"{r.key}{r.operator}{next(iter(r.values))}")
        return ",".join(parts)
