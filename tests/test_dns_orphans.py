"""``reconcile orphans`` with the dns provider against the BIND fixture: the store's
identity in every ownership mark, a TSIG-signed zone transfer listing what this store
made, what no object declares listed and (with --delete) deleted, what was orphaned on
purpose, belongs to another store or carries a mark this store did not sign never
touched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from dns_server import ZONE, Bind
from helpers import checkout_path
from test_dns import ByHand, record_set, token

__all__: list[str] = []


def _run(db: Path, config: Path, bind: Bind, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": checkout_path(), "TSIG_SECRET": bind.secret}
    command = [sys.executable, "-m", "reconcile", "--db", str(db), "--provider-config", str(config), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=300)


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _config(tmp_path: Path, bind: Bind, *, foreign: bool = False) -> Path:
    config = bind.config() if foreign else bind.served_config()
    path = tmp_path / ("foreign.yaml" if foreign else "providers.yaml")
    path.write_text(yaml.safe_dump({"dns": config}))
    return path


def _apply(db: Path, config: Path, bind: Bind, tmp_path: Path, *manifests: dict[str, Any]) -> None:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    _ok(_run(db, config, bind, "apply", "-f", str(path)))
    _ok(_run(db, config, bind, "run", "--once", "--timeout", "120"))


def _copy(source: Path, target: Path) -> None:
    """A backup (or its restore): the database file, its log checkpointed first."""
    with contextlib.closing(sqlite3.connect(source)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(source, target)
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)


def _revision(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0])


def _identity(db: Path) -> str:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        value = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()[0]
    return f"{value:016x}"


def test_orphans_after_a_restore_listed_then_deleted(tsig: Bind, tmp_path: Path) -> None:
    """A store restored from a backup older than two creates: ``orphans`` lists those two
    (marked with the store's identity, declared by no object), and the one deleted with
    deletion policy Orphan as left on purpose; ``--delete`` deletes the two (records and
    marks) and nothing else: not what is declared, not what was orphaned on purpose, not
    another store's record set."""
    t = token()
    config = _config(tmp_path, tsig)
    db, backup, other = tmp_path / "state.db", tmp_path / "backup.db", tmp_path / "other.db"
    hand = ByHand(tsig)
    _apply(db, config, tsig, tmp_path, record_set(f"kept-{t}", "A", ["192.0.2.1"], label="kept"))
    _copy(db, backup)
    _apply(
        db,
        config,
        tsig,
        tmp_path,
        record_set(f"lost1-{t}", "A", ["192.0.2.2"], label="lost1"),
        record_set(f"lost2-{t}", "TXT", ["lost"], label="lost2"),
    )
    identity = _identity(db)
    mark = asyncio.run(hand.records(f"_reconcile.lost1-{t}", "TXT"))
    assert len(mark) == 1
    assert f"owner={identity}" in mark[0], "the mark names the store"
    _copy(backup, db)  # the restore: lost1 and lost2 are declared by nothing now
    assert _identity(db) == identity, "a restored copy is the same store"
    left = record_set(f"left-{t}", "A", ["192.0.2.3"], label="left")
    left["metadata"]["annotations"] = {"reconcile.dev/deletion-policy": "Orphan"}
    _apply(db, config, tsig, tmp_path, left)
    _ok(_run(db, config, tsig, "delete", "recordset", "left"))
    _ok(_run(db, config, tsig, "run", "--once", "--timeout", "120"))
    _apply(other, config, tsig, tmp_path, record_set(f"theirs-{t}", "A", ["192.0.2.4"], label="theirs"))

    # A mark naming this store that it did not sign (typed by somebody who read the
    # identity in another mark): never listed, never deleted.
    forged = f"heritage=reconcile,owner={identity},type=A,uid={uuid.uuid4()}"
    for text in (forged, f"{forged},mac={'0' * 32}"):
        asyncio.run(
            hand.update(lambda m, text=text: m.add(f"_reconcile.forged-{t}.{ZONE}", 300, "TXT", f'"{text}"'))
        )
    asyncio.run(hand.update(lambda m: m.add(f"forged-{t}.{ZONE}", 300, "A", "203.0.113.9")))

    listed = json.loads(_ok(_run(db, config, tsig, "orphans", "recordset", "-o", "json")).stdout)
    mine = {row["external"]: row["state"] for row in listed if t in row["external"]}
    assert mine == {
        f"lost1-{t}.{ZONE} A": "orphan",
        f"lost2-{t}.{ZONE} TXT": "orphan",
        f"left-{t}.{ZONE} A": "orphaned on purpose",
    }

    deleted = _ok(_run(db, config, tsig, "orphans", "--delete"))
    assert f"lost1-{t}.{ZONE} A" in deleted.stdout
    assert f"2 deleted, 1 orphaned on purpose (store {identity})" in deleted.stdout
    for name, rtype in ((f"lost1-{t}", "A"), (f"lost2-{t}", "TXT")):
        assert asyncio.run(hand.records(name, rtype)) == []
        assert asyncio.run(hand.records(f"_reconcile.{name}", "TXT")) == []
    for name in (f"kept-{t}", f"left-{t}", f"theirs-{t}", f"forged-{t}"):
        assert asyncio.run(hand.records(name, "A")) != [], name
        assert asyncio.run(hand.records(f"_reconcile.{name}", "TXT")) != [], name
    again = json.loads(_ok(_run(db, config, tsig, "orphans", "-o", "json")).stdout)
    assert {row["external"] for row in again if t in row["external"]} == {f"left-{t}.{ZONE} A"}
    assert tsig.secret not in deleted.stdout + deleted.stderr


def test_a_zone_that_cannot_be_transferred_is_named_and_the_rest_listed(tsig: Bind, tmp_path: Path) -> None:
    """A zone the server does not serve (no transfer) beside one it does: exit 1 naming
    that zone and why, no traceback, no secret; the other zone's orphan is still listed."""
    t = token()
    served, both = _config(tmp_path, tsig), _config(tmp_path, tsig, foreign=True)
    db, backup = tmp_path / "state.db", tmp_path / "backup.db"
    _apply(db, served, tsig, tmp_path, record_set(f"keep-{t}", "A", ["192.0.2.7"], label="keep"))
    _copy(db, backup)
    _apply(db, served, tsig, tmp_path, record_set(f"gone-{t}", "A", ["192.0.2.8"], label="gone"))
    _copy(backup, db)
    done = _run(db, both, tsig, "orphans", "-o", "json")
    assert done.returncode == 1, done.stderr
    assert "zone transfer of elsewhere.test." in done.stderr
    assert "allow-transfer" in done.stderr
    assert "Traceback" not in done.stderr
    assert tsig.secret not in done.stdout + done.stderr
    listed = {row["external"]: row["state"] for row in json.loads(done.stdout) if t in row["external"]}
    assert listed == {f"gone-{t}.{ZONE} A": "orphan"}


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("orphans", "nosuchkind"), "nosuchkind"),
        (("orphans", "--timeout", "0"), "--timeout"),
        (("orphans", "file"), "cannot list what this store made"),
    ],
)
def test_bad_input_exits_2(tsig: Bind, tmp_path: Path, args: tuple[str, ...], reason: str) -> None:
    """An unknown kind, a timeout that is not positive, or a kind whose provider cannot
    list what it made (files): exit 2, the reason, nothing written."""
    db = tmp_path / "state.db"
    manifest = tmp_path / "one.yaml"
    manifest.write_text(yaml.safe_dump(record_set(f"b-{token()}", "A", ["192.0.2.9"], label="b")))
    _ok(_run(db, _config(tmp_path, tsig), tsig, "apply", "-f", str(manifest)))
    revision = _revision(db)
    done = _run(db, _config(tmp_path, tsig), tsig, *args)
    assert done.returncode == 2, done.stderr
    assert reason in done.stderr
    assert "Traceback" not in done.stderr
    assert _revision(db) == revision


def test_a_mark_written_before_marks_were_signed_is_proof_of_nothing(tsig: Bind, tmp_path: Path) -> None:
    """A record set whose mark has no signature (as versions before it wrote them, and as
    anybody can type): NotOwned, its records and mark left as they were; ``adopt`` marks
    it with a signed line and the next pass removes the old one (recorded as drift); a
    delete removes every line of the mark for the uid, an old one included."""
    t = token()
    config = _config(tmp_path, tsig)
    db = tmp_path / "state.db"
    hand = ByHand(tsig)
    name = f"legacy-{t}"
    _apply(db, config, tsig, tmp_path, record_set(name, "A", ["192.0.2.5"], label="legacy"))
    (mark,) = asyncio.run(hand.records(f"_reconcile.{name}", "TXT"))
    assert ",mac=" in mark
    legacy = mark.split(",mac=")[0] + '"'
    asyncio.run(hand.update(lambda m: m.replace(f"_reconcile.{name}.{ZONE}", 300, "TXT", legacy)))
    asyncio.run(hand.update(lambda m: m.replace(f"{name}.{ZONE}", 300, "A", "198.51.100.5")))

    _run(db, config, tsig, "run", "--once", "--timeout", "30")
    described = _ok(_run(db, config, tsig, "get", "recordset/legacy", "-o", "json")).stdout
    assert "without this store's signature" in described
    assert asyncio.run(hand.records(name, "A")) == ["198.51.100.5"], "not repaired: not ours"
    assert asyncio.run(hand.records(f"_reconcile.{name}", "TXT")) == [legacy]

    _ok(_run(db, config, tsig, "adopt", "recordset/legacy"))
    _ok(_run(db, config, tsig, "run", "--once", "--timeout", "120"))  # adopted (marked)
    _ok(_run(db, config, tsig, "run", "--once", "--timeout", "120"))  # brought to the spec
    assert asyncio.run(hand.records(name, "A")) == ["192.0.2.5"]
    assert asyncio.run(hand.records(f"_reconcile.{name}", "TXT")) == [mark], "one line, signed"
    history = _ok(_run(db, config, tsig, "history", "recordset/legacy", "-o", "json")).stdout
    assert "Adopted" in history
    assert "not signed by this store removed" in history

    asyncio.run(hand.update(lambda m: m.add(f"_reconcile.{name}.{ZONE}", 300, "TXT", legacy)))
    _ok(_run(db, config, tsig, "delete", "recordset", "legacy"))
    _ok(_run(db, config, tsig, "run", "--once", "--timeout", "120"))
    assert asyncio.run(hand.records(name, "A")) == []
    assert asyncio.run(hand.records(f"_reconcile.{name}", "TXT")) == [], "every line of the mark went"


def test_plan_judges_marks_with_the_store_s_secret(tsig: Bind, tmp_path: Path) -> None:
    """``reconcile plan`` after a run: the record set the run made is unchanged (its mark
    verified with the store's secret, as the runner's is), and one whose mark was
    replaced by an unsigned copy is not ours."""
    t = token()
    config = _config(tmp_path, tsig)
    db = tmp_path / "state.db"
    hand = ByHand(tsig)
    _apply(
        db,
        config,
        tsig,
        tmp_path,
        record_set(f"p1-{t}", "A", ["192.0.2.1"], label="p1"),
        record_set(f"p2-{t}", "A", ["192.0.2.2"], label="p2"),
    )
    (mark,) = asyncio.run(hand.records(f"_reconcile.p2-{t}", "TXT"))
    unsigned = mark.split(",mac=")[0] + '"'
    asyncio.run(hand.update(lambda m: m.replace(f"_reconcile.p2-{t}.{ZONE}", 300, "TXT", unsigned)))
    planned = json.loads(_run(db, config, tsig, "plan", "-o", "json").stdout)
    actions = {row["name"]: row["action"] for row in planned}
    assert actions == {"p1": "nothing", "p2": "refuse"}
