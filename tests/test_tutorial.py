"""Every command of the tutorial runs, in order, and prints what the page shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
TUTORIAL = ROOT / "docs" / "tutorial" / "static-site.md"
#: Lines the test does itself: a fresh folder stands for `make clean-demo`, and the
#: interpreter's bin folder on PATH for activating the virtual environment.
SET_UP = {"make clean-demo", ". .venv/bin/activate"}
BASH = shutil.which("bash") or "/bin/bash"
_AGE = re.compile(r"\s+\d+[smhd]$")


def steps(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every ``$`` line of the console blocks."""
    found: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append((line[2:], []))
            elif found:
                found[-1][1].append(line)
    return found


def normal(line: str) -> str:
    """Whitespace collapsed, a trailing AGE column dropped (it depends on the clock)."""
    return " ".join(_AGE.sub("", line).split())


def mismatch(expected: list[str], printed: list[str]) -> str | None:
    """Why ``printed`` is not what the page shows, or None: the page's lines in the same
    order, next to each other unless ``...`` stands between them (lines left out), and
    nothing at all when the page shows nothing."""
    if not expected and printed:
        return "the page shows no output"
    position, skipping = 0, True  # before the first line, anything may come
    for line in expected:
        if line == "...":
            skipping = True
            continue
        if not line:
            continue
        if skipping:
            found = next((i for i in range(position, len(printed)) if printed[i] == line), None)
            if found is None:
                return f"{line!r} is not printed (after line {position})"
        elif position < len(printed) and printed[position] == line:
            found = position
        else:
            got = printed[position] if position < len(printed) else "the end"
            return f"{line!r} expected next, got {got!r}"
        position, skipping = found + 1, False
    return None


def test_every_tutorial_command(tmp_path: Path) -> None:
    """Run the tutorial's commands in a copy of the examples; each exits 0 and shows
    every output line the page shows (``...`` stands for lines left out)."""
    shutil.copytree(ROOT / "examples" / "files", tmp_path / "examples" / "files")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ["PATH"]]), "PYTHONPATH": str(ROOT)}
    env.pop("RECONCILE_DB", None)
    ran = 0
    for command, expected in steps(TUTORIAL.read_text()):
        if command in SET_UP:
            continue
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            env[name] = value
            continue
        result = subprocess.run(
            [BASH, "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"{command!r} exited {result.returncode}: {result.stderr}"
        problem = mismatch(
            [normal(line) for line in expected], [normal(line) for line in result.stdout.splitlines()]
        )
        assert problem is None, f"{command!r}: {problem}; it printed:\n{result.stdout}"
        ran += 1
    assert ran >= 15, "the tutorial lost its commands"


def test_readme_example(tmp_path: Path) -> None:
    """The README's Python example runs as written and tells the file's story."""
    readme = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)[0]
    (tmp_path / "example.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "motd.txt").read_text() == "hello\n"
    types = [line.split()[1] for line in result.stdout.splitlines()]
    assert types[0] == "Created"
    assert "CreateSucceeded" in types


class TestFirstSteps:
    """docs/tutorial/first-steps.md's Python, run as the page shows it."""

    async def test_a_mistake_reports_every_problem_at_once(self, tmp_path: Path) -> None:
        """Step 3's apply raises one InvalidError whose message is the page's: the
        range error and the unknown field together."""
        import pytest  # noqa: PLC0415

        import reconcile  # noqa: PLC0415
        from reconcile.testing import example_kinds  # noqa: PLC0415

        page = (ROOT / "docs" / "tutorial" / "first-steps.md").read_text()
        blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
        declare, mistake = blocks[1], blocks[2]
        comment = [line.removeprefix("#").strip() for line in mistake.splitlines() if line.startswith("#")]
        shown = " ".join(comment).removeprefix("reconcile.errors.InvalidError: ")
        body = "\n".join(f"    {line}" for line in (declare + mistake).splitlines())
        namespace: dict[str, object] = {}
        exec(f"async def steps(client):\n{body}\n", namespace)  # noqa: S102 - the page's own code
        async with reconcile.connect(
            f"sqlite:///{tmp_path / 'tutorial.db'}", kinds=example_kinds()
        ) as client:
            with pytest.raises(reconcile.InvalidError) as caught:
                await namespace["steps"](client)  # type: ignore[operator]
        assert str(caught.value) == shown


class TestOwnKinds:
    """The how-to's and the reference's example of a kind of one's own runs as shown."""

    def test_the_embed_how_to_declares_and_reconciles_its_own_kind(self, tmp_path: Path) -> None:
        """docs/how-to/embed.md's "Declare your own kind" runs as a script and prints what
        its comments show; docs/reference/reconciler.md's snippet is a part of it."""
        blocks = re.findall(
            r"```python\n(.*?)```", (ROOT / "docs" / "how-to" / "embed.md").read_text(), re.DOTALL
        )
        [example] = [block for block in blocks if "reconcile.Kind(" in block]
        (tmp_path / "greetings.py").write_text(example)
        result = subprocess.run(
            [sys.executable, "greetings.py"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        shown = [line.removeprefix("# ") for line in example.splitlines() if line.startswith("# ")]
        assert result.stdout.splitlines() == shown
        reference = (ROOT / "docs" / "reference" / "reconciler.md").read_text()
        [snippet] = [
            b for b in re.findall(r"```python\n(.*?)```", reference, re.DOTALL) if "reconcile.Kind(" in b
        ]
        lines = {line.strip() for line in example.splitlines()}
        assert all(line.strip() in lines for line in snippet.splitlines()), "the reference's snippet drifted"
