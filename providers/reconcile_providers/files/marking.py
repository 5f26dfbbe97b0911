"""Owner marks: how the files provider tells what it created from what it found.

A file or directory the provider creates carries the extended attribute
``user.reconcile.owner`` with the uid of the resource that declared it (set on the
temporary file before the rename, so the mark and the content appear together). A
directory the provider made only because a file needed a parent carries the mark
``parent``: a ``Directory`` resource for it takes it over as its create, instead of
refusing it as foreign.

Extended attributes need Linux and a filesystem that keeps ``user.*`` attributes (ext4,
xfs, btrfs, tmpfs on recent kernels); elsewhere the provider refuses to write, with a
PermanentError that says so, rather than write files it could not recognise later.
"""

from __future__ import annotations

import errno
import os

from reconcile.errors import PermanentError

__all__ = ["ATTRIBUTE", "PARENT", "read_mark", "write_mark"]

ATTRIBUTE = "user.reconcile.owner"
PARENT = "parent"
_UNSUPPORTED = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM}


def read_mark(target: str | int) -> str | None:
    """The mark on a path or open file descriptor; None when it has none."""
    try:
        return os.getxattr(target, ATTRIBUTE, follow_symlinks=isinstance(target, int)).decode()
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOENT, *_UNSUPPORTED):
            return None
        raise


def write_mark(target: str | int, mark: str) -> None:
    """Mark a path or open file descriptor as made by ``mark``."""
    try:
        os.setxattr(target, ATTRIBUTE, mark.encode(), follow_symlinks=isinstance(target, int))
    except OSError as exc:
        if exc.errno in _UNSUPPORTED:
            where = target if isinstance(target, str) else "this filesystem"
            message = (
                f"cannot mark {where} as ours: the filesystem does not keep user.* extended "
                "attributes, which the files provider needs to recognise what it created"
            )
            raise PermanentError(message) from exc
        raise
