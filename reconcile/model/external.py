"""The provider contract: what a plugin declares and implements (after Crossplane's
managed resources and Terraform's resource lifecycle).

A :class:`Provider` declares kinds and ``connect(config)`` returns an
:class:`ExternalClient` with four idempotent calls (one client for all its kinds, or one
per kind gathered in a :class:`PerKind`):

* ``observe(resource)`` reads the external system and never changes it. It says whether
  the resource exists, whether it matches the spec, what was observed, a human-readable
  diff, and which owner marker (if any) the external resource carries.
* ``create(resource)`` creates it, marking it with ``resource.metadata.uid`` where the
  external system allows; creating one that exists and is ours succeeds; one that exists
  and is not ours raises ``NotOwnedError`` and changes nothing. It may return an external
  name (an id the system chose), which the engine keeps, or a :class:`Created`.
* ``update(resource, observation)`` brings it to the spec.
* ``delete(resource)`` deletes it; deleting a missing one succeeds.

A mutating call may return the :class:`Observation` that holds after it, when the
provider knows it from the call's own answers (the ETag a PUT returned, the settings it
just wrote): the engine then records the outcome without observing again (Terraform reads
after every create; a provider that already knows spares that read). The conformance kit
checks that such an observation agrees with a real ``observe``.

What the engine may skip depends on what the kind declares the external system
guarantees (:class:`~reconcile.model.kinds.Behaviour`): for an ``EXCLUSIVE`` kind it
creates a resource it has no record of without observing first (the create itself
refuses a resource that is not ours, as Terraform creates what is not in its state): one
call instead of two. :meth:`Observation.present` builds what ``observe`` reports for a
resource it compared with the spec.

Everything else (finalizers, the create-pending/succeeded markers that stop a crash from
leaking or duplicating a resource, deletion and management policies, pause, polling,
conditions, retries, ownership) is the engine's job, not the plugin's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from reconcile.annotations import (
    ANNOTATION_ADOPT,
    ANNOTATION_CREATE_PENDING,
    ANNOTATION_CREATE_SUCCEEDED,
    ANNOTATION_DELETION_POLICY,
    ANNOTATION_EXTERNAL_IDENTITY,
    ANNOTATION_EXTERNAL_NAME,
    ANNOTATION_MANAGEMENT_POLICY,
    ANNOTATION_PAUSED,
    DELETION_POLICIES,
    FINALIZER,
    MANAGEMENT_POLICIES,
)
from reconcile.errors import PermanentError
from reconcile.model.conditions import Status
from reconcile.model.kinds import Kind
from reconcile.model.resource import Resource

__all__ = [
    "ANNOTATION_ADOPT",
    "ANNOTATION_CREATE_PENDING",
    "ANNOTATION_CREATE_SUCCEEDED",
    "ANNOTATION_DELETION_POLICY",
    "ANNOTATION_EXTERNAL_IDENTITY",
    "ANNOTATION_EXTERNAL_NAME",
    "ANNOTATION_MANAGEMENT_POLICY",
    "ANNOTATION_PAUSED",
    "DELETION_POLICIES",
    "FINALIZER",
    "MANAGEMENT_POLICIES",
    "Adopting",
    "Created",
    "ExternalClient",
    "ListingOwned",
    "ManagedStatus",
    "Observation",
    "Owned",
    "PerKind",
    "Provider",
    "StoreBound",
    "bind_store",
    "client_of",
    "ours",
]


@attrs.frozen
class Observation:
    """What ``observe`` saw. ``owner`` is the marker found on the external resource
    (the uid of the resource that created it), None when it carries none."""

    exists: bool
    up_to_date: bool = True
    observed: Mapping[str, Any] = attrs.Factory(dict)
    diff: str = ""
    owner: str | None = None
    #: How the provider describes an up-to-date resource it reports as ours when no create
    #: of it was recorded (the history's CreateSucceeded says it); empty: the engine's
    #: "found in place, marked as this resource's".
    found: str = ""
    #: What tells this very external resource from another one put in its place (a
    #: bucket's creation date, an object's ETag and version id, a file's inode): None
    #: when the provider cannot tell or did not look. The engine records the identity
    #: its own create and update report (``reconcile.dev/external-identity``); an
    #: unmarked resource is ours only when its identity equals that record.
    identity: str | None = None

    @classmethod
    def present(
        cls,
        differences: Iterable[str] = (),
        *,
        observed: Mapping[str, Any] | None = None,
        owner: str | None = None,
        identity: str | None = None,
        found: str = "",
        separator: str = "; ",
    ) -> Observation:
        """A resource that exists, up to date unless ``differences`` (each a short
        human-readable line, ``"tags: +team"``) name some, joined by ``separator`` into
        the diff: what ``observe`` reports after comparing what it found with the spec."""
        differences = list(differences)
        return cls(
            exists=True,
            up_to_date=not differences,
            observed=dict(observed or {}),
            diff=separator.join(differences),
            owner=owner,
            found=found,
            identity=identity,
        )


@attrs.frozen
class Created:
    """What ``create`` may return instead of a bare external name: the name (None when
    the identity is deterministic) and the observation that holds after the create, when
    the provider knows it from the create's own answers."""

    external_name: str | None = None
    observation: Observation | None = None

    @classmethod
    def of(cls, answer: str | Created | None) -> Created:
        """Any answer ``create`` may give, as a Created."""
        if isinstance(answer, Created):
            return answer
        return cls(external_name=answer or None)


@attrs.frozen
class ManagedStatus(Status):
    """The status of a managed resource: conditions, observed generation, and what the
    provider observed (``at_provider``)."""

    at_provider: dict[str, Any] = attrs.Factory(dict)


class ExternalClient(Protocol):
    """A connection to one external system."""

    async def observe(self, resource: Resource[Any, Any]) -> Observation:
        """Read the external resource; never change anything."""

    async def create(self, resource: Resource[Any, Any]) -> str | Created | None:
        """Create it (idempotent; NotOwnedError for an existing one not ours); return its
        external name when the system chose one, or a :class:`Created`."""

    async def update(self, resource: Resource[Any, Any], observation: Observation) -> Observation | None:
        """Bring it to the spec (idempotent); optionally return what holds after."""

    async def delete(self, resource: Resource[Any, Any]) -> Observation | None:
        """Delete it; a missing one is already deleted. Optionally return what holds after
        (``Observation(exists=False)``: gone, no need to look again)."""

    async def close(self) -> None:
        """Release connections."""


class PerKind:
    """A provider's clients, one per kind, as one :class:`ExternalClient`.

    What ``connect`` returns when each of its kinds has a client of its own (a bucket
    client and an object client over one connection), so that no call has to dispatch on
    ``resource.kind``::

        async def connect(self, config):
            return reconcile.PerKind({BUCKET: BucketClient(config), OBJECT: ObjectClient(config)})

    Each call goes to the client of the resource's kind. The optional abilities are each
    kind's own: the engine asks the kind's client (:func:`client_of`) whether it can
    ``adopt`` or list what it made (:class:`ListingOwned`). ``bind_store`` and ``close``
    reach every client once (one may serve several kinds). A subclass may hold the
    connection its clients share (and close it in its own ``close``)."""

    def __init__(self, clients: Mapping[Kind, ExternalClient]) -> None:
        self._per_kind = {(kind.api_version, kind.kind): client for kind, client in clients.items()}
        self._per_kind_each = list({id(client): client for client in clients.values()}.values())

    def client_for(self, api_version: str, kind: str) -> ExternalClient:
        """The client of this kind; PermanentError when the provider gave none."""
        client = self._per_kind.get((api_version, kind))
        if client is None:
            message = f"the provider has no client for kind {kind} of {api_version}"
            raise PermanentError(message)
        return client

    def _of(self, resource: Resource[Any, Any]) -> ExternalClient:
        return self.client_for(resource.api_version, resource.kind)

    async def observe(self, resource: Resource[Any, Any]) -> Observation:
        """The kind's client's observe."""
        return await self._of(resource).observe(resource)

    async def create(self, resource: Resource[Any, Any]) -> str | Created | None:
        """The kind's client's create."""
        return await self._of(resource).create(resource)

    async def update(self, resource: Resource[Any, Any], observation: Observation) -> Observation | None:
        """The kind's client's update."""
        return await self._of(resource).update(resource, observation)

    async def delete(self, resource: Resource[Any, Any]) -> Observation | None:
        """The kind's client's delete."""
        return await self._of(resource).delete(resource)

    def bind_store(self, identity: str, key: bytes = b"") -> None:
        """Passed on to every client that takes it (see :class:`StoreBound`)."""
        for client in self._per_kind_each:
            bind_store(client, identity, key)

    async def close(self) -> None:
        """Close every client (each once, all of them even when one fails: the first
        failure is raised after)."""
        failure: BaseException | None = None
        for client in self._per_kind_each:
            try:
                await client.close()
            except Exception as exc:  # noqa: BLE001 - the others are closed too, then it is raised
                failure = failure or exc
        if failure is not None:
            raise failure


def client_of(client: ExternalClient, kind: Kind) -> ExternalClient:
    """The client that serves ``kind``: a :class:`PerKind`'s client of the kind, or
    ``client`` itself (one client for every kind of its provider)."""
    if isinstance(client, PerKind):
        return client.client_for(kind.api_version, kind.kind)
    return client


class Adopting(Protocol):
    """An ExternalClient that can also take over an existing resource (optional)."""

    async def adopt(self, resource: Resource[Any, Any]) -> None:
        """Mark the existing external resource as ``resource``'s (idempotent); change
        nothing else: the next reconcile brings it to the spec."""


class StoreBound(Protocol):
    """An ExternalClient that writes the store's identity into its ownership marks
    (optional): ``bind_store`` is called once, right after ``connect``, by whatever
    connects it (the Runtime, ``reconcile plan``, ``reconcile orphans``). Stores that
    share one external system (two teams' stores on one DNS zone) can then tell their
    resources apart, and :class:`ListingOwned` can list this store's.

    ``key`` is the store's secret (made once with the store, kept only in it): a client
    that takes it signs its marks with it (an HMAC), so that a mark somebody else wrote
    or copied, knowing the identity (it is in every mark), is not taken for this
    store's. A client whose ``bind_store`` takes only ``identity`` (written before the
    key existed) is still called that way."""

    def bind_store(self, identity: str, key: bytes = b"") -> None:
        """Mark what is created from now on as made by the store ``identity`` (signed
        with ``key`` when given)."""


@attrs.frozen
class Owned:
    """An external resource marked as made by this store, found by
    :meth:`ListingOwned.list_owned`: the uid its mark names, a human-readable name of the
    resource (``www.example.test. A``), and what the provider needs to delete it."""

    uid: str
    external: str
    detail: Mapping[str, Any] = attrs.field(factory=dict)


@runtime_checkable
class ListingOwned(Protocol):
    """An ExternalClient that can list what this store made (optional), to find what no
    object declares any more (a store restored from an older backup, an object dropped
    by hand): ``reconcile orphans``."""

    async def list_owned(self, kind: Kind) -> Sequence[Owned]:
        """Every external resource of ``kind`` whose mark names this store (see
        :class:`StoreBound`); raise a ReconcileError saying why when it cannot list
        (a server that refuses the listing)."""

    async def delete_owned(self, kind: Kind, owned: Owned) -> None:
        """Delete ``owned`` if it still carries the same mark (never anything else)."""


def ours(resource: Resource[Any, Any], owner: str | None, identity: str | None = None) -> bool:
    """Whether an external resource carrying the owner mark ``owner`` (None: unmarked)
    and reporting ``identity`` is ``resource``'s: the one ownership rule, used by the
    engine and by providers that check before they write or delete.

    An identity other than the one the engine recorded at our last create or update
    (``reconcile.dev/external-identity``) proves the resource is not the one we made,
    whatever mark it carries (a bucket made again with our tags copied). Otherwise a
    marked resource is ours when the mark names ``resource``'s uid. An unmarked one is
    never ours by assumption (a re-created bucket or a re-put object loses every tag and
    metadata, so somebody else's replacement is unmarked too): only when it is provably
    the one our last write left, its ``identity`` equal to the one recorded. Anything
    else is NotOwned and needs ``reconcile adopt``.

    A provider reports an identity that survives the resource's own changes (a bucket's
    creation date) for every observation; one that every write changes (an object's
    ETag: drift of a marked object is still ours to repair) only for an unmarked
    resource, and in the answers of its own create and update, which the engine
    records."""
    recorded = resource.metadata.annotations.get(ANNOTATION_EXTERNAL_IDENTITY)
    if identity is not None and recorded is not None and identity != recorded:
        return False
    if owner is not None:
        return owner == resource.metadata.uid
    return identity is not None and identity == recorded


def bind_store(client: object, identity: str, key: bytes = b"") -> None:
    """Tell ``client`` the store's identity, and its secret ``key`` when the client's
    ``bind_store`` takes one, when it is :class:`StoreBound`."""
    bind = getattr(client, "bind_store", None)
    if not callable(bind):
        return
    if key and _takes_key(bind):
        bind(identity, key=key)
    else:
        bind(identity)


def _takes_key(bind: Callable[..., object]) -> bool:
    """Whether a ``bind_store`` takes the key (clients written before it take only the
    identity)."""
    try:
        parameters = inspect.signature(bind).parameters
    except (TypeError, ValueError):
        return False
    return "key" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


class Provider(Protocol):
    """A plugin: its name, its kinds, and how to connect.

    It may also have ``check_config(config) -> None`` (optional, found by name): raise
    :class:`~reconcile.errors.InvalidError` naming each bad key by field path, reading
    no secret and no network; the command line calls it on what ``-P`` and the
    environment set, before anything is opened."""

    @property
    def name(self) -> str:
        """A short name (``files``, ``s3``)."""

    @property
    def kinds(self) -> Sequence[Kind]:
        """The kinds it manages."""

    async def connect(self, config: Mapping[str, Any]) -> ExternalClient:
        """Open a client from the provider config (secrets come from the environment or
        files the config names, never from the event log): one for all the kinds, or a
        :class:`PerKind` of one client per kind."""
