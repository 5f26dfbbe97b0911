"""Reading a file in one call (reconcile_providers.files.walking.read_all): whatever its
``fstat`` said before, grown, shrunk or empty, what it holds is read whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconcile_providers.files.walking import read_all


@pytest.mark.parametrize(("said", "holds"), [(3, b"abc"), (3, b"abcdef" * 20000), (10, b"ab"), (0, b"")])
def test_what_the_file_holds_when_read(tmp_path: Path, said: int, holds: bytes) -> None:
    """What the file holds, whichever size ``fstat`` said before."""
    path = tmp_path / "x"
    path.write_bytes(holds)
    handle = os.open(path, os.O_RDONLY)
    try:
        assert read_all(handle, said) == holds
    finally:
        os.close(handle)
