"""What the multi-process benchmarks share (``sharding.py``, ``scaleout.py``, and
``reconcile.py --db``): a PostgreSQL database of their own on the server a URL names
(created, then dropped with its connections), the environment of the ``reconcile``
subprocesses, ``reconcile run --sharding`` processes and the CPU time they spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
#: The databases :func:`database` made in this process (each dropped at its block's end):
#: what a benchmark's JSON names, so a test can check none is left.
MADE: list[str] = []
#: Clock ticks per second of /proc's CPU times.
TICKS = os.sysconf("SC_CLK_TCK")


def env(*paths: Path) -> dict[str, str]:
    """The environment of a ``reconcile`` subprocess: this checkout (and ``paths``) first
    on its ``PYTHONPATH``."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "providers"), *map(str, paths)]),
    }


async def execute(url: str, *statements: str) -> None:
    """Run ``statements`` on the database ``url`` names."""
    connection = await asyncpg.connect(url, timeout=10)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def with_database(url: str, name: str) -> str:
    """``url`` naming the database ``name`` instead (its user, host and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextlib.contextmanager
def database(server: str) -> Iterator[str]:
    """A new database on the server ``server`` names (a ``postgresql://`` URL of any of
    its databases): its URL, for the block; dropped afterwards, connections and all."""
    name = f"reconcile_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(execute(server, f"CREATE DATABASE {name}"))
    MADE.append(name)
    try:
        yield with_database(server, name)
    finally:
        asyncio.run(execute(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def runner(
    url: str,
    folder: Path,
    *arguments: str,
    paths: tuple[Path, ...] = (),
    environment: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``reconcile --db URL run --sharding -q ARGUMENTS`` in ``folder``, started (``paths``
    on its ``PYTHONPATH``, ``environment`` set)."""
    return subprocess.Popen(  # noqa: S603 - reconcile, with arguments of our own
        [sys.executable, "-m", "reconcile", "--db", url, "run", "--sharding", "-q", *arguments],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env(*paths), **(environment or {})},
    )


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has spent so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def busy_ticks() -> tuple[int, int]:
    """The machine's CPU time so far, all cores: (busy, total) in clock ticks."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


async def server_pids(url: str) -> list[int]:
    """The server processes serving connections to the database ``url`` names (not this
    query's own)."""
    connection = await asyncpg.connect(url, timeout=10)
    try:
        rows = await connection.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await connection.close()
    return [row["pid"] for row in rows]


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM those still running and wait for them."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        process.wait()
