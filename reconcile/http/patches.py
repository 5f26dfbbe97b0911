"""PATCH bodies: which kind of patch a request sends (by its ``Content-Type``), and the
patched document.

* ``application/merge-patch+json``: an RFC 7386 merge patch of the whole document
  (:func:`reconcile.api.merge_patch`);
* ``application/json-patch+json``: an RFC 6902 list of operations
  (:func:`reconcile.api.patching.json_patch`); one that cannot be applied is ``422``
  naming the operation;
* ``application/apply-patch+yaml``: server-side apply (the body is the applied
  configuration, YAML or JSON), mapped onto :meth:`reconcile.api.Client.apply`.

``application/strategic-merge-patch+json`` is refused with ``415``, as Kubernetes
refuses it for custom resources: a strategic merge needs Go struct tags our kinds do not
have. kubectl knows: ``label``, ``annotate``, ``edit`` and client-side ``apply`` send a
merge patch for a kind not compiled into it; ``kubectl patch`` without ``--type`` sends
a strategic one and says the server refused it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from starlette.requests import Request

from reconcile.api.merging import merge_patch
from reconcile.api.patching import json_patch
from reconcile.http.bodies import media_type, parse, unsupported
from reconcile.http.errors import ApiError

__all__ = [
    "APPLY",
    "JSON_PATCH",
    "MERGE",
    "PATCH_TYPES",
    "STRATEGIC",
    "Patch",
    "read_patch",
    "unsupported_apply",
]

JSON_PATCH = "application/json-patch+json"
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
#: What a PATCH takes, in the order a 415 names them (Kubernetes' for custom resources).
PATCH_TYPES = (JSON_PATCH, MERGE, APPLY)


@attrs.frozen
class Patch:
    """A parsed PATCH body and its type."""

    media: str
    data: Any

    @property
    def is_apply(self) -> bool:
        """Whether it is a server-side apply."""
        return self.media == APPLY

    def apply_to(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """``document`` patched (a new mapping; ``document`` is not changed)."""
        merging = self.media == MERGE
        patched = merge_patch(document, self.data) if merging else json_patch(document, self.data)
        if not isinstance(patched, dict):
            raise ApiError(422, "the patched document is not an object")
        return patched


def unsupported_apply() -> ApiError:
    """The 415 of an apply patch where only merge and JSON patches are taken (the
    status subresource)."""
    return unsupported((JSON_PATCH, MERGE))


async def read_patch(request: Request) -> Patch:
    """The request's patch: 415 for a media type not in :data:`PATCH_TYPES` (a strategic
    merge patch included), 400 for a body that does not parse or has the wrong shape."""
    media = media_type(request, default=None)
    if media not in PATCH_TYPES:
        raise unsupported(PATCH_TYPES)
    data = parse(await request.body(), "yaml" if media == APPLY else "json")
    if media == JSON_PATCH:
        if not isinstance(data, list):
            raise ApiError(400, "the request body is not a JSON patch: expected a list of operations")
    elif not isinstance(data, dict):
        raise ApiError(400, "the request body is not a patch: expected an object")
    return Patch(media, data)
