"""Open folders kept between calls: the walk from a root without opening every folder
on the way again for each file.

:func:`~reconcile_providers.files.walking.descend` opens the root and each folder below
it, one component at a time, for every read and write: for 10,000 files in 100 folders,
20,000 opens (and closes) of the same 101 folders per pass. :class:`Folders` keeps each
folder it opened, with the identity (``st_dev``, ``st_ino``) of what it opened, and walks
the same way, one component at a time from the root, but **revalidates** each kept folder
instead of opening it again: an ``lstat`` of the root's path, then of each component
relative to the (revalidated) folder above it, following no symlink, must find the very
folder that is held open. So every step is still taken from a directory descriptor that
was opened without following a link and that is, at the moment it is checked, the folder
at that place under the root: the same guarantee as opening it again, for one ``lstat``
instead of an ``open`` and a ``close``. A folder moved away (even out of the root) and
something else put in its place, a symlink above all, no longer matches: the descriptor
is dropped and the component opened again as the walk always did, which refuses the
symlink with the same TransientError. (A held descriptor keeps its inode allocated, so
its number cannot be reused by what replaces it.)

Descriptors are shared by the worker threads that write and the event loop that reads:
each use holds a lease, and a descriptor found stale is closed only when its last user
lets go, never under another thread's feet. At most :data:`LIMIT` folders are kept; the
least recently used unleased ones are closed first.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator

import attrs

__all__ = ["LIMIT", "Folders"]

#: How many open folders one client keeps at most.
LIMIT = 256

#: What a kept folder is known by: its root, and the components from the root down.
_Key = tuple[str, ...]


@attrs.define(eq=False)
class _Held:
    """One open folder: its descriptor, its identity, how many are using it, and
    whether it was found stale (closed once nobody is)."""

    fd: int
    identity: tuple[int, int]
    users: int = 0
    stale: bool = False


class Folders:
    """Open folder descriptors kept by root and components, revalidated at each use."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._held: dict[_Key, _Held] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def leased(
        self,
        root: str,
        names: list[str],
        open_root: Callable[[], int | None],
        open_in: Callable[[int, int], int | None],
    ) -> Iterator[int | None]:
        """The open folder ``root/names...``, reached from the root one component at a
        time: a kept folder when it is still the one at that place, else opened with
        ``open_root()`` (the root) or ``open_in(folder, i)`` (``names[i]`` in the open
        ``folder``); each returns None for one missing, and then so does this.
        The descriptor is valid until the block ends; it is not to be closed."""
        current = self._lease((root,), functools.partial(_root_identity, root), open_root)
        try:
            for i, name in enumerate(names):
                if current is None:
                    break
                above = current
                current = self._lease(
                    (root, *names[: i + 1]),
                    functools.partial(_entry_identity, above.fd, name),
                    functools.partial(open_in, above.fd, i),
                )
                self._release(above)
            yield None if current is None else current.fd
        finally:
            if current is not None:
                self._release(current)

    def close(self) -> None:
        """Close every kept folder (those still in use when they are let go)."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
            for entry in held:
                entry.stale = True
                if entry.users == 0:
                    os.close(entry.fd)

    # -- keeping ---------------------------------------------------------------------------

    def _lease(
        self, key: _Key, identity_now: Callable[[], tuple[int, int] | None], opening: Callable[[], int | None]
    ) -> _Held | None:
        """A lease on the folder kept for ``key`` if ``identity_now()`` (what is at that
        place now) is its identity; else on one freshly opened (None: missing)."""
        with self._lock:
            kept = self._held.get(key)
            if kept is not None:
                kept.users += 1
                self._held[key] = self._held.pop(key)  # most recently used last
        if kept is not None:
            if identity_now() == kept.identity:
                return kept
            self._release(kept, stale=True, key=key)
        fd = opening()
        if fd is None:
            return None
        try:
            info = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        fresh = _Held(fd, (info.st_dev, info.st_ino), users=1)
        with self._lock:
            replaced = self._held.pop(key, None)
            if replaced is not None:
                self._forget(replaced)
            self._held[key] = fresh
            self._evict()
        return fresh

    def _release(self, entry: _Held, *, stale: bool = False, key: _Key | None = None) -> None:
        with self._lock:
            entry.users -= 1
            if stale and key is not None and self._held.get(key) is entry:
                del self._held[key]
                self._forget(entry)
            elif entry.stale and entry.users == 0:
                os.close(entry.fd)

    def _forget(self, entry: _Held) -> None:
        """(Under the lock, ``entry`` out of the map.) Close it, or once unused."""
        entry.stale = True
        if entry.users == 0:
            os.close(entry.fd)

    def _evict(self) -> None:
        """(Under the lock.) Close the least recently used unleased folders over the limit."""
        excess = len(self._held) - self._limit
        if excess <= 0:
            return
        for key in [k for k, e in self._held.items() if e.users == 0][:excess]:
            self._forget(self._held.pop(key))


def _root_identity(root: str) -> tuple[int, int] | None:
    """What the root's path leads to now (its last component not followed)."""
    try:
        info = os.stat(root, follow_symlinks=False)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _entry_identity(folder: int, name: str) -> tuple[int, int] | None:
    """What ``name`` in the open ``folder`` is now (a symlink not followed)."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return None
    return info.st_dev, info.st_ino
