"""Every command of docs/how-to/write-an-operator.md runs, in order, and prints what the
page shows: the example operator from creation to each propagation policy."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from test_tutorial import BASH, normal, steps

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "how-to" / "write-an-operator.md"
#: A history line's revision and time, which the page shows as they were once.
_WHEN = re.compile(r"^\d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")
#: Who the page says ran the commands.
YOU = "you@host"


def shown(line: str) -> str:
    """A line of the page or of the output, compared without what changes run to run:
    a history line's revision and time, the AGE column, the user's name."""
    line = normal(line).replace(f"{getpass.getuser()}@{socket.gethostname()}", YOU)
    return _WHEN.sub("", line)


def matches(expected: str, printed: str) -> bool:
    """A page line against a printed one; ``...`` inside a line stands for anything."""
    if "..." not in expected:
        return expected == printed
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, printed) is not None


def mismatch(expected: list[str], printed: list[str]) -> str | None:
    """Why ``printed`` is not what the page shows, or None: the page's lines in order,
    next to each other unless a ``...`` line stands between them."""
    if not expected and printed:
        return "the page shows no output"
    position, skipping = 0, True
    for line in expected:
        if line == "...":
            skipping = True
            continue
        if not line:
            continue
        if skipping:
            found = next((i for i in range(position, len(printed)) if matches(line, printed[i])), None)
            if found is None:
                return f"{line!r} is not printed (after line {position})"
        elif position < len(printed) and matches(line, printed[position]):
            found = position
        else:
            got = printed[position] if position < len(printed) else "the end"
            return f"{line!r} expected next, got {got!r}"
        position, skipping = found + 1, False
    return None


def test_every_command_of_the_how_to(tmp_path: Path) -> None:
    """Run the page's commands in a copy of the example; each exits 0 (2 where the page
    shows an error) and prints every line the page shows."""
    shutil.copytree(ROOT / "examples" / "operator", tmp_path / "examples" / "operator")
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([bin_dir, os.environ["PATH"]]),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), str(ROOT / "providers")]),
    }
    for name in ("RECONCILE_DB", "RECONCILE_IMPORT"):
        env.pop(name, None)
    ran = 0
    for command, expected in steps(PAGE.read_text()):
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
        refused = bool(expected) and expected[0].startswith("error:")
        assert result.returncode == (2 if refused else 0), (
            f"{command!r} exited {result.returncode}: {result.stderr}"
        )
        output = result.stderr if refused else result.stdout
        problem = mismatch([shown(line) for line in expected], [shown(line) for line in output.splitlines()])
        assert problem is None, f"{command!r}: {problem}; it printed:\n{output}"
        ran += 1
    assert ran >= 25, "the how-to lost its commands"


def test_the_code_shown_is_the_example() -> None:
    """The kind, hooks, children and controller the page shows are the example's own
    code, as it is (a change to one shows on the other)."""
    example = (ROOT / "examples" / "operator" / "sites.py").read_text()
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    starts = ("@attrs.frozen", "@SITE.mutating", "def render", "@operator.controller")
    shown_code = [b[b.index(start) :] for b in blocks for start in starts if start in b]
    assert len(shown_code) == len(starts)
    for block in shown_code:
        assert block in example, block[:80]
