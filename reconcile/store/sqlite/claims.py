"""Exclusive claims on a SQLite store: an advisory lock (``flock``) on a file beside the
database, ``<database>.<name>.lock``. The kernel drops the lock when its process ends,
however it ends (a SIGKILL included), so a dead holder never blocks the next one. The
file says who holds it (pid, host, since when) for the error the next claimant gets.

A clean release removes the file (it would otherwise linger beside the database, in
``git status`` too); a killed holder leaves it, harmlessly. Removing a lock file is safe
only because a claimant, once it holds the lock, checks that the path still names the
file it locked: one that locked a file just unlinked by the previous holder lets go and
tries again on the new one, so two processes never hold the claim at once.

Same machine only, like SQLite's own locking: not over NFS.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import socket
from collections.abc import Callable
from pathlib import Path

from reconcile.errors import LockedError, StoreError

__all__ = ["FileClaim", "claim_file"]

#: Attempts at a claim whose lock file is removed under it each time.
_ATTEMPTS = 100


class FileClaim:
    """A held claim: the open, locked file."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        """Whether it has not been released."""
        return self._fd is not None

    @property
    def lost(self) -> str | None:
        """Never: a lock on an open file is held until released or the process ends."""
        return None

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Nothing to tell: the claim is never lost."""

    async def fence(self) -> None:
        """No fence: the one runner's writes need none (the claim is never lost)."""

    def release(self) -> None:
        """Remove the file while still holding it, then unlock and close (the kernel's
        lock goes with the descriptor)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            os.close(fd)


def claim_file(database: Path, name: str) -> FileClaim:
    """Claim ``name`` beside ``database``; LockedError naming the holder if taken."""
    path = database.with_name(f"{database.name}.{name}.lock")
    for _ in range(_ATTEMPTS):
        claim = _claim_once(database, name, path)
        if claim is not None:
            return claim
    raise StoreError(f"{path}: the lock file keeps being replaced")  # pragma: no cover - a storm of claims


def _claim_once(database: Path, name: str, path: Path) -> FileClaim | None:
    """One attempt; None when the file locked was unlinked meanwhile (try again)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the {name} lock ({exc.strerror})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        message = f"{database}: {holder} holds the {name} lock ({path.name})"
        raise LockedError(message, holder=holder) from None
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"{path}: cannot lock ({exc.strerror})") from exc
    try:
        current = path.stat()
    except FileNotFoundError:
        current = None
    locked = os.fstat(fd)
    if current is None or (current.st_dev, current.st_ino) != (locked.st_dev, locked.st_ino):
        os.close(fd)  # the previous holder removed this file as we opened it
        return None
    since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {since}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)
        full = " (disk full)" if exc.errno == errno.ENOSPC else ""
        raise StoreError(f"{path}: cannot record the {name} lock's holder{full}: {exc.strerror}") from exc
    return FileClaim(path, fd)
