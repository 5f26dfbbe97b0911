"""Walking from a root down by directory file descriptors: how the files provider reads
and writes without ever resolving a path twice.

A check on a path ("is it still inside the root?") followed by an operation on the same
path is a race: between the two, a folder can be swapped for a symlink to somewhere else
(``renameat2`` with ``RENAME_EXCHANGE`` makes the swap atomic) and the operation lands
outside the root. So nothing here operates on a path. :func:`descend` opens the root,
then each folder below it one component at a time with ``O_NOFOLLOW | O_DIRECTORY``
relative to the descriptor of the one above; every later step (stat, open, mkdir,
rename, unlink, chmod) names one entry relative to the last descriptor and follows no
symlink. A symlink anywhere on the way is refused, whether it points in or out: the
files provider follows no symlinks under its roots (``openat2``'s ``RESOLVE_BENEATH``
would allow the inward ones, but Python does not offer it).

Folders the provider makes for a file are created with their ``parent`` mark in one
step: made under a temporary name, marked, then renamed into place with
``RENAME_NOREPLACE``. A ``Directory`` observing the folder meanwhile sees either nothing
or a marked folder, never an unmarked one it would take for somebody else's.

A symlink the walk meets (on the way, or in place of the entry) and an entry replaced
while it was opened are TransientErrors, not PermanentErrors: a symlink under a root is
never something to follow or own, only something in the way, and whoever swapped it in
may swap the folder back without the spec changing. A permanent error would stop the
object until its spec changed or the runner restarted (the engine does not call the
provider again for it); a transient one is tried again with the queue's backoff and
repaired once the folder is back. A folder where a file goes, or a file on the way, stays
permanent: a conflict somebody made by hand, reported at once (``run --once`` does not
wait for it), as is what the stored path itself gets wrong (outside its root).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Callable, Iterator

from reconcile.errors import PermanentError, TransientError
from reconcile_providers.files.marking import PARENT, read_mark, write_mark

__all__ = [
    "DIRECTORY_FLAGS",
    "FILE_FLAGS",
    "RENAME_EXCHANGE",
    "RENAME_NOREPLACE",
    "claim_temporary",
    "components",
    "descend",
    "entry_stat",
    "kind_of",
    "make_temporary_file",
    "make_temporary_folder",
    "open_entry",
    "open_existing",
    "read_all",
    "remove_abandoned",
    "rename_at",
    "slot_name",
    "temporary_name",
    "walk",
]

#: Open a folder: never through a symlink, never a non-folder.
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Open a file to read it: never through a symlink; O_NONBLOCK so a FIFO planted where
#: a file was expected cannot hang the reader (it is refused by its type anyway).
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2

_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def components(path: str, root: str) -> list[str]:
    """The entries from ``root`` down to ``path`` (both absolute and normalised); a path
    that is not strictly below the root is refused."""
    if path == root or not path.startswith(root.rstrip(os.sep) + os.sep):
        raise PermanentError(f"{path} is outside its root {root}")
    parts = path[len(root.rstrip(os.sep)) + 1 :].split(os.sep)
    if "" in parts or "." in parts or ".." in parts:
        raise PermanentError(f"{path} is not a normalised path below {root}")
    return parts


def temporary_name(name: str) -> str:
    """``.name.<random>.tmp``: the name a write is prepared under before its rename when
    the entry's own slot (:func:`slot_name`) is taken by a write in progress."""
    return f".{name}.{secrets.token_hex(4)}.tmp"


def slot_name(name: str) -> str:
    """``.name.inflight.tmp``: the temporary name a write of ``name`` tries first. A
    writer killed before its rename leaves it behind, and the next write of the same
    entry (by this process or any other) takes it back (:func:`claim_temporary`): a
    crash's leftover lasts until that entry is written or deleted again, not until a
    new process first writes into the folder."""
    return f".{name}.inflight.tmp"


def claim_temporary(folder: int, name: str, make: Callable[[str], None]) -> str:
    """Make (``make(temporary)``, which fails with FileExistsError when the name is
    taken) the temporary a write of ``name`` is prepared under: the entry's slot, taken
    back first if a killed writer abandoned it there, or a random name while another
    write of the entry holds the slot."""
    slot = slot_name(name)
    for _ in range(2):
        try:
            make(slot)
        except FileExistsError:
            if not remove_abandoned(folder, slot):
                break
        else:
            return slot
    temporary = temporary_name(name)
    make(temporary)
    return temporary


def remove_abandoned(folder: int, name: str) -> bool:
    """Remove the temporary ``name`` if a killed writer abandoned it: it carries an owner
    mark (a writer marks only once it holds the lock) and its ``flock`` can be taken (a
    write in progress, in this process or another, holds it until after its rename).
    True when it was removed."""
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


def rename_at(folder: int, source: str, target: str, flags: int, target_folder: int | None = None) -> None:
    """``renameat2(2)`` relative to folder descriptors (``RENAME_NOREPLACE`` fails with
    FileExistsError instead of replacing; ``RENAME_EXCHANGE`` swaps two entries)."""
    destination = folder if target_folder is None else target_folder
    if _renameat2 is not None:
        result = _renameat2(folder, os.fsencode(source), destination, os.fsencode(target), flags)
        if result == 0:
            return
        error = ctypes.get_errno()
        if error not in (errno.EINVAL, errno.ENOSYS) or flags != RENAME_NOREPLACE:
            raise OSError(error, os.strerror(error), target)
    # No renameat2 (or a filesystem without it): check, then rename. The window is a
    # folder made by somebody else in the same instant, which this then replaces only
    # when it is empty.
    if entry_stat(destination, target) is not None:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
    os.rename(source, target, src_dir_fd=folder, dst_dir_fd=destination)


def entry_stat(folder: int, name: str) -> os.stat_result | None:
    """``lstat`` of one entry of a folder; None when there is none."""
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_entry(folder: int, name: str, flags: int, shown: str) -> int:
    """Open one entry of a folder without following a symlink; ``shown`` names it in
    errors. A symlink is a TransientError (see the module's docstring); FileNotFoundError
    passes through."""
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        info = entry_stat(folder, name)  # one look: a swapping loop may change it between looks
        if exc.errno == errno.ELOOP or (info is not None and stat.S_ISLNK(info.st_mode)):
            raise TransientError(f"{shown} is a symlink; the files provider follows no symlinks") from None
        if _swapped_back(info):
            raise TransientError(f"{shown} changed while it was opened") from None
        raise


def _swapped_back(info: os.stat_result | None) -> bool:
    """After opening an entry as a folder failed with ENOTDIR, what is there now (``info``,
    its lstat): whether it is a folder again (or gone), so what failed was something
    swapped in for a moment (a symlink exchanged with the folder and back), not a file
    that is in the way for good."""
    return info is None or stat.S_ISDIR(info.st_mode)


def _make_parent(folder: int, name: str) -> None:
    """Make the folder ``name`` in ``folder``, marked ``parent``, in one step."""
    with make_temporary_folder(folder, name, 0o755, PARENT) as temporary:
        try:
            rename_at(folder, temporary, name, RENAME_NOREPLACE)
        except FileExistsError:
            os.rmdir(temporary, dir_fd=folder)  # somebody made it first: use theirs
            return
    os.fsync(folder)


@contextlib.contextmanager
def make_temporary_folder(folder: int, name: str, mode: int, mark: str) -> Iterator[str]:
    """A new folder under a temporary name for ``name``, with its mode and mark, locked
    (``flock``) until the block ends so a sweep leaves it alone; removed if the block
    fails. The block renames it into place."""
    temporary = claim_temporary(folder, name, lambda t: os.mkdir(t, 0o700, dir_fd=folder))
    made = os.open(temporary, DIRECTORY_FLAGS, dir_fd=folder)
    with _locked_and_marked(folder, temporary, made, mark, os.rmdir):
        os.fchmod(made, mode)  # mkdir's mode passes through the umask
        yield temporary


@contextlib.contextmanager
def make_temporary_file(folder: int, name: str, mark: str) -> Iterator[tuple[int, str]]:
    """A new, empty file under a temporary name for ``name``, marked and locked like
    :func:`make_temporary_folder`; the block writes it and renames it into place."""
    unnamed = _unnamed_file(folder, mark, name)
    if unnamed is None:  # no O_TMPFILE here: create it named, then lock and mark it
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        opened: list[int] = []
        temporary = claim_temporary(
            folder, name, lambda t: opened.append(os.open(t, flags, 0o600, dir_fd=folder))
        )
        handle = opened[0]
    else:
        handle, temporary = unnamed
    with _locked_and_marked(folder, temporary, handle, mark, os.unlink):
        yield handle, temporary


def _unnamed_file(folder: int, mark: str, name: str) -> tuple[int, str] | None:
    """An ``O_TMPFILE`` file in ``folder``, locked and marked before it gets a name, then
    linked under the temporary name :func:`claim_temporary` gives for ``name`` (returned
    with its descriptor): a process killed at any point leaves either nothing (the
    unnamed inode goes with its last descriptor) or a marked temporary a sweep removes,
    never an unmarked one. None where the filesystem has no ``O_TMPFILE``."""
    try:
        handle = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None
        raise
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        write_mark(handle, mark)
        source = f"/proc/self/fd/{handle}"
        if not os.path.exists(source):  # no /proc to link through
            os.close(handle)
            return None
        temporary = claim_temporary(
            folder, name, lambda t: os.link(source, t, dst_dir_fd=folder, follow_symlinks=True)
        )
    except BaseException:
        os.close(handle)
        raise
    return handle, temporary


@contextlib.contextmanager
def _locked_and_marked(
    folder: int, temporary: str, handle: int, mark: str, remove: Callable[..., None]
) -> Iterator[None]:
    """Lock, then mark, a just-made temporary (a sweep takes only marked ones whose lock
    it can get); ``remove`` it if the block fails; close its descriptor either way."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        write_mark(handle, mark)
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            remove(temporary, dir_fd=folder)
        raise
    finally:
        os.close(handle)


def kind_of(info: os.stat_result) -> str:
    """What an entry is, for messages: ``a directory``, ``a symlink (not followed)``..."""
    if stat.S_ISDIR(info.st_mode):
        return "a directory"
    if stat.S_ISLNK(info.st_mode):
        return "a symlink (not followed)"
    return "not a regular file"


def open_existing(root: str, path: str, *, folder: bool = False) -> tuple[int, os.stat_result] | None:
    """An open descriptor of the regular file (or the folder) at ``path`` and its
    ``fstat``, reached by :func:`walk`; None when it is missing. Anything else there
    is an error saying what it is: a TransientError for a symlink and for an entry
    replaced while it was opened, a PermanentError for a folder where a file goes (or
    the other way round) or a special file."""
    wanted = stat.S_ISDIR if folder else stat.S_ISREG
    found = walk(root, path)
    if found is None:
        return None
    parent, name = found
    try:
        info = entry_stat(parent, name)
        if info is None:
            return None
        if not wanted(info.st_mode):
            what = f"{path} exists and is not a directory" if folder else f"{path} is {kind_of(info)}"
            if stat.S_ISLNK(info.st_mode):
                raise TransientError(what)
            raise PermanentError(what)
        try:
            handle = open_entry(parent, name, DIRECTORY_FLAGS if folder else FILE_FLAGS, path)
        except FileNotFoundError:
            return None
    finally:
        os.close(parent)
    opened = os.fstat(handle)
    if not wanted(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(handle)
        raise TransientError(f"{path} changed while it was opened")
    return handle, opened


def read_all(handle: int, size: int) -> bytes:
    """The bytes of an open regular file whose ``fstat`` said ``size``: one ``read`` of
    one byte more than that finds the end at once (a file that grew meanwhile is read on
    to its end), with no buffered reader, ``dup`` or ``close`` around it."""
    data = os.read(handle, size + 1)
    if len(data) <= size:
        return data
    chunks = [data]
    while chunk := os.read(handle, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def descend(root: str, path: str, *, create: bool = False) -> Iterator[tuple[int, str] | None]:
    """The open folder that holds ``path`` and the entry's name in it; None when a folder
    on the way is missing (and ``create`` is false). With ``create``, missing folders are
    made, marked ``parent``. A symlink on the way is a TransientError naming it, a
    non-folder a PermanentError; the descriptor is closed when the block ends."""
    found = walk(root, path, create=create)
    if found is None:
        yield None
        return
    try:
        yield found
    finally:
        os.close(found[0])


def walk(root: str, path: str, *, create: bool = False) -> tuple[int, str] | None:
    """:func:`descend` without the block, for the hot path of reading (a generator-based
    context manager per file costs more than the walk's own steps): the caller closes
    the descriptor."""
    parts = components(path, root)
    try:
        current = _open_root(root, create=create)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PermanentError(f"{path}: cannot open its root {root}: {exc.strerror}") from None
    walked = root.rstrip(os.sep)
    for part in parts[:-1]:
        walked = f"{walked}{os.sep}{part}"
        try:
            opened = _open_folder(current, part, walked, path, create=create)
        finally:
            os.close(current)
        if opened is None:
            return None
        current = opened
    return current, parts[-1]


def _open_root(root: str, *, create: bool) -> int:
    """The root, made (with its own parents) when missing and ``create``: the root is the
    operator's choice, not a resource's, so it is trusted up to itself."""
    try:
        return os.open(root, DIRECTORY_FLAGS)
    except FileNotFoundError:
        if not create:
            raise
    os.makedirs(root, 0o755, exist_ok=True)
    return os.open(root, DIRECTORY_FLAGS)


def _open_folder(folder: int, name: str, walked: str, path: str, *, create: bool) -> int | None:
    for _ in range(2):
        try:
            return os.open(name, DIRECTORY_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            if not create:
                return None
            _make_parent(folder, name)
        except OSError as exc:
            # One look at what is there now: a swapping loop may change it between looks.
            info = entry_stat(folder, name)
            if exc.errno == errno.ELOOP or (info is not None and stat.S_ISLNK(info.st_mode)):
                message = f"{path} leads through the symlink {walked}; the files provider follows no symlinks"
                raise TransientError(message) from None
            if exc.errno == errno.ENOTDIR:
                if _swapped_back(info):
                    raise TransientError(f"{path}: {walked} changed while it was opened") from None
                raise PermanentError(f"{path}: {walked} is not a directory") from None
            raise
    raise TransientError(f"{path}: {walked} keeps disappearing")
