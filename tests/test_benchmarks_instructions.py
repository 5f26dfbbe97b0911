"""``benchmarks/instructions.py``: each case it counts under valgrind runs (here without
valgrind, on a few writes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "instructions.py"


@pytest.mark.parametrize("case", ["store", "store100", "limit", "limit100"])
def test_each_case_runs(case: str) -> None:
    """One run of the case over 3 writes ends well (what valgrind is given to count)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--run", case, "--small", "3"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
