"""Reads: one object (``GET .../{plural}/{name}``) and lists of a kind, in a namespace or
across all (``GET .../{plural}``), with the list options of :mod:`reconcile.http.listing`
(selectors, ``limit`` and ``continue``, ``resourceVersion`` and ``resourceVersionMatch``);
``watch=true`` on a list's path streams its changes instead (:mod:`reconcile.http.watching`).

What a ``resourceVersion`` can get from this store: it lists its current state only (no
snapshot of an older revision is kept), so ``NotOlderThan`` (and the legacy
``resourceVersion`` without a match) is always served at the head; ``Exact`` at an
older revision is served when nothing of the listed kind and namespace changed since
that revision (the list then is the list at it), a 410 Expired otherwise, as the
apiserver answers a revision it can no longer serve.

Bodies come from the store as stored, brought to the current spelling and storage version
by the client's decoder (nothing structured into attrs classes on the way), then to the
wire form (:mod:`reconcile.http.documents`).
"""

from __future__ import annotations

import contextlib

from starlette.requests import Request
from starlette.responses import Response

from reconcile.api import Client
from reconcile.api.paging import decode_continue, encode_continue
from reconcile.errors import ExpiredError, InvalidError
from reconcile.http.context import Target, namespace_or_default, state, target
from reconcile.http.documents import to_wire, wire_version
from reconcile.http.errors import ApiError, Cause
from reconcile.http.listing import EXACT, ListOptions, parse_list_options, too_large, wants_watch
from reconcile.http.presenting import present_list, present_object
from reconcile.http.watching import watch_objects
from reconcile.model import ObjectKey
from reconcile.model.events import Bookmark

__all__ = ["get_object", "list_objects", "object_key"]


def object_key(found: Target) -> ObjectKey:
    """The key of the object a request names."""
    assert found.name is not None
    kind = found.resource.kind
    return ObjectKey(kind.api_group, kind.kind, namespace_or_default(found), found.name)


async def get_object(request: Request) -> Response:
    """``GET .../namespaces/{namespace}/{plural}/{name}``."""
    found = target(request, "get")
    client = state(request).client
    stored = client.decoder.current(await client.store.read(object_key(found)))
    if stored is None:
        raise ApiError(
            404,
            f'{found.resource.plural}.{found.resource.group} "{found.name}" not found',
            details={"name": found.name, "group": found.resource.group, "kind": found.resource.plural},
        )
    return present_object(request, found, to_wire(client, found.resource, stored.body))


async def _changed_since(client: Client, found: Target, namespace: str | None, revision: int) -> bool:
    """Whether any object of the listed kind (and namespace) changed after ``revision``:
    read from the log up to the head, stopping at the first change. An expired revision
    counts as changed (nothing says it did not)."""
    kind = found.resource.kind
    events = client.store.watch(since=revision, api_group=kind.api_group, kind=kind.kind, namespace=namespace)
    try:
        async for item in events:
            if isinstance(item, Bookmark):
                return False
            if item.has_body:
                return True
    except ExpiredError:
        return True
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    return False  # (the store closed)


def _after(token: str | None) -> tuple[tuple[str, str] | None, int | None]:
    """Where a list's page goes on (the key after which) and the revision of its first
    page, from its continue token (None, None: the first page)."""
    if token is None:
        return None, None
    key_token, dot, first = token.rpartition(".")
    if not dot:  # (a token without the first page's revision)
        key_token, first = token, ""
    after = None
    with contextlib.suppress(InvalidError):
        after = decode_continue(key_token)
    if after is None or (first and not first.isdecimal()):
        raise ApiError(
            400,
            "continue: the continue token is not valid: it is not a token this server returned",
            causes=[Cause(field="continue", message="not a token returned by list")],
        )
    return after, int(first) if first else None


def _continue_token(after: tuple[str, str], first: int) -> str:
    """The token of the page after ``after``, carrying the revision of the list's first
    page (base64 has no dot)."""
    return f"{encode_continue(after)}.{first}"


async def _checked_revision(
    client: Client, found: Target, options: ListOptions, namespace: str | None, head: int
) -> int:
    """The revision a list at ``head`` answers for, given what it asked: a revision after
    the head is a 504 (Kubernetes' "Too large resource version"); an exact older one is
    served only when nothing listed changed since (this store lists its current state
    alone), a 410 Expired otherwise, which client-go answers by listing afresh."""
    asked = options.resource_version
    if not asked:
        return head
    if asked > head:
        raise too_large(asked, head)
    match = options.resource_version_match
    exact = match == EXACT or (not match and options.limit is not None and not options.continue_token)
    if not exact or asked == head:
        return head
    if await _changed_since(client, found, namespace, asked):
        raise ApiError(
            410,
            f"The resourceVersion for the provided list is too old: {asked} (this server lists "
            f"only its current state, {head}, and the list changed since)",
        )
    return asked


async def list_objects(request: Request) -> Response:
    """``GET .../{plural}``: a page of a kind's objects, or with ``watch=true`` a stream
    of their changes (:func:`reconcile.http.watching.watch_objects`)."""
    watch = wants_watch(request.query_params)
    found = target(request, "watch" if watch else "list")
    options = parse_list_options(request.query_params)
    if options.watch:
        return await watch_objects(request, found, options)
    client = state(request).client
    selection = options.selection
    namespace = found.namespace
    only = selection.namespace()
    if only is not None and namespace is not None and only != namespace:
        # Nothing can match: an empty list at the head.
        return present_list(
            request,
            found,
            [],
            resource_version=wire_version(await client.store.revision()),
            continue_token=None,
        )
    namespace = namespace or only

    kind = found.resource.kind
    after, first = _after(options.continue_token)
    page = await client.store.list(
        kind.api_group,
        kind.kind,
        namespace=namespace,
        after=after,
        limit=options.limit,
        predicate=None if selection.everything else selection.matches,
    )
    revision = await _checked_revision(client, found, options, namespace, page.revision)
    if first is not None:
        # Every page says the first page's revision, as Kubernetes' do: a watch from any
        # of them then replays every change since the first page (a later page is read
        # at the head: a change to an earlier page's object would be missed otherwise).
        revision = min(first, revision)
    documents = []
    for item in page.items:
        current = client.decoder.current(item)
        assert current is not None
        documents.append(to_wire(client, found.resource, current.body))
    return present_list(
        request,
        found,
        documents,
        resource_version=wire_version(revision),
        continue_token=None if page.next_after is None else _continue_token(page.next_after, revision),
    )
