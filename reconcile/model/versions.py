"""Versions of a kind and conversion between them (hub and spoke).

A kind may be served in several versions, as a Kubernetes CRD is (``spec.versions``:
``served``, ``storage``, ``deprecated``, ``deprecationWarning``). The kind's own
``api_version`` is its storage version, the *hub* (controller-runtime's
``conversion.Hub``); every other version is a *spoke* (its ``conversion.Convertible``):
a :class:`KindVersion` with its own spec class and two functions, to the hub's spec and
from it. Any version reaches any other through the hub, so n versions need 2(n-1)
functions, not n(n-1).

Where conversion happens:

* at admission: a manifest of a served spoke version is structured (strictly, with field
  paths) as that version's spec, converted to the hub's, then validated as the hub's.
  The stored body is always the storage version;
* on read: a body the store wrote under a spoke version (before the storage version
  moved, or by an older release: the log is never rewritten) is converted to the hub
  when decoded; and a read may ask for any served version (``get(...,
  api_version=...)``), converted from the hub.

A version is deprecated (a warning on each use, like ``deprecationWarning``), then
unserved (a manifest or read of it is refused, naming the served ones); an unserved
version keeps its conversion functions, for the bodies the log holds in it. A kind
with no spokes pays nothing: nothing here runs for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from reconcile.errors import ConversionError

if TYPE_CHECKING:  # (cattrs is not loaded by the commands that only list kinds)
    import cattrs

__all__ = ["KindVersion", "convert_body", "version_name"]


def version_name(api_version: str) -> str:
    """The version part of an ``api_version`` (``sites.example.dev/v1`` -> ``v1``)."""
    return api_version.rpartition("/")[2]


def _pairs(renamed: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    pairs = tuple(sorted(dict(renamed).items()))
    for old, new in pairs:
        if not isinstance(old, str) or not isinstance(new, str) or not old or not new:
            msg = f"renamed maps a field path to a field path ('color': 'colors'), not {old!r}: {new!r}"
            raise ValueError(msg)
    return pairs


@attrs.frozen
class KindVersion:
    """A spoke version of a kind: its name (``v1alpha1``), its spec class, and its
    conversion to and from the hub's (the storage version's) spec. Its status is the
    hub's status class (status is the controller's, written in the storage version).

    ``to_storage(spec)`` returns the hub spec for a spec of this version;
    ``from_storage(spec)`` the reverse. Fields one version has and the other lacks are
    the functions' business (a default, or an annotation to keep them, as Kubernetes
    conversions do): the round trip keeps what both versions hold.
    """

    name: str
    spec_type: type[Any]
    to_storage: Callable[[Any], Any] = attrs.field(eq=False)
    from_storage: Callable[[Any], Any] = attrs.field(eq=False)
    #: Whether manifests and reads may use it; an unserved version is refused by name
    #: (its bodies already in the log are still converted on read).
    served: bool = True
    #: Whether its use is warned about (``deprecation_warning``, or a default message).
    deprecated: bool = False
    deprecation_warning: str | None = None
    #: The fields its conversion moves to another path of the storage version, as
    #: ``{"color": "colors"}`` (dotted paths below ``spec``, documents' spelling): what
    #: a manifest of this version declares for server-side apply follows them (fields
    #: of the same name need none; see ``reconcile.api.fields.converted_paths``).
    renamed: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)

    def __attrs_post_init__(self) -> None:
        if not self.name or "/" in self.name:
            msg = f"a version's name is the part after the group's slash (v1alpha1), not {self.name!r}"
            raise ValueError(msg)

    def warning(self, api_version: str, kind: str, storage: str) -> str | None:
        """What a use of this version is warned with, when it is deprecated."""
        if not self.deprecated:
            return None
        return self.deprecation_warning or f"{api_version} {kind} is deprecated; use {storage}"


def convert_body(
    body: Mapping[str, Any],
    *,
    to_api_version: str,
    from_type: type[Any],
    to_type: type[Any],
    function: Callable[[Any], Any],
    structure: cattrs.Converter,
    unstructure: cattrs.Converter,
) -> dict[str, Any]:
    """``body`` (a document: ``apiVersion``, ``kind``, ``metadata``, ``spec``, ...) in
    ``to_api_version``: its spec structured as ``from_type``, converted by ``function``,
    unstructured as ``to_type``; the rest kept. A function that raises, or returns what
    is not a ``to_type``, is a :class:`ConversionError` naming kind, versions and object."""
    meta = body.get("metadata") or {}
    subject = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
    kind = str(body.get("kind"))
    source = str(body.get("apiVersion"))
    try:
        converted = function(structure.structure(body.get("spec") or {}, from_type))
        if not isinstance(converted, to_type):
            msg = f"the conversion returned {type(converted).__name__}, not {to_type.__name__}"
            raise TypeError(msg)  # noqa: TRY301 - reported as the others are
        spec = unstructure.unstructure(converted, to_type)
    except Exception as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ConversionError(kind, subject, source, to_api_version, reason) from exc
    result = dict(body)
    result["apiVersion"] = to_api_version
    result["spec"] = spec
    return result
