"""``reconcile plan``: what run would do, observed, for created, drifted, deleted out of
band, foreign and deleting objects; nothing is written outside or to the log."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from reconcile.cli import main

API = "files.reconcile.dev/v1"


def manifest(name: str, path: str, content: str = "declared\n") -> str:
    """A File manifest document."""
    spec = f"{{path: {path}, content: {json.dumps(content)}}}"
    return f"apiVersion: {API}\nkind: File\nmetadata: {{name: {name}}}\nspec: {spec}\n"


class Site:
    """A store converged over a root, and the means to plan it."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.db, self.root, self.capsys = tmp_path / "state.db", tmp_path / "root", capsys
        self.manifests = tmp_path / "site.yaml"
        self.manifests.write_text(
            "---\n".join(manifest(n, f"{n}.txt") for n in ("kept", "drifted", "gone", "deleting"))
        )

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """Exit code, stdout, stderr of ``reconcile --db DB --root ROOT ARGS``."""
        self.capsys.readouterr()
        code = main(["--db", str(self.db), "--root", str(self.root), *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def revision(self) -> int:
        """The store's head revision."""
        with sqlite3.connect(self.db) as conn:
            return int(conn.execute("SELECT max(revision) FROM events").fetchone()[0])

    def outside(self) -> dict[str, bytes]:
        """Every file under the root."""
        return {
            str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file()
        }


@pytest.fixture
def site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Site:
    """Four Files applied and converged, then: one edited by hand, one removed by hand,
    one being deleted (a finalizer holds it), and a foreign file where a new one goes."""
    converged = Site(tmp_path, capsys)
    assert converged("apply", "-f", str(converged.manifests))[0] == 0
    assert converged("run", "--once", "--timeout", "30", "-q")[0] == 0
    (converged.root / "drifted.txt").write_text("edited by hand\n")
    (converged.root / "gone.txt").unlink()
    (converged.root / "theirs.txt").write_text("somebody else's\n")
    return converged


def test_plan_says_what_run_would_do(site: Site, tmp_path: Path) -> None:
    """nothing, update with the diff, create, delete (of one being deleted), refuse (a
    foreign file where a new object goes), with the summary; nothing written anywhere."""
    held = manifest("deleting", "deleting.txt").replace(
        "{name: deleting}", "{name: deleting, finalizers: [x.dev/hold]}"
    )
    (tmp_path / "held.yaml").write_text(held)
    assert site("apply", "-f", str(tmp_path / "held.yaml"))[0] == 0
    assert site("delete", "file", "deleting")[0] == 0
    revision, outside = site.revision(), site.outside()
    code, out, _ = site("plan", "-o", "json")
    assert code == 0
    actions = {row["name"]: row["action"] for row in json.loads(out)}
    assert actions == {"kept": "nothing", "drifted": "update", "gone": "create", "deleting": "delete"}
    (tmp_path / "new.yaml").write_text(manifest("new", "theirs.txt"))
    code, out, _ = site("plan", "-f", str(tmp_path / "new.yaml"))
    assert code == 0
    assert "refuse" in out.split()
    assert "NotOwned" in out
    code, out, _ = site("plan")
    lines = out.splitlines()
    assert any(line.split()[:4] == ["update", "File", "default", "drifted"] for line in lines)
    assert any("-edited by hand" in line for line in lines)
    assert lines[-1] == "Plan: 1 to create, 1 to update, 1 to delete, 0 to adopt, 0 to orphan; 1 unchanged."
    assert (site.revision(), site.outside()) == (revision, outside), "plan wrote something"


def test_apply_plan_stores_nothing(site: Site, tmp_path: Path) -> None:
    """apply --plan shows the plan of the manifests and stores nothing."""
    revision = site.revision()
    (tmp_path / "new.yaml").write_text(manifest("new", "new.txt"))
    code, out, _ = site("apply", "--plan", "-f", str(tmp_path / "new.yaml"))
    assert code == 0
    assert out.splitlines()[-1].startswith("Plan: 1 to create")
    assert site.revision() == revision


def test_exit_code_and_a_converged_store(site: Site) -> None:
    """--exit-code: 1 while run would change something, 0 once it would not."""
    assert site("plan", "--exit-code")[0] == 1
    assert site("run", "--once", "--timeout", "30", "-q")[0] == 0
    code, out, _ = site("plan", "--exit-code")
    assert code == 0
    assert out.splitlines()[-1].startswith("Plan: 0 to create, 0 to update, 0 to delete")


def test_plan_of_manifests_before_any_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plan -f on a database that does not exist yet: everything to create, and the
    database is not created."""
    fresh = Site(tmp_path, capsys)
    code, out, _ = fresh("plan", "-f", str(fresh.manifests))
    assert code == 0
    assert out.splitlines()[-1].startswith("Plan: 4 to create")
    assert not fresh.db.exists()


def test_an_object_that_cannot_be_observed(site: Site, tmp_path: Path) -> None:
    """A folder swapped for a symlink: the object's plan is an error, named, exit 1."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "sub.yaml").write_text(manifest("sub", "sub/x.txt"))
    assert site("apply", "-f", str(tmp_path / "sub.yaml"))[0] == 0
    (site.root / "sub").symlink_to(tmp_path / "elsewhere")
    code, _, err = site("plan")
    assert code == 1
    assert "File default/sub: cannot observe: " in err
    assert "symlink" in err


def test_adopt_takes_over_a_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A File whose path holds somebody else's file: NotOwned; plan says refuse; after
    ``adopt file/x`` plan says adopt, and run takes it over (Adopted in the history, our
    mark, the declared content)."""
    site = Site(tmp_path, capsys)
    site.root.mkdir()
    (site.root / "x.txt").write_text("theirs\n")
    (tmp_path / "x.yaml").write_text(manifest("x", "x.txt"))
    assert site("apply", "-f", str(tmp_path / "x.yaml"))[0] == 0
    code, _, err = site("run", "--once", "--timeout", "30", "-q")
    assert code == 1
    assert "NotOwned" in err
    assert json.loads(site("plan", "-o", "json")[1])[0]["action"] == "refuse"
    code, out, _ = site("adopt", "file/x")
    assert code == 0
    assert (
        out.strip()
        == "file.files.reconcile.dev/x marked for adoption: the runner takes over the existing resource"
    )
    assert json.loads(site("plan", "-o", "json")[1])[0]["action"] == "adopt"
    assert site("run", "--once", "--timeout", "30", "-q")[0] == 0
    assert (site.root / "x.txt").read_text() == "declared\n"
    code, out, _ = site("history", "file/x", "-o", "json")
    adopted = [e for e in json.loads(out) if e["type"] == "Adopted"]
    assert adopted
    assert "took over the existing external resource (unmarked)" in adopted[0]["data"]["message"]
    code, out, _ = site("get", "file/x", "-o", "json")
    assert "reconcile.dev/adopt" not in json.loads(out)["metadata"]["annotations"]


class TestWorkers:
    """``plan --workers``: observes in flight at once, the plan in the objects' order."""

    @pytest.mark.parametrize("workers", [1, 3])
    def test_observes_run_concurrently(
        self, site: Site, monkeypatch: pytest.MonkeyPatch, workers: int
    ) -> None:
        """Up to --workers observes are in flight together (one at a time before), and the
        plan is the same, in the same order, whatever the number."""
        import asyncio  # noqa: PLC0415

        from reconcile.cli import planning  # noqa: PLC0415

        real, in_flight, most = planning.plan, [0], [0]

        async def counting(*args: object, **kwargs: object) -> object:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            try:
                await asyncio.sleep(0)  # let the others start, if they may
                return await real(*args, **kwargs)  # type: ignore[arg-type]
            finally:
                in_flight[0] -= 1

        _, expected, _ = site("plan", "-o", "json")
        monkeypatch.setattr(planning, "plan", counting)
        code, out, err = site("plan", "-o", "json", "--workers", str(workers))
        assert code == 0, err
        assert out == expected
        assert most[0] == workers
