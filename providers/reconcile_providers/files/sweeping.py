"""Sweeping: removing the temporary files and folders a crashed write left behind.

Every write is prepared under a temporary name (``.name.<random>.tmp``) and renamed into
place. A process killed in between leaves the temporary behind, and a leftover in a
folder would block deleting that folder for good. So the folder is swept when it is next
touched: before the first write into it by this process, and before a ``Directory`` is
removed.

Only our own leftovers go: an entry whose name has the temporary shape, that carries
the owner mark (set right after the temporary is created), and whose ``flock`` can be
taken. A writer holds the lock from before it marks the temporary until after the
rename, so a write in progress, in this process or another, is never swept from under
it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat

from reconcile_providers.files.marking import read_mark
from reconcile_providers.files.walking import DIRECTORY_FLAGS, FILE_FLAGS, entry_stat

__all__ = ["TEMPORARY", "sweep"]

#: ``.name.<random>.tmp``: eight characters of mkstemp's alphabet or of hex.
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


def sweep(folder: int) -> list[str]:
    """Remove the abandoned temporaries in an open folder; returns their names."""
    candidates = [name for name in os.listdir(folder) if TEMPORARY.fullmatch(name)]
    return [name for name in candidates if _remove_abandoned(folder, name)]


def _remove_abandoned(folder: int, name: str) -> bool:
    info = entry_stat(folder, name)
    if info is None or not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return False
    is_folder = stat.S_ISDIR(info.st_mode)
    try:
        handle = os.open(name, DIRECTORY_FLAGS if is_folder else FILE_FLAGS, dir_fd=folder)
    except OSError:
        return False
    try:
        if read_mark(handle) is None:
            return False  # not ours, or not yet marked: a writer marks only once it holds the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a write in progress
        now, opened = entry_stat(folder, name), os.fstat(handle)
        if now is None or (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
            return False  # renamed into place (or replaced) meanwhile
        try:
            if is_folder:
                os.rmdir(name, dir_fd=folder)
            else:
                os.unlink(name, dir_fd=folder)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTEMPTY):
                return False
            raise
        return True
    finally:
        with contextlib.suppress(OSError):
            os.close(handle)
