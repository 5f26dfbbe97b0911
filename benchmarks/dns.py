"""The dns provider against BIND9 (named on a free loopback port, TSIG, update-policy),
beside plain dnspython code making the same changes in UPDATE messages batched the same
way (100 changes a message at most) and the same read queries, with the same concurrency
(the limit careful hand-written code sets). A second reading, "lean", runs the same plain
program with the provider's own wire code (queries built and read from the wire, UPDATE
messages written as bytes, plain asyncio streams) instead of dnspython's calls: the
provider talks more cheaply than the plain program, and against "lean" what is left is
the engine's own cost.

Phases, on N A record sets in one zone:

1. converge from nothing: the engine creates each (one change: prerequisites "absent",
   "no CNAME at the name" and "no delegation there", the records and the ownership mark)
   and reads it back (one query); the plain program sends the same change, and parses its
   names in this phase;
2. no change: a resync; each record set is observed (two queries: the RRset and the
   ownership TXT), no UPDATE;
3. repair: 10% changed by hand, then a resync: two queries each, and for the changed ones
   a change (the RRset replaced) and a read back;
4. delete: each record set's ownership TXT read, a change (RRset and mark deleted), and
   a read back.

The three programs take turns, ``--rounds`` times (3 by default), each round from an
empty zone; each phase's best time of each side is compared (and every run's time is in
the JSON): on a shared VM a sub-second phase moves by a third with whatever else runs,
and taking turns gives both sides the same chances.

    python benchmarks/dns.py [--size N] [--workers W] [--rounds R] [--json PATH]
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# This file is dns.py: its own folder off the path, or ``import dns`` would find it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import dns.asyncbackend  # noqa: E402
import dns.asyncquery  # noqa: E402
import dns.flags  # noqa: E402
import dns.message  # noqa: E402
import dns.name  # noqa: E402
import dns.rdata  # noqa: E402
import dns.rdataclass  # noqa: E402
import dns.tsig  # noqa: E402
import dns.update  # noqa: E402
from dns_server import KEY_NAME, ZONE, Bind, bind_server  # noqa: E402

from benchmarks.phases import arguments, best_of, report  # noqa: E402
from reconcile import Runtime  # noqa: E402
from reconcile.controller import Priority  # noqa: E402
from reconcile_providers.dns import DnsProvider  # noqa: E402
from reconcile_providers.dns.client import DnsClient  # noqa: E402
from reconcile_providers.dns.config import Server  # noqa: E402
from reconcile_providers.dns.streams import Connections  # noqa: E402
from reconcile_providers.dns.updates import Update  # noqa: E402
from reconcile_providers.dns.wire import Answer, query, send_update  # noqa: E402

BATCH = 100
#: The plain program's owner in its marks: as long as a store's identity.
OWNER = "0123456789abcdef"
MAC = "0123456789abcdef" * 2


class Counted(DnsClient):
    """The provider's client, its queries counted."""

    clients: list[Counted] = []  # noqa: RUF012 - the benchmark's own registry
    queries = 0

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        Counted.clients.append(self)

    async def _query(self, *args: Any, **kwargs: Any) -> Any:
        Counted.queries += 1
        return await super()._query(*args, **kwargs)


class CountingProvider(DnsProvider):
    """The dns provider with a counted client."""

    async def connect(self, config: Mapping[str, Any]) -> Any:
        """A counted client."""
        return Counted(config)


def _taken() -> dict[str, int]:
    messages = sum(c.statistics()["messages"] for c in Counted.clients)
    changes = sum(c.statistics()["changes"] for c in Counted.clients)
    return {"queries": Counted.queries, "updates": messages, "changes": changes}


def _since(before: Mapping[str, int]) -> dict[str, int]:
    now = _taken()
    return {k: now[k] - before.get(k, 0) for k in now}


def manifest(index: int, address: str = "192.0.2.1") -> dict[str, Any]:
    """Record set ``index``."""
    return {
        "apiVersion": "dns.reconcile.dev/v1",
        "kind": "RecordSet",
        "metadata": {"name": f"e{index:05d}"},
        "spec": {"zone": ZONE, "name": f"e{index:05d}", "type": "A", "records": [address]},
    }


async def ours(bind: Bind, size: int, workers: int, db: Path) -> dict[str, Any]:
    """The engine: converge, resync, repair, delete."""
    runtime = Runtime(
        db,
        providers=[CountingProvider()],
        provider_config={"dns": bind.config()},
        workers=workers,
        resync_period=None,
        poll_interval=3600,
    )
    result: dict[str, Any] = {}
    async with runtime:
        await runtime.wait_synced()
        controller = runtime.controllers["recordset.dns.reconcile.dev"]

        async def resync() -> None:
            controller.enqueue_many(controller.informer.cached_keys(), Priority.RESYNC)
            await runtime.wait_converged(timeout=600)

        before, started = _taken(), time.perf_counter()
        await runtime.apply_many([manifest(i) for i in range(size)])
        state = await runtime.wait_converged(timeout=600)
        assert state.converged, state.waiting[:3]
        result["converge_s"], result["converge_calls"] = time.perf_counter() - started, _since(before)
        before, started = _taken(), time.perf_counter()
        await resync()
        result["noop_s"], result["noop_calls"] = time.perf_counter() - started, _since(before)
        await _tamper(bind, "e", size)
        before, started = _taken(), time.perf_counter()
        await resync()
        result["repair_s"], result["repair_calls"] = time.perf_counter() - started, _since(before)
        before, started = _taken(), time.perf_counter()
        names = [obj.metadata.name for obj in controller.informer.list()]
        await asyncio.gather(*(runtime.delete("recordset", name) for name in names))
        while controller.informer.cached_keys():  # the harness polling its own cache
            await asyncio.sleep(0.01)
        result["delete_s"], result["delete_calls"] = time.perf_counter() - started, _since(before)
    return result


async def _tamper(bind: Bind, prefix: str, size: int) -> None:
    """Change 10% of the record sets by hand."""
    key = dns.tsig.Key(KEY_NAME, bind.secret, dns.tsig.HMAC_SHA256)
    message = dns.update.UpdateMessage(ZONE)
    message.use_tsig(key)
    for index in range(0, size, 10):
        message.replace(f"{prefix}{index:05d}.{ZONE}", 300, "A", "198.51.100.1")
    await dns.asyncquery.tcp(message, bind.address, port=bind.port, timeout=10)


async def plain(bind: Bind, size: int, workers: int, *, lean: bool = False) -> dict[str, Any]:  # noqa: PLR0915 - one script, four phases
    """The limit: the same UPDATE changes, batched by 100, and the same queries, with
    dnspython's own calls; ``lean``: with the provider's wire code instead, which is what
    is left of the gap when both sides talk the same way (the engine's own cost)."""
    key = dns.tsig.Key(KEY_NAME, bind.secret, dns.tsig.HMAC_SHA256)
    origin = dns.name.from_text(ZONE)
    # Parsed in the converge phase, as the engine parses its record sets' names there (and
    # keeps them for the later phases, as the engine's cache of names does).
    names: list[dns.name.Name] = []
    marks: list[dns.name.Name] = []
    counts = {"queries": 0, "updates": 0, "changes": 0}
    # ``workers`` TCP connections, each used for one message at a time, kept open (as the
    # provider's are): the concurrency both sides have.
    backend: Any = dns.asyncbackend.get_backend("asyncio")
    sockets: asyncio.Queue[Any] = asyncio.Queue()
    for _ in range(0 if lean else workers):
        sockets.put_nowait(
            await backend.make_socket(
                socket.AF_INET, socket.SOCK_STREAM, 0, None, (bind.address, bind.port), 10
            )
        )
    # The lean reading: the provider's own wire code (queries built and read from the wire,
    # updates written as bytes, plain asyncio streams), at the same concurrency.
    connections, slots = Connections(), asyncio.Semaphore(workers)
    server = Server(bind.address, bind.port, (ZONE,))

    async def exchange(message: dns.message.Message) -> Any:
        sock = await sockets.get()
        try:
            return await dns.asyncquery.tcp(message, bind.address, port=bind.port, timeout=10, sock=sock)
        finally:
            sockets.put_nowait(sock)

    async def ask(name: dns.name.Name, rdtype: str) -> Any:
        counts["queries"] += 1
        if lean:
            async with slots:
                return await query(connections, server, name, rdtype, 10)
        request = dns.message.make_query(name, rdtype)
        request.flags &= ~dns.flags.RD
        return await exchange(request)

    async def send(indexes: list[int], edit: Callable[[Any, int], None]) -> None:
        counts["updates"] += 1
        counts["changes"] += len(indexes)
        if lean:
            update = Update(origin)
            for index in indexes:
                edit(update, index)
            async with slots:
                await send_update(connections, server, update, ZONE, key, seconds=10)
            return
        message = dns.update.UpdateMessage(ZONE)
        message.use_tsig(key)
        for index in indexes:
            edit(message, index)
        response = await exchange(message)
        assert response.rcode() == 0, response

    async def batched(indexes: list[int], edit: Callable[[Any, int], None]) -> None:
        chunks = [indexes[i : i + BATCH] for i in range(0, len(indexes), BATCH)]
        await asyncio.gather(*(send(chunk, edit) for chunk in chunks))

    def record(rdtype: str, text: str) -> dns.rdata.Rdata:
        # What ``UpdateMessage.add(name, ttl, "A", text)`` parses; parsed here for both
        # readings (dnspython's message and the provider's ``Update`` take the record).
        return dns.rdata.from_text(dns.rdataclass.IN, rdtype, text, origin)

    # Each edit takes dnspython's UpdateMessage (plain) or the provider's Update (lean).
    def create(message: Any, index: int) -> None:
        # The engine's change exactly: the RRset absent, no CNAME at the name (the CNAME
        # rule) and no delegation there (NS), the records, and a mark as long as the
        # engine's (a 16-digit store identity, a uid in the form of a UUID, a MAC of 32 hex
        # digits).
        message.absent(names[index], "A")
        message.absent(names[index], "CNAME")
        message.absent(names[index], "NS")
        message.add(names[index], 300, record("A", "192.0.2.1"))
        uid = uuid.UUID(int=index)
        mark = f"heritage=reconcile,owner={OWNER},type=A,uid={uid},mac={MAC}"
        message.add(marks[index], 300, record("TXT", f'"{mark}"'))

    def repair(message: Any, index: int) -> None:
        message.replace(names[index], 300, record("A", "192.0.2.1"))

    def delete(message: Any, index: int) -> None:
        message.delete(names[index], "A")
        message.delete(marks[index], "TXT")

    async def each(job: Callable[[int], Awaitable[Any]], indexes: list[int]) -> list[Any]:
        return await asyncio.gather(*(job(i) for i in indexes))

    everything = list(range(size))
    result: dict[str, Any] = {}

    async def phase(name: str, work: Callable[[], Awaitable[None]]) -> None:
        before, started = dict(counts), time.perf_counter()
        await work()
        result[f"{name}_s"] = time.perf_counter() - started
        result[f"{name}_calls"] = {k: counts[k] - before[k] for k in counts}

    async def converge() -> None:
        names.extend(dns.name.from_text(f"p{i:05d}", origin=origin) for i in range(size))
        marks.extend(dns.name.Name((b"_reconcile", *name.labels)) for name in names)
        await batched(everything, create)
        await each(lambda i: ask(names[i], "A"), everything)

    async def look() -> list[int]:
        answers = await each(lambda i: ask(names[i], "A"), everything)
        await each(lambda i: ask(marks[i], "TXT"), everything)
        return [i for i, a in zip(everything, answers, strict=True) if "198.51.100.1" in str(_records(a))]

    async def noop() -> None:
        await look()

    async def repaired() -> None:
        changed = await look()
        await batched(changed, repair)
        await each(lambda i: ask(names[i], "A"), changed)

    async def deleted() -> None:
        await each(lambda i: ask(marks[i], "TXT"), everything)
        await batched(everything, delete)
        await each(lambda i: ask(names[i], "A"), everything)

    await phase("converge", converge)
    await phase("noop", noop)
    await _tamper(bind, "p", size)
    await phase("repair", repaired)
    await phase("delete", deleted)
    while not sockets.empty():
        await sockets.get_nowait().close()
    await connections.close()
    return result


def _records(answer: Any) -> Any:
    """The records of an answer, from either reading (a dnspython message, or the
    provider's Answer)."""
    return answer.rdatas if isinstance(answer, Answer) else answer.answer


def main() -> None:
    """Run both, print the table, write the JSON."""
    args = arguments(__doc__, 1000, "record sets", rounds=3)
    phases = ("converge", "noop", "repair", "delete")
    limits: list[dict[str, Any]] = []
    leans: list[dict[str, Any]] = []
    engines: list[dict[str, Any]] = []
    with bind_server() as bind, tempfile.TemporaryDirectory() as folder:
        os.environ["TSIG_SECRET"] = bind.secret
        # The three take turns, each round from an empty zone (each deletes what it made).
        for round_ in range(args.rounds):
            limits.append(asyncio.run(plain(bind, args.size, args.workers)))
            leans.append(asyncio.run(plain(bind, args.size, args.workers, lean=True)))
            db = Path(folder) / f"state{round_}.db"
            engines.append(asyncio.run(ours(bind, args.size, args.workers, db)))
    report(
        "dns",
        best_of(limits, phases),
        best_of(engines, phases),
        phases,
        others={"lean": best_of(leans, phases)},
        columns=("plain q/upd", "our q/upd", "our changes"),
        cells=lambda row: (
            f"{row['plain_calls']['queries']}/{row['plain_calls']['updates']}",
            f"{row['our_calls']['queries']}/{row['our_calls']['updates']}",
            f"{row['our_calls']['changes']}",
        ),
        settings={"size": args.size, "workers": args.workers, "rounds": args.rounds},
        json_path=args.json,
    )


if __name__ == "__main__":
    main()
