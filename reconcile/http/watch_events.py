"""Watch events on the wire: one JSON object per line,
``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}``, and which
one a stored event is for a given watcher.

The store's events say what happened to an object (``Created``, ``SpecChanged``,
``Deleted``, controller notes without a snapshot...); a watcher sees what happened to its
*selection*, as the apiserver's watch cache tells it: an object that comes to match its
label selector is ADDED, one that stops matching is DELETED (its object is its previous
state, the last one that matched, with the event's resourceVersion, as the apiserver
sends it), a note is nothing. To know whether an object matched
before, a watcher that started with the full list knows every key it holds; one that
started from a resourceVersion looks the object's previous snapshot up in its history
the first time a label-selected watch meets its key (once per key), and when that
snapshot was compacted away takes the object as having matched as it matches now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from reconcile.api import Client
from reconcile.http.context import Target
from reconcile.http.documents import to_wire
from reconcile.http.errors import status_body
from reconcile.http.selecting import Selection
from reconcile.http.watchers import WireObjects
from reconcile.model.events import EventType
from reconcile.model.meta import ObjectKey
from reconcile.store import RawEvent, StoredObject

__all__ = ["INITIAL_EVENTS_END", "Tabulate", "Translator", "bookmark_line", "error_line", "event_line"]

#: The annotation of the bookmark that ends a watch's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

ADDED, MODIFIED, DELETED = b"ADDED", b"MODIFIED", b"DELETED"

#: An event's object as a Table of its one row (``kubectl get -w``); the flag: whether
#: it is the stream's first, which carries the column definitions.
Tabulate = Callable[[dict[str, Any], bool], dict[str, Any]]


def event_line(event_type: bytes, wire_object: bytes) -> bytes:
    """One event's line, of an object already encoded."""
    return b'{"type":"' + event_type + b'","object":' + wire_object + b"}\n"


def bookmark_line(found: Target, revision: int, *, initial_events_end: bool = False) -> bytes:
    """A BOOKMARK: the watcher has seen everything up to ``revision``."""
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_events_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    document = {
        "kind": found.resource.kind.kind,
        "apiVersion": found.resource.group_version,
        "metadata": meta,
    }
    return event_line(b"BOOKMARK", orjson.dumps(document))


def error_line(code: int, message: str, reason: str) -> bytes:
    """An ERROR event carrying a ``Status``."""
    return event_line(b"ERROR", orjson.dumps(status_body(code, message, reason)))


class Translator:
    """Turns one watcher's stored events into its event lines."""

    def __init__(
        self,
        client: Client,
        found: Target,
        selection: Selection,
        objects: WireObjects,
        tabulate: Tabulate | None = None,
    ) -> None:
        self._client = client
        self._tabulate = tabulate
        self._tabled = False
        self._found = found
        self._selection = selection
        self._objects = objects
        #: Whether each key met so far matched the label selector (label-selected only).
        self._matched: dict[ObjectKey, bool] = {}
        #: Whether every key that matched is in ``_matched`` (the watch listed first).
        self.complete = False

    def _document(self, revision: int, stored: StoredObject) -> dict[str, Any]:
        current = self._client.decoder.current(stored)
        assert current is not None
        document = to_wire(self._client, self._found.resource, current.body)
        document["metadata"]["resourceVersion"] = str(revision)
        return document

    def _encoded(self, revision: int, stored: Callable[[], StoredObject]) -> bytes:
        """The object of ``revision`` as its wire document's JSON, made (from ``stored``)
        only when no other watcher made it already; as a Table of its row for a watcher
        that asked for tables (the column definitions in the first only)."""
        if self._tabulate is not None:
            first, self._tabled = not self._tabled, True
            return orjson.dumps(self._tabulate(self._document(revision, stored()), first))
        api_version = self._found.resource.group_version
        return self._objects.get(
            revision, api_version, lambda: orjson.dumps(self._document(revision, stored()))
        )

    def listed(self, item: StoredObject) -> bytes:
        """The ADDED line of an object of the list a watch starts with."""
        if self._selection.by_labels:
            self._matched[item.key] = True
        return event_line(ADDED, self._encoded(item.resource_version, lambda: item))

    def _labels_match(self, body: Mapping[str, Any]) -> bool:
        return self._selection.labels.matches((body.get("metadata") or {}).get("labels") or {})

    async def _previous(self, event: RawEvent) -> RawEvent | None:
        """The object's snapshot before ``event`` (None: compacted away, or none)."""
        previous = None
        for earlier in await self._client.store.events(event.key):
            if earlier.revision >= event.revision:
                break
            if earlier.has_body:
                previous = earlier
        return previous

    async def _matched_before(self, event: RawEvent) -> tuple[bool, RawEvent | None]:
        """Whether the object matched before ``event``, and its previous snapshot when
        that took reading its history (None otherwise)."""
        known = self._matched.get(event.key)
        if known is not None:
            return known, None
        if self.complete or event.type == EventType.CREATED:
            return False, None
        previous = await self._previous(event)
        if previous is None:  # (compacted away: as it matches now)
            assert event.body is not None
            return self._labels_match(event.body), None
        if previous.type == EventType.DELETED:
            return False, previous
        assert previous.body is not None
        return self._labels_match(previous.body), previous

    async def line(self, event: RawEvent) -> bytes | None:
        """The line ``event`` is for this watcher, or None (a note; not its business)."""
        if not event.has_body:
            return None
        key = event.key
        selection = self._selection
        if selection.fields and not selection.matches_key(key.namespace, key.name):
            return None
        deleted = event.type == EventType.DELETED
        if not selection.by_labels:
            kind = DELETED if deleted else ADDED if event.type == EventType.CREATED else MODIFIED
            return event_line(kind, self._event_object(event))
        body = event.body
        assert body is not None
        previous: RawEvent | None = None
        if deleted:  # (a deletion changes no label: it matched before as it does now)
            before, now = self._matched.pop(key, None), False
            if before is None:
                before = self._labels_match(body)
        else:
            (before, previous), now = await self._matched_before(event), self._labels_match(body)
            self._matched[key] = now
        if now:
            return event_line(MODIFIED if before else ADDED, self._event_object(event))
        if not before:
            return None
        if not deleted:  # it left the selection: the state it had in it, at this revision
            if previous is None:
                previous = await self._previous(event)
            if previous is not None and previous.type != EventType.DELETED and previous.body is not None:
                return event_line(DELETED, self._left_object(event, previous))
        return event_line(DELETED, self._event_object(event))

    def _left_object(self, event: RawEvent, previous: RawEvent) -> bytes:
        """The object's ``previous`` state with ``event``'s resourceVersion (made for this
        watcher alone: the shared objects by revision hold the state *at* a revision)."""
        body = previous.body
        assert body is not None
        document = self._document(event.revision, StoredObject(event.key, event.uid, event.revision, body))
        if self._tabulate is not None:
            first, self._tabled = not self._tabled, True
            return orjson.dumps(self._tabulate(document, first))
        return orjson.dumps(document)

    def _event_object(self, event: RawEvent) -> bytes:
        def stored() -> StoredObject:
            body = event.body
            assert body is not None
            return StoredObject(event.key, event.uid, event.revision, body)

        return self._encoded(event.revision, stored)
