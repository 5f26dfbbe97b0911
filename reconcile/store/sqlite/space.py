"""Telling a full disk from the other ways SQLite fails, so the store says "disk full".

SQLite reports a full disk as ``SQLITE_FULL`` ("database or disk is full") when a write
to the database or its WAL runs out of room, but as an I/O error when it is the shared
memory file that cannot grow (``SQLITE_IOERR_SHMSIZE``, "disk I/O error", which the
first read of a database opened on a full disk meets): an I/O error is called a full
disk when the database's filesystem has no free block left at that moment.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["disk_full"]


def disk_full(exc: sqlite3.Error, path: str | os.PathLike[str]) -> bool:
    """Whether ``exc``, met on the database at ``path``, means its disk is full."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL" or "disk is full" in str(exc):
        return True
    if not (name.startswith("SQLITE_IOERR") or "disk I/O error" in str(exc)):
        return False
    try:
        space = os.statvfs(Path(path).absolute().parent)
    except OSError:
        return False
    return space.f_bavail == 0
