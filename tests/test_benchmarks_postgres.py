"""The PostgreSQL benchmarks run (tiny sizes: a smoke test, not a timing):
``benchmarks/scaleout.py`` and ``benchmarks/reconcile.py --db``. Each makes databases of
its own on the test server and drops them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from postgres_server import SERVER, Database

ROOT = Path(__file__).parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark of the repository with reconcile importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "providers")])}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


async def databases() -> set[str]:
    """The databases on the test server."""
    connection = await asyncpg.connect(f"{SERVER}/postgres")
    try:
        return {row[0] for row in await connection.fetch("SELECT datname FROM pg_database")}
    finally:
        await connection.close()


async def test_scaleout_benchmark_smoke(postgres: Database, tmp_path: Path) -> None:
    """benchmarks/scaleout.py converges a few Buckets of its sleeping provider by 1 and 2
    sharded runners, beside the bare asyncio limit, measures the cross-process watch
    latency, and leaves no database behind."""
    out = tmp_path / "scaleout.json"
    script = str(ROOT / "benchmarks" / "scaleout.py")
    result = run(
        script,
        "--db",
        postgres.url,
        "--size",
        "40",
        "--processes",
        "1,2",
        "--workers",
        "4",
        "--json",
        str(out),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert (data["size"], data["workers"], data["latency_s"]) == (40, 4, 0.005)
    assert data["calls_per_resource"] >= 2  # at least an observe and a create
    assert [row["processes"] for row in data["rows"]] == [1, 2]
    for row in data["rows"]:
        assert 0 < row["limit_s"] < row["converge_s"]
        assert len(row["runner_cpu_s"]) == row["processes"]
        assert all(cpu > 0 for cpu in row["runner_cpu_s"])
        assert 0 < row["machine_busy_share"] <= 1
        assert row["commit_ms"] > 0
    assert data["rows"][0]["speedup"] == 1.0
    assert data["cross_process_watch_latency"]["count"] >= 20
    assert "speedup" in result.stdout
    assert data["databases"]
    assert not set(data["databases"]) & await databases()


async def test_reconcile_benchmark_on_postgresql(postgres: Database, tmp_path: Path) -> None:
    """benchmarks/reconcile.py --db converges the same Things on PostgreSQL beside SQLite,
    in the same run, and drops its database."""
    out = tmp_path / "reconcile.json"
    script = str(ROOT / "benchmarks" / "reconcile.py")
    result = run(script, "--size", "200", "--workers", "4", "--db", postgres.url, "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    [row] = data["convergence"]
    on_postgres = row["postgres"]
    assert (on_postgres["size"], on_postgres["created"]) == (200, 200)
    assert on_postgres["resync_events_appended"] == 0
    assert on_postgres["converge_s"] > 0
    assert "pg/sqlite" in result.stdout
    assert len(data["databases"]) == 1
    assert not set(data["databases"]) & await databases()


@pytest.mark.parametrize("url", ["postgresql://postgres@127.0.0.1:1/postgres"])
def test_scaleout_benchmark_refuses_an_unreachable_server(url: str, tmp_path: Path) -> None:
    """An unreachable server: the benchmark says so (exit 2, no traceback) before it
    starts anything, and writes no results."""
    out = tmp_path / "scaleout.json"
    result = run(str(ROOT / "benchmarks" / "scaleout.py"), "--db", url, "--size", "10", "--json", str(out))
    assert result.returncode == 2
    assert "--db: cannot reach the server" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_sharding_benchmark_smoke(postgres: Database) -> None:
    """benchmarks/sharding.py converges a few files by 1 and 3 runners and times the move
    of a SIGKILLed runner's shards."""
    result = run(
        str(ROOT / "benchmarks" / "sharding.py"), "--db", postgres.url, "--size", "20", "--processes", "1,3"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 process(es): converged in" in result.stdout
    assert "3 process(es): converged in" in result.stdout
    assert "a SIGKILLed runner's shards moved in" in result.stdout


async def test_paging_benchmark_smoke(postgres: Database, tmp_path: Path) -> None:
    """benchmarks/paging.py pages through a few Buckets on both stores, each beside the
    raw reads of the same rows, finds every one (and none through a selector keeping
    none), and leaves no database behind."""
    before = await databases()
    out = tmp_path / "paging.json"
    script = str(ROOT / "benchmarks" / "paging.py")
    result = run(script, "--db", postgres.url, "--size", "30", "--page", "7", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert (data["size"], data["page"]) == (30, 7)
    cases = {store: [row["case"] for row in rows] for store, rows in data["stores"].items()}
    assert cases == {
        "sqlite": [
            "raw sqlite3, one statement",
            "raw sqlite3, pages of 7",
            "Client.list, pages of 7",
            "Client.list, pages of 7, a selector keeping none",
        ],
        "postgresql": [
            "raw asyncpg, one statement",
            "raw asyncpg, pages of 7",
            "Client.list, pages of 7",
            "Client.list, pages of 7, a selector keeping none",
        ],
    }
    assert all(row["seconds"] > 0 and row["x_limit"] > 0 for rows in data["stores"].values() for row in rows)
    assert "Client.list, pages of 7" in result.stdout
    assert await databases() == before
