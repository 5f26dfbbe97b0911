"""Throwaway PostgreSQL clusters a test starts, stops and restarts itself (the shared
server on 5432 is never restarted): ``initdb`` into a temporary folder owned by the
postgres user (initdb refuses root), ``pg_ctl`` on a free loopback port. And a small
TCP proxy in front of a server, which cuts connections when told, one of them exactly
between a ``COMMIT`` reaching the server and its answer reaching the client.

Without the PostgreSQL binaries, runuser or root, the tests that need a cluster are
skipped loudly (failed under ``CI=true``: :func:`servers.unavailable`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from servers import free_port, unavailable

RUNUSER = shutil.which("runuser")


def _bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (None: not installed)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[4]))
    return found[-1].parent if found else None


class Cluster:
    """A cluster of its own in a temporary folder: :meth:`start`, :meth:`stop`,
    :meth:`restart`; ``url`` names its ``postgres`` database."""

    def __init__(self, needed_by: str, *, auth: str = "trust", password: str | None = None) -> None:
        binaries = _bin()
        if binaries is None or RUNUSER is None or os.geteuid() != 0:
            unavailable(
                "a throwaway PostgreSQL cluster", needed_by, "needs initdb, pg_ctl and runuser as root"
            )
        self.bin = binaries
        self.needed_by = needed_by
        self.folder = Path(tempfile.mkdtemp(prefix="reconcile-pg-"))
        shutil.chown(self.folder, "postgres", "postgres")
        self.data = self.folder / "data"
        self.port = free_port()
        secret = f":{password}" if password else ""
        self.url = f"postgresql://postgres{secret}@127.0.0.1:{self.port}/postgres"
        command = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", auth]
        if password:
            file = self.folder / "password"
            file.write_text(f"{password}\n")
            shutil.chown(file, "postgres", "postgres")
            command.append(f"--pwfile={file}")
        try:
            self._as_postgres(*command)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            self.remove()
            unavailable("a throwaway PostgreSQL cluster", needed_by, str(exc))

    def _as_postgres(self, *command: str) -> None:
        assert RUNUSER is not None
        subprocess.run(
            [RUNUSER, "-u", "postgres", "--", *command], check=True, capture_output=True, timeout=120
        )

    def start(self) -> None:
        """Start it and wait until it takes connections (``pg_ctl -w``)."""
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        log = str(self.folder / "log")
        try:
            self._as_postgres(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-w", "-l", log, "start"
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            unavailable("a throwaway PostgreSQL cluster", self.needed_by, str(exc))

    def stop(self, mode: str = "fast") -> None:
        """Stop it: ``fast`` ends every session (rolled back) and shuts down cleanly,
        ``immediate`` is a crash (recovery on the next start)."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop it and start it again on the same port."""
        self.stop(mode)
        self.start()

    def remove(self) -> None:
        """Stop it (if it runs) and delete its folder."""
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def cluster(needed_by: str, *, auth: str = "trust", password: str | None = None) -> Iterator[Cluster]:
    """A started cluster, removed on the way out."""
    made = Cluster(needed_by, auth=auth, password=password)
    try:
        made.start()
        yield made
    finally:
        made.remove()


#: A simple-query message that is a COMMIT, not a statement naming READ COMMITTED.
_COMMIT = re.compile(rb"Q[\x00-\xff]{4}COMMIT;?\x00")


class Proxy:
    """A TCP proxy on a free loopback port in front of ``port``, in the running loop.

    :meth:`cut` closes every connection through it now (both ends: the server sees its
    client gone). :meth:`cut_at_commit` arms it to cut the next ``COMMIT`` of a store's
    writer connection (one that reserved revisions): after the server got it
    (``after=True``: it commits, and its answer is lost) or before (it never gets it).
    ``cuts`` counts the cuts made."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.port = 0
        self.cuts = 0
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._at_commit: bool | None = None
        self.commit_cut = asyncio.Event()
        #: While set, a new connection is closed at once (a server out of reach).
        self.refusing = False
        self._hold = False
        #: Server ends of connections cut on the client's side only (see :meth:`release`).
        self.held: list[asyncio.StreamWriter] = []

    async def start(self) -> Proxy:
        """Listen."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def close(self) -> None:
        """Stop listening and cut everything."""
        if self._server is not None:
            self._server.close()
        self.cut()
        self.release()
        if self._server is not None:
            await self._server.wait_closed()

    def url(self, server_url: str) -> str:
        """``server_url`` with its port replaced by the proxy's."""
        return server_url.replace(f":{self.target}/", f":{self.port}/")

    def cut(self) -> None:
        """Close every connection through the proxy now."""
        for link in list(self._links):
            self._drop(link)

    def cut_at_commit(self, *, after: bool, hold: bool = False) -> None:
        """Cut the next connection that sends COMMIT (see the class); with ``hold``
        (before the server got it), its server end stays open, silent, as a network
        that drops packets leaves it: the server's transaction stays open until
        :meth:`release`."""
        self.commit_cut.clear()
        self._at_commit = after
        self._hold = hold

    def release(self) -> None:
        """Close the server ends held open (their transactions roll back)."""
        for writer in self.held:
            writer.transport.abort()
        self.held.clear()

    def _drop(self, link: tuple[asyncio.StreamWriter, asyncio.StreamWriter], *, cut: bool = True) -> None:
        if link in self._links:
            self._links.discard(link)
            self.cuts += cut
        for writer in link:
            with contextlib.suppress(Exception):
                writer.transport.abort()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        if self.refusing:
            client_out.transport.abort()
            return
        try:
            server_in, server_out = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_out.transport.abort()
            return
        link = (client_out, server_out)
        self._links.add(link)
        writer = False  # a store's writer connection: it reserved revisions
        doomed = asyncio.Event()  # the server got a COMMIT: its answer is not passed on

        async def upstream() -> None:
            nonlocal writer
            while data := await client_in.read(65536):
                writer = writer or b"reconcile_reserve" in data
                if writer and self._at_commit is not None and _COMMIT.search(data):
                    after, self._at_commit = self._at_commit, None
                    if not after:
                        if self._hold:
                            self.held.append(server_out)
                            self._links.discard(link)
                            self.cuts += 1
                            client_out.transport.abort()
                            self.commit_cut.set()
                            await asyncio.Event().wait()  # the server's end: silent, open
                        self._drop(link)
                        self.commit_cut.set()
                        return
                    doomed.set()
                server_out.write(data)
                await server_out.drain()

        async def downstream() -> None:
            while data := await server_in.read(65536):
                if doomed.is_set():
                    self._drop(link)
                    self.commit_cut.set()
                    return
                client_out.write(data)
                await client_out.drain()

        # Either end closing closes the other (a client's Terminate: the server hangs up).
        pumps = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        self._drop(link, cut=False)
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


async def in_thread(call: object) -> None:
    """Run a blocking call (pg_ctl) without stopping the loop the store runs on."""
    assert callable(call)
    await asyncio.get_running_loop().run_in_executor(None, call)
