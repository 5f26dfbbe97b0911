"""Which objects a list or a watch selects: its ``labelSelector`` and its
``fieldSelector``, as one :class:`Selection`.

Field selectors are Kubernetes' (``metadata.name=web,metadata.namespace!=kube-system``):
terms joined by commas, each ``field=value``, ``field==value`` or ``field!=value``, a
backslash escaping ``,``, ``=``, ``!`` or itself in a value. Custom resources answer to
``metadata.name`` and ``metadata.namespace`` only; any other field is refused as the
apiserver refuses it ("field label not supported"), with a 400.

A label selector that does not parse is a 400 too (Kubernetes decodes both while it
reads the query, before any handler runs), naming the parameter.
"""

from __future__ import annotations

import attrs

from reconcile.errors import InvalidError
from reconcile.http.errors import ApiError, Cause
from reconcile.model import LabelSelector
from reconcile.store import StoredObject

__all__ = ["FIELDS", "FieldRequirement", "Selection", "parse_field_selector", "parse_selection"]

#: The fields a custom resource's field selector may name.
FIELDS = ("metadata.name", "metadata.namespace")
_ESCAPABLE = frozenset("\\,=!")


@attrs.frozen
class FieldRequirement:
    """One term of a field selector: ``field`` equals (or, ``negated``, differs from) ``value``."""

    field: str
    value: str
    negated: bool = False

    def matches(self, found: str) -> bool:
        """Whether an object whose field is ``found`` passes."""
        return (found == self.value) != self.negated


def _bad_field_selector(text: str, why: str) -> ApiError:
    return ApiError(
        400,
        f"invalid fieldSelector {text!r}: {why}",
        causes=[Cause(field="fieldSelector", message=why)],
    )


def _terms(text: str) -> list[str]:
    """``text`` split at its unescaped commas (escapes kept for the next step)."""
    terms, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    terms.append("".join(current))
    return terms


def _unescape(value: str, text: str) -> str:
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in _ESCAPABLE:
                raise _bad_field_selector(text, f"invalid escape sequence '\\{char}'")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=!":
            raise _bad_field_selector(text, f"unescaped {char!r} in the value {value!r}")
        else:
            out.append(char)
    if escaped:
        raise _bad_field_selector(text, "a value ends in an escape ('\\')")
    return "".join(out)


def _requirement(term: str, text: str) -> FieldRequirement:
    for operator in ("!=", "==", "="):
        index = term.find(operator)
        if index > 0:
            field, raw = term[:index].strip(), term[index + len(operator) :]
            break
    else:
        raise _bad_field_selector(text, f"can't understand {term!r}")
    if field not in FIELDS:
        message = f"field label not supported: {field}"
        raise ApiError(400, message, causes=[Cause(field="fieldSelector", message=message)])
    return FieldRequirement(field, _unescape(raw, text), negated=operator == "!=")


def parse_field_selector(text: str | None) -> tuple[FieldRequirement, ...]:
    """The terms of a field selector (none for none or ``""``); a 400 naming what is wrong."""
    if not text:
        return ()
    return tuple(_requirement(term, text) for term in _terms(text) if term.strip())


@attrs.frozen
class Selection:
    """A request's label and field selectors together."""

    labels: LabelSelector = attrs.field(factory=LabelSelector)
    fields: tuple[FieldRequirement, ...] = ()

    @property
    def by_labels(self) -> bool:
        """Whether the labels decide anything (an object may enter or leave by them)."""
        return bool(self.labels.requirements)

    @property
    def everything(self) -> bool:
        """Whether every object is selected."""
        return not self.labels.requirements and not self.fields

    def namespace(self) -> str | None:
        """The one namespace the field selector names with ``=`` (a list reads only it)."""
        for term in self.fields:
            if term.field == "metadata.namespace" and not term.negated:
                return term.value
        return None

    def matches_key(self, namespace: str, name: str) -> bool:
        """Whether an object of this namespace and name passes the field selector."""
        for term in self.fields:
            found = name if term.field == "metadata.name" else namespace
            if not term.matches(found):
                return False
        return True

    def matches(self, item: StoredObject) -> bool:
        """Whether a stored object passes both selectors."""
        key = item.key
        if self.fields and not self.matches_key(key.namespace, key.name):
            return False
        return self.labels.matches((item.body.get("metadata") or {}).get("labels") or {})


def parse_selection(label_selector: str | None, field_selector: str | None) -> Selection:
    """A request's selectors (a 400 naming the parameter when one does not parse)."""
    try:
        labels = LabelSelector.parse(label_selector or None)
    except InvalidError as exc:
        why = "; ".join(error.message for error in exc.errors)
        raise ApiError(
            400,
            f"unable to parse requirement: labelSelector {label_selector!r}: {why}",
            causes=[Cause(field="labelSelector", message=why)],
        ) from None
    return Selection(labels, parse_field_selector(field_selector))
