"""The dns provider's ExternalClient: record sets observed by direct query, changed by
TSIG-signed UPDATE messages with RFC 2136 prerequisites, confirmed by query.

Ownership: a TXT record at ``<owner_prefix>.<name>`` (``_reconcile.www.example.test.``;
a delegation's beside its cut, ``sub._reconcile.example.test.``: see
:func:`reconcile_providers.dns.marks.mark_name_of`) holds one string per record set of ours there,
signed with the store's secret (:mod:`reconcile_providers.dns.marks`), the owner being the store's
identity (``bind_store``; or the config's ``owner_id``); it is written in the same
UPDATE as the records, so a record set is never ours without its mark, or the reverse. A
record set without a mark this store signed is never changed or deleted (NotOwned).
Which record set is whose is decided by the uid of the signed line;
:meth:`DnsClient.list_owned` finds this store's marks, by a TSIG-signed zone transfer,
for ``reconcile orphans``, and trusts only signed ones too. A record set inside the
ownership namespace is never created, changed or deleted (PermanentError): only the
client's own marks live there.

Delegations: an NS record set below the apex is a zone cut; its NS RRset is read from
the primary's referral, and anything else at or below a cut is occluded, never served:
observe fails naming the delegation (:class:`reconcile_providers.dns.wire.OccludedError`), and a
create's prerequisites require no NS at or above its name, so nothing is written there.

Concurrency: an update's prerequisites pin the RRset exactly as observed (a create's:
that there is none), and a delete's pin the ownership TXT RRset as read, so a change
somebody else made in between fails the message (YXRRSET/NXRRSET): a ConflictError,
requeued and observed afresh, never an overwrite.

Read back: after the server answers NOERROR, the RRset is queried; a zone that does not
hold the change (BIND ignores some updates that way, e.g. a CNAME beside other data) is a
PermanentError saying so. The answer of that query is the observation the engine records.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype

import reconcile
from reconcile.errors import (
    ConflictError,
    IncompleteListingError,
    NotOwnedError,
    PermanentError,
    ReconcileError,
    TransientError,
)
from reconcile_providers.dns.batching import Batcher, Change
from reconcile_providers.dns.config import DnsConfig, Server
from reconcile_providers.dns.health import Health, where
from reconcile_providers.dns.marks import (
    fields_of,
    mark_name_of,
    owner_in,
    signed_in_zone,
    signed_mark,
    stale_lines,
    subject_of,
    txt,
    verifies,
)
from reconcile_providers.dns.observing import found_texts, observation, wanted_records, wanted_texts
from reconcile_providers.dns.records import (
    absolute_name,
    inside_namespace,
    parse_record,
    possible_cuts,
    zone_name,
)
from reconcile_providers.dns.updates import Update
from reconcile_providers.dns.wire import (
    Answer,
    Connections,
    PrerequisiteFailedError,
    query,
    same_records,
    send_update,
    transfer,
)

__all__ = ["DnsClient"]


class DnsClient:
    """Record sets on the configured servers."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = DnsConfig.from_mapping(config)
        self._batchers: dict[str, Batcher] = {}
        #: Queries and updates on the wire at once (reconciles beyond wait their turn).
        self._wire = asyncio.Semaphore(self.config.max_connections)
        #: Which servers answer: one that stopped is noticed once, and backs off as one.
        self._connections = Connections(Health(self.config.timeout))
        #: Who "we" are in the marks: the config's owner_id, else the store's identity
        #: once bound (a client never bound, as in a bare test, says "reconcile").
        self.owner = self.config.owner_id or "reconcile"
        #: Whether the owner is known (configured, or the store bound): only then is a
        #: mark under another owner stale (a client nobody bound, as ``reconcile plan``
        #: without a store, must not report every mark as drift).
        self._knows_owner = self.config.owner_id is not None
        #: What marks are signed with: the store's secret once bound; until then one of
        #: this client's own (its marks are its own, no other's).
        self._key = secrets.token_bytes(32)
        #: Lines of a resource's mark other than its signed one (written under another
        #: owner_id, before marks were signed, or typed by somebody), by uid, as observe
        #: found them: the update that follows (the record set being ours) removes them.
        self._stale: dict[str, list[dns.rdata.Rdata]] = {}

    def bind_store(self, identity: str, key: bytes = b"") -> None:
        """Mark what is created from now on as the store ``identity``'s (unless the config
        names an ``owner_id``), signed with the store's secret ``key``: only marks signed
        with it are ours."""
        if self.config.owner_id is None and identity:
            self.owner = identity
            self._knows_owner = True
        if key:
            self._key = key

    # -- where things are -----------------------------------------------------------------

    def _server(self, zone: str) -> Server:
        server = self.config.server_of(zone)
        if server is None:
            served = sorted(z for s in self.config.servers for z in s.zones)
            msg = f"no server in the dns provider config serves zone {zone} (configured: {served})"
            raise PermanentError(msg)
        return server

    def _owner_name(self, resource: reconcile.Resource[Any, Any]) -> dns.name.Name:
        spec = resource.spec
        return mark_name_of(self.config.owner_prefix, spec.zone, spec.name, spec.type)

    def _mark(self, resource: reconcile.Resource[Any, Any]) -> dns.rdata.Rdata:
        return txt(self._mark_text(resource))

    def _mark_text(self, resource: reconcile.Resource[Any, Any]) -> str:
        spec = resource.spec
        subject = subject_of(spec.zone, spec.name)
        return signed_mark(self._key, self.owner, subject, spec.type, str(resource.metadata.uid))

    def _outside_namespace(self, resource: reconcile.Resource[Any, Any]) -> None:
        """PermanentError for a record set inside the ownership namespace: writing there
        could forge a mark, or delete the marks of others at the name (admission refuses
        such a name; this holds for objects stored before it did, or under another
        prefix)."""
        spec, prefix = resource.spec, self.config.owner_prefix
        if inside_namespace(prefix, absolute_name(spec.zone, spec.name)):
            msg = (
                f"{spec.name} {spec.type} in {spec.zone} is inside the ownership namespace ({prefix}): "
                "reconcile never writes there except its own marks (to let the object go, set "
                "reconcile.dev/deletion-policy: Orphan)"
            )
            raise PermanentError(msg)

    def _batcher(self, zone: str) -> Batcher:
        batcher = self._batchers.get(zone)
        if batcher is None:
            server = self._server(zone)
            key = self.config.keys.get(zone)
            if key is None:
                msg = f"the dns provider config has no TSIG key for zone {zone} (dns.zones[{zone!r}])"
                raise PermanentError(msg)
            tsig, origin = key.key(), zone_name(zone)

            async def send(message: Update) -> None:
                await self._enter_wire(server)
                try:
                    await send_update(
                        self._connections, server, message, zone, tsig, seconds=self.config.timeout
                    )
                finally:
                    self._wire.release()

            batcher = Batcher(
                lambda: Update(origin),
                send,
                window=self.config.batch_window,
                size=self.config.batch_max,
                # The message ahead of a change, and its own: no change waits longer in a
                # queue behind others (a server that stopped answering is known by then).
                deadline=2 * self.config.timeout,
                name=f"zone {zone} at DNS server {where(server)}",
            )
            self._batchers[zone] = batcher
        return batcher

    # -- the four calls --------------------------------------------------------------------

    async def observe(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """Two direct queries: the RRset, and the ownership TXT at its prefixed name."""
        spec = resource.spec
        name = absolute_name(spec.zone, spec.name)
        answer = await self._query(spec.zone, name, spec.type)
        marks = await self._query(spec.zone, self._owner_name(resource), "TXT")
        owner = self._owner_in(resource, marks)
        stale = self._stale_marks(resource, marks) if self._knows_owner else []
        if stale:
            self._stale[str(resource.metadata.uid)] = stale
        else:
            self._stale.pop(str(resource.metadata.uid), None)
        return observation(resource, answer, owner, key=self._key, store_owner=self.owner, stale=stale)

    async def create(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Created:
        """Add the records and our mark in one UPDATE whose prerequisites are that the
        RRset does not exist, that the CNAME rule holds (a CNAME needs its name free of
        other data; other data needs it free of a CNAME), and that no delegation occludes
        the name (no NS at it or above it, below the apex). When the RRset exists: ours
        (an interrupted create) is brought to the spec; anybody else's is NotOwned,
        untouched. When the CNAME rule fails, a PermanentError says which way; under a
        delegation, the OccludedError of the observe that follows says where."""
        self._outside_namespace(resource)
        spec = resource.spec
        name = absolute_name(spec.zone, spec.name)
        wanted = wanted_records(resource)
        owner_name, mark = self._owner_name(resource), self._mark(resource)
        cuts = possible_cuts(spec.zone, spec.name, spec.type)

        def change(message: Update) -> None:
            if spec.type == "CNAME":
                message.absent(name)  # the name holds nothing at all
            else:
                message.absent(name, spec.type)
                message.absent(name, "CNAME")
            # Records written under a delegation would be served by nobody, and neither
            # could their mark be read (to observe or delete them): none are written.
            for cut in cuts:
                message.absent(cut, "NS")
            message.add(name, spec.ttl, *wanted)
            message.add(owner_name, spec.ttl, mark)

        try:
            await self._batcher(spec.zone).submit(change)
        except PrerequisiteFailedError:
            found = await self.observe(resource)
            if found.exists and found.owner != resource.metadata.uid:
                whose = f"owned by {found.owner}" if found.owner else "not marked by reconcile"
                msg = f"{name} {spec.type} exists already ({whose}); it is left alone"
                raise NotOwnedError(msg) from None
            if not found.exists:
                await self._cname_rule(resource, name)
            return reconcile.Created(observation=await self.update(resource, found))
        return reconcile.Created(observation=await self._read_back(resource))

    async def _cname_rule(self, resource: reconcile.Resource[Any, Any], name: dns.name.Name) -> None:
        """PermanentError when the create failed on the CNAME rule rather than on an RRset
        of its own type (RFC 1034: a CNAME is alone at its name)."""
        spec = resource.spec
        if spec.type != "CNAME":
            if await self._query(spec.zone, name, "CNAME") is not None:
                msg = f"{name} holds a CNAME: a {spec.type} record set cannot share its name (RFC 1034)"
                raise PermanentError(msg)
            return
        msg = f"{name} holds other records: a CNAME cannot share its name with other data (RFC 1034)"
        raise PermanentError(msg)

    async def update(
        self, resource: reconcile.Resource[Any, Any], observation: reconcile.Observation
    ) -> reconcile.Observation:
        """Replace the RRset, the prerequisite pinning it as observed; our mark is added
        in the same message (a no-op when it is there)."""
        self._outside_namespace(resource)
        spec = resource.spec
        name = absolute_name(spec.zone, spec.name)
        wanted = wanted_records(resource)
        owner_name, mark = self._owner_name(resource), self._mark(resource)
        seen = [parse_record(spec.type, text, spec.zone) for text in observation.observed.get("records", ())]
        stale = self._stale.pop(str(resource.metadata.uid), [])

        def change(message: Update) -> None:
            if seen:
                message.present(name, *seen)
            else:
                message.absent(name, spec.type)
            message.replace(name, spec.ttl, *wanted)
            message.add(owner_name, spec.ttl, mark)
            for old in stale:
                message.delete(owner_name, old)

        await self._submit(resource, change)
        return await self._read_back(resource)

    async def delete(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """Delete the RRset and our mark, the prerequisite pinning the ownership TXT RRset
        as it was just read (and holding our mark): a record set that is not ours, or was
        taken over meanwhile, is never deleted."""
        self._outside_namespace(resource)
        spec = resource.spec
        server = self._server(spec.zone)
        name = absolute_name(spec.zone, spec.name)
        owner_name, mark = self._owner_name(resource), self._mark(resource)
        marks = await self._query(spec.zone, owner_name, "TXT")
        if self._owner_in(resource, marks) != resource.metadata.uid:
            answer = await self._query(spec.zone, name, spec.type)
            if answer is None:
                return reconcile.Observation(exists=False)
            msg = f"{name} {spec.type} is not marked as this resource's; it is left alone"
            raise NotOwnedError(msg)
        assert marks is not None  # (it holds our mark)
        # Every line of the mark for this record set goes: ours, and any written under
        # another owner for the same uid (an older mark not rewritten yet).
        lines = [mark, *self._stale_marks(resource, marks)]

        def change(message: Update) -> None:
            message.present(owner_name, *marks.rdatas)
            message.delete(name, spec.type)
            for line in lines:
                message.delete(owner_name, line)

        await self._submit(resource, change)
        if await self._query(spec.zone, name, spec.type) is not None:
            msg = (
                f"DNS server {server.address}:{server.port} answered NOERROR to the delete of {name} "
                f"{spec.type}, but the zone still holds it: check the zone's update-policy"
            )
            raise PermanentError(msg)
        return reconcile.Observation(exists=False)

    async def adopt(self, resource: reconcile.Resource[Any, Any]) -> None:
        """Take over existing records (``reconcile.dev/adopt``): add our mark beside them,
        change nothing else (the next reconcile brings them to the spec)."""
        self._outside_namespace(resource)
        spec = resource.spec
        owner_name, mark = self._owner_name(resource), self._mark(resource)

        def change(message: Update) -> None:
            message.add(owner_name, spec.ttl, mark)

        await self._submit(resource, change)

    # -- what this store owns ----------------------------------------------------------------

    async def list_owned(self, kind: reconcile.Kind) -> list[reconcile.Owned]:
        """Every record set whose mark this store signed, in every zone of the config that
        has a key, read by a TSIG-signed AXFR: the only zone transfer the provider makes
        (observing is by query). A mark that names this store but was not signed with its
        secret (typed or copied by somebody else, or written before marks were signed) is
        not listed. Zones that cannot be transferred (a server refusing, or not
        answering) are named in an IncompleteListingError that carries what the other
        zones hold."""
        if kind.kind != "RecordSet":
            return []
        owned: list[reconcile.Owned] = []
        problems: list[str] = []
        for zone in sorted(self.config.keys):
            try:
                server = self._server(zone)
                copy = await transfer(server, zone, self.config.keys[zone].key(), self.config.timeout)
            except ReconcileError as exc:
                problems.append(str(exc))
                continue
            for target, fields, text in signed_in_zone(self._key, copy, zone, self.config.owner_prefix):
                rtype, uid = fields.get("type", ""), fields.get("uid", "")
                detail = {"zone": zone, "name": target.to_text(), "type": rtype, "mark": text}
                owned.append(reconcile.Owned(uid, f"{target.to_text()} {rtype}", detail))
        if problems:
            raise IncompleteListingError("; ".join(problems), owned)
        return owned

    async def delete_owned(self, kind: reconcile.Kind, owned: reconcile.Owned) -> None:  # noqa: ARG002
        """Delete the record set and its mark in one UPDATE whose prerequisite is the mark
        as listed: a mark changed or taken over since is a ConflictError, and nothing
        is deleted; a mark this store did not sign (whoever made up ``owned``) is
        NotOwned, and nothing is sent."""
        detail = owned.detail
        zone, absolute = str(detail["zone"]), str(detail["name"])
        name = absolute_name(zone, absolute)
        fields = fields_of(str(detail["mark"]))
        if (
            not verifies(self._key, fields, subject_of(zone, absolute))
            or fields.get("type") != detail["type"]
        ):
            msg = f"{owned.external}: its ownership mark is not signed by this store; it is left alone"
            raise NotOwnedError(msg)
        if inside_namespace(self.config.owner_prefix, name):
            msg = f"{owned.external} is inside the ownership namespace ({self.config.owner_prefix})"
            raise PermanentError(msg)
        owner_name = mark_name_of(self.config.owner_prefix, zone, absolute, str(detail["type"]))
        mark = txt(str(detail["mark"]))

        def change(message: Update) -> None:
            message.present(owner_name, mark)
            message.delete(name, str(detail["type"]))
            message.delete(owner_name, mark)

        try:
            await self._batcher(str(detail["zone"])).submit(change)
        except PrerequisiteFailedError:
            msg = f"{owned.external}: its ownership mark changed since it was listed; it is left alone"
            raise ConflictError(msg) from None

    async def close(self) -> None:
        """Send what is pending."""
        for batcher in self._batchers.values():
            await batcher.close()
        await self._connections.close()

    # -- helpers ---------------------------------------------------------------------------

    async def _query(self, zone: str, name: dns.name.Name, rdtype: str) -> Answer | None:
        """The RRset ``name``/``rdtype`` of ``zone`` as its server holds it (a delegation's
        NS read from the referral; anything else below a delegation, OccludedError: see
        :func:`reconcile_providers.dns.wire.query`)."""
        server = self._server(zone)
        await self._enter_wire(server)
        try:
            return await query(
                self._connections, server, name, rdtype, self.config.timeout, zone=zone_name(zone)
            )
        finally:
            self._wire.release()

    async def _enter_wire(self, server: Server) -> None:
        """Take one of the ``max_connections`` places on the wire (give it back with
        ``self._wire.release()``), waited for at most ``timeout`` (a TransientError
        saying so); an exchange with a server known to have stopped answering fails at
        once, before waiting (see :mod:`reconcile_providers.dns.health`)."""
        self._connections.health.refuse_if_down(server)
        if not self._wire.locked():
            await self._wire.acquire()  # (free: no wait to bound, no timer to set)
            return
        seconds = self.config.timeout
        try:
            async with asyncio.timeout(seconds):
                await self._wire.acquire()
        except TimeoutError:
            self._connections.health.refuse_if_down(server)  # (why nothing was answered)
            msg = (
                f"no place on the wire for DNS server {where(server)} within {seconds:g} s "
                f"({self.config.max_connections} exchanges in flight, none answered meanwhile)"
            )
            raise TransientError(msg) from None

    def statistics(self) -> dict[str, int]:
        """UPDATE messages sent and changes carried, over all zones; servers down now, and
        exchanges refused at once because theirs was."""
        return {
            "messages": sum(b.messages for b in self._batchers.values()),
            "changes": sum(b.changes for b in self._batchers.values()),
            **self._connections.health.statistics(),
        }

    async def _submit(self, resource: reconcile.Resource[Any, Any], change: Change) -> None:
        try:
            await self._batcher(resource.spec.zone).submit(change)
        except PrerequisiteFailedError as exc:
            spec = resource.spec
            msg = (
                f"{spec.name} {spec.type} in {spec.zone} changed since it was observed ({exc.rcode}): "
                "observing again"
            )
            raise ConflictError(msg) from exc

    def _owner_in(self, resource: reconcile.Resource[Any, Any], marks: Answer | None) -> str | None:
        """Whose the record set is by its mark (see :func:`reconcile_providers.dns.marks.owner_in`)."""
        if marks is None:
            return None
        spec = resource.spec
        subject, uid = subject_of(spec.zone, spec.name), str(resource.metadata.uid)
        return owner_in(self._key, self._mark_text(resource), subject, spec.type, uid, lines=marks.rdatas)

    def _stale_marks(
        self, resource: reconcile.Resource[Any, Any], marks: Answer | None
    ) -> list[dns.rdata.Rdata]:
        """The lines of the mark naming this resource's uid and type, but not its signed line."""
        if marks is None:
            return []
        current, uid = self._mark_text(resource), str(resource.metadata.uid)
        return stale_lines(current, resource.spec.type, uid, marks.rdatas)

    async def _read_back(self, resource: reconcile.Resource[Any, Any]) -> reconcile.Observation:
        """Query what was just written; NOERROR without the change is a PermanentError."""
        spec = resource.spec
        server = self._server(spec.zone)
        name = absolute_name(spec.zone, spec.name)
        answer = await self._query(spec.zone, name, spec.type)
        # The records as observe reports them, compared first: equal texts are the same
        # records (different ones may still be, a name's case spelled otherwise).
        found = [] if answer is None else found_texts(resource, answer)
        if (
            answer is None
            or answer.ttl != spec.ttl
            or (
                found != wanted_texts(resource)
                and not same_records(answer, wanted_records(resource), spec.ttl)
            )
        ):
            msg = (
                f"DNS server {server.address}:{server.port} answered NOERROR, but the zone does not hold "
                f"{name} {spec.type} as sent (a CNAME cannot share its name with other data, and a server "
                "may ignore what its update-policy does not grant): check the zone"
            )
            raise PermanentError(msg)
        return observation(
            resource, answer, resource.metadata.uid, key=self._key, store_owner=self.owner, found=found
        )
