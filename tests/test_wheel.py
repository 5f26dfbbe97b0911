"""The built wheel, installed in a fresh virtual environment, works on its own: it
installs no top-level package another distribution could overwrite (the built-in
providers live under ``reconcile_providers``), ``reconcile providers`` lists them, and
``make demo``'s apply and run converge the example site."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built without network (hatchling comes with the dev extra)."""
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("reconcile_engine-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; its dependencies are read
    from this environment's site-packages (a path, not a site dir: the editable install's
    ``.pth`` there is not processed, so the checkout is not importable from it)."""
    where = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    return where


def test_the_wheel_installs_only_packages_of_ours(wheel: Path) -> None:
    """Top-level names in the wheel: ``reconcile`` and ``reconcile_providers`` (no
    ``providers``, which any other distribution could install and overwrite)."""
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    packages = {top for top in tops if not top.endswith((".dist-info", ".data"))}
    assert packages == {"reconcile", "reconcile_providers"}


def test_the_wheel_ships_the_web_views_assets(wheel: Path) -> None:
    """The web view's page, stylesheet and script modules are in the wheel (``/ui`` of an
    installed ``reconcile serve`` needs nothing else)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {name.removeprefix("reconcile/http/static/ui/") for name in names if "/static/ui/" in name}
    assert {"index.html", "app.css", "main.js", "live.js"} <= shipped


def test_the_installed_wheel_lists_its_providers(venv: Path, tmp_path: Path) -> None:
    """``reconcile providers`` from the fresh environment names the three built-in
    providers, loaded from the installed ``reconcile_providers``."""
    listed = subprocess.run(
        [str(venv / "bin" / "reconcile"), "providers"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    for provider in ("files", "s3", "dns"):
        assert provider in listed.stdout
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import reconcile_providers; print(reconcile_providers.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert str(venv) in where, where


def test_the_installed_wheel_runs_the_demo(venv: Path, tmp_path: Path) -> None:
    """``make demo``'s two commands, with the installed ``reconcile``: apply the example
    site, ``run --once`` converges it (exit 0) and the files are there."""
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples" / "files", examples / "files")
    command = [str(venv / "bin" / "reconcile"), "--db", "state.db", "--root", "site"]
    applied = subprocess.run(
        [*command, "apply", "-f", "examples/files/"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    ran = subprocess.run(
        [*command, "run", "--once", "--timeout", "60"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert any((tmp_path / "site").rglob("*.html"))
