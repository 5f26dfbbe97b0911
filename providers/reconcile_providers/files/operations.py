"""The files provider's filesystem operations, each confined to its root.

Every function takes the object's root and absolute path and works through
:func:`~reconcile_providers.files.walking.descend`: the folder that holds the entry is reached from
the root by descriptors, and the entry itself is named relative to that folder, so no
path is resolved twice and no symlink is followed (see :mod:`reconcile_providers.files.walking`).
Writes are atomic: a temporary in the same folder, marked and locked first, written,
fsynced and renamed over the target, then the folder fsynced; a reader sees the old entry
or the new one, never half of either, and a crash leaves at most a marked temporary that
the next write or delete of the same entry takes back, and a process's first write into
the folder sweeps (:mod:`reconcile_providers.files.sweeping`).

These functions block (fsync); the client runs writes in a worker thread and the short
reads of ``observe`` inline. They raise TransientError for a symlink in the way (on the
way or in place of the entry: whoever swapped it in may swap it back, and the next try
repairs the object then), PermanentError for what retrying cannot fix (a folder where a
file should be), NotOwnedError for an entry that is not ours, and plain OSError for the
rest, which the client translates.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable

import attrs

from reconcile.errors import NotOwnedError, PermanentError, TransientError
from reconcile_providers.files.marking import PARENT, read_mark, write_mark
from reconcile_providers.files.sweeping import sweep
from reconcile_providers.files.walking import (
    DIRECTORY_FLAGS,
    FILE_FLAGS,
    RENAME_NOREPLACE,
    descend,
    entry_stat,
    kind_of,
    make_temporary_file,
    make_temporary_folder,
    open_entry,
    open_existing,
    read_all,
    remove_abandoned,
    rename_at,
    slot_name,
)

__all__ = [
    "Found",
    "Sweeper",
    "adopt",
    "chmod",
    "lstat_entry",
    "read_directory",
    "read_file",
    "remove_directory",
    "remove_file",
    "write_directory",
    "write_file",
]

#: Called with an open folder before the first write into it (sweeps leftovers once).
Sweeper = Callable[[int], None]


@attrs.frozen
class Found:
    """What observing found at a path: its stat, its owner mark, a file's bytes."""

    info: os.stat_result
    mark: str | None
    data: bytes = b""


def lstat_entry(root: str, path: str) -> os.stat_result | None:
    """The entry's own stat (a symlink is not followed); None when it is missing."""
    with descend(root, path) as found:
        return None if found is None else entry_stat(*found)


def read_file(root: str, path: str) -> Found | None:
    """The file's bytes, stat and mark; None when it is missing. Anything but a regular
    file there is an error (see :func:`~reconcile_providers.files.walking.open_existing`)."""
    opened = open_existing(root, path)
    if opened is None:
        return None
    handle, info = opened
    try:
        return Found(info, read_mark(handle), read_all(handle, info.st_size))
    finally:
        os.close(handle)


def read_directory(root: str, path: str) -> Found | None:
    """The folder's stat and mark; None when it is missing."""
    opened = open_existing(root, path, folder=True)
    if opened is None:
        return None
    handle, info = opened
    try:
        return Found(info, read_mark(handle))
    finally:
        os.close(handle)


def _check_owner(folder: int, name: str, path: str, owners: tuple[str | None, ...]) -> os.stat_result | None:
    """The entry's stat, after checking it is missing or carries one of ``owners``."""
    info = entry_stat(folder, name)
    if info is None:
        return None
    if stat.S_ISLNK(info.st_mode):
        # Not anybody's resource but something in the way (a symlink swapped in for our
        # file, mid-write), which may be swapped back: tried again, never followed.
        raise TransientError(f"{path} is {kind_of(info)}; it is left alone")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise NotOwnedError(f"{path} is {kind_of(info)}, not created by this resource")
    flags = DIRECTORY_FLAGS if stat.S_ISDIR(info.st_mode) else FILE_FLAGS
    try:
        handle = open_entry(folder, name, flags, path)
    except FileNotFoundError:
        return None
    try:
        mark = read_mark(handle)
    finally:
        os.close(handle)
    if mark not in owners:
        raise NotOwnedError(f"{path} exists and was not created by this resource")
    return info


def write_file(root: str, path: str, data: bytes, mode_and_mark: tuple[int, str], sweeper: Sweeper) -> None:
    """Write the file atomically with its mode and mark, making missing folders. An
    existing entry must be ours (``mark``). Where there was nothing, the file is put in
    place only if there still is nothing (``RENAME_NOREPLACE``): of two writers racing
    for one path (two objects declaring it, or somebody by hand) one wins and the other
    finds the winner's file, which is not its own (NotOwned), instead of replacing it
    and recording a create it then does not own."""
    mode, mark = mode_and_mark
    with descend(root, path, create=True) as found:
        assert found is not None  # create=True makes the folders
        folder, name = found
        sweeper(folder)
        existing = _check_owner(folder, name, path, (mark,))
        with make_temporary_file(folder, name, mark) as (handle, temporary):
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
            os.fchmod(handle, mode)
            os.fsync(handle)
            if existing is None:
                try:
                    rename_at(folder, temporary, name, RENAME_NOREPLACE)
                except FileExistsError:
                    _check_owner(folder, name, path, (mark,))  # NotOwned unless it is ours
                    os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
            else:
                os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        os.fsync(folder)


def write_directory(root: str, path: str, mode: int, mark: str, sweeper: Sweeper) -> None:
    """Make the folder with its mode and mark in one step, or bring an existing one
    (ours, or made as a parent) to the mode and mark."""
    with descend(root, path, create=True) as found:
        assert found is not None
        folder, name = found
        sweeper(folder)
        if _check_owner(folder, name, path, (mark, PARENT)) is None:
            with make_temporary_folder(folder, name, mode, mark) as temporary:
                try:
                    rename_at(folder, temporary, name, RENAME_NOREPLACE)
                except FileExistsError:
                    os.rmdir(temporary, dir_fd=folder)
                    raise TransientError(f"{path} appeared while it was being made") from None
            os.fsync(folder)
            return
        handle = open_entry(folder, name, DIRECTORY_FLAGS, path)
        try:
            os.fchmod(handle, mode)
            write_mark(handle, mark)
        finally:
            os.close(handle)
        os.fsync(folder)


def adopt(root: str, path: str, mark: str, *, directory: bool) -> None:
    """Mark the existing file (or folder) as ``mark``'s, changing nothing else; a symlink,
    or an entry of the other type, is refused."""
    with descend(root, path) as found:
        info = None if found is None else entry_stat(*found)
        if found is None or info is None:
            raise PermanentError(f"{path} does not exist: nothing to adopt")
        folder, name = found
        wanted = stat.S_ISDIR if directory else stat.S_ISREG
        if not wanted(info.st_mode):
            as_what = "a directory" if directory else "a file"
            raise PermanentError(f"{path} is {kind_of(info)}: it cannot be adopted as {as_what}")
        handle = open_entry(folder, name, DIRECTORY_FLAGS if directory else FILE_FLAGS, path)
        try:
            write_mark(handle, mark)
        finally:
            os.close(handle)
        os.fsync(folder)


def chmod(root: str, path: str, mode: int, mark: str) -> None:
    """Change only the mode of our file."""
    with descend(root, path) as found:
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        folder, name = found
        _check_owner(folder, name, path, (mark,))
        os.chmod(name, mode, dir_fd=folder, follow_symlinks=False)


def remove_file(root: str, path: str, mark: str | None) -> None:
    """Remove the file (a missing one is removed already); with ``mark``, only ours. A
    temporary a killed write of it abandoned goes too."""
    with descend(root, path) as found:
        if found is None:
            return
        folder, name = found
        remove_abandoned(folder, slot_name(name))
        info = entry_stat(folder, name)
        if info is None:
            return
        if mark is not None:
            _check_owner(folder, name, path, (mark,))
        elif stat.S_ISDIR(info.st_mode):
            raise PermanentError(f"{path} is a directory; a File declared absent removes only files")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=folder)
            os.fsync(folder)


def remove_directory(root: str, path: str, mark: str) -> None:
    """Remove our folder once empty, sweeping our leftovers in it first; TransientError
    naming what is still inside."""
    with descend(root, path) as found:
        if found is None:
            return
        folder, name = found
        if _check_owner(folder, name, path, (mark,)) is None:
            return
        inner = open_entry(folder, name, DIRECTORY_FLAGS, path)
        try:
            sweep(inner)
            try:
                os.rmdir(name, dir_fd=folder)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                entries = sorted(os.listdir(inner))
                shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")  # noqa: PLR2004
                raise TransientError(f"{path} is not empty yet ({shown})") from None
        finally:
            os.close(inner)
        os.fsync(folder)
