"""Which form of a document a request accepts, as Kubernetes negotiates it: an
``Accept`` media range of ``application/json`` with the parameters ``as`` (the kind),
``g`` (its group) and ``v`` (its version) asks for that kind instead of the plain
document: ``application/json;as=Table;v=v1;g=meta.k8s.io`` (kubectl get's tables),
``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`` (aggregated
discovery). Clients list such a range first and plain ``application/json`` after it as
the fallback; a server that answers with the plain form says so by its ``Content-Type``.
"""

from __future__ import annotations

import attrs
from starlette.requests import Request

__all__ = ["MediaRange", "accepted", "accepts_as", "media_type"]


@attrs.frozen
class MediaRange:
    """One range of an ``Accept`` header: its type and parameters (names lower case)."""

    type: str
    parameters: dict[str, str] = attrs.field(factory=dict, hash=False)


def accepted(header: str) -> list[MediaRange]:
    """The ranges of an ``Accept`` header, in the order the client gave them."""
    ranges = []
    for part in header.split(","):
        pieces = [piece.strip() for piece in part.split(";")]
        if not pieces[0]:
            continue
        parameters = {}
        for piece in pieces[1:]:
            name, _, value = piece.partition("=")
            parameters[name.strip().lower()] = value.strip().strip('"')
        ranges.append(MediaRange(pieces[0].lower(), parameters))
    return ranges


def accepts_as(request: Request, group: str, version: str, kind: str) -> bool:
    """Whether the request's ``Accept`` asks for ``kind`` of ``group/version`` as JSON."""
    return any(
        found.type == "application/json"
        and found.parameters.get("as") == kind
        and found.parameters.get("g") == group
        and found.parameters.get("v") == version
        for found in accepted(request.headers.get("accept", ""))
    )


def media_type(group: str, version: str, kind: str) -> str:
    """The ``Content-Type`` of ``kind`` of ``group/version`` as JSON."""
    return f"application/json;g={group};v={version};as={kind}"
