"""Sources: reading a ``File``'s ``source`` confined, and noticing when it changed.

A source is read by the process that admits the manifest and again by the runner, which
may run as another user (root, say). Three rules keep that from publishing what the
author could not read:

* **Confined to source roots**: the folders given as ``source_roots`` in the provider
  config (``reconcile --source-root DIR``), by default the manifest's own folder. The
  file is reached by :func:`~reconcile_providers.files.walking.descend` from its source root, so a
  symlink anywhere on the way, planted before or after admission, is refused.
* **Regular files only**: a FIFO, a device, a socket, or a file of a pseudo filesystem
  (``/proc``, ``/sys``: ``/proc/self/environ`` looks like a regular file) is refused.
* **Fingerprinted at admission**: the spec records ``source_digest`` (``sha256:...``;
  for a ``sensitive`` file, whose digest could be brute-forced from the log, the file's
  identity ``file:<device>:<inode>:<size>:<mtime ns>`` instead). The runner refuses a
  source that no longer matches: edited, replaced, or swapped for something else. A
  changed source is applied again, which records the change in the history.
"""

from __future__ import annotations

import hashlib
import os

from reconcile.errors import PermanentError, TransientError
from reconcile_providers.files.walking import open_existing, read_all

__all__ = ["PSEUDO_FILESYSTEMS", "SourceError", "fingerprint", "read_source"]

#: Folders whose files are views of the kernel, never content to publish.
PSEUDO_FILESYSTEMS = ("/proc", "/sys", "/dev")


class SourceError(ValueError):
    """A source that may not be read: the message says why."""


def fingerprint(data: bytes, info: os.stat_result, *, sensitive: bool) -> str:
    """What admission records about a source, to be compared when the runner reads it."""
    if sensitive:
        return f"file:{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def _pseudo(path: str) -> bool:
    return any(path == top or path.startswith(top + os.sep) for top in PSEUDO_FILESYSTEMS)


def read_source(source: str, source_root: str) -> tuple[bytes, os.stat_result]:
    """The bytes of ``source`` and its ``fstat``, reached from ``source_root`` without
    following a symlink; SourceError when it is missing or not a plain regular file."""
    if _pseudo(source):
        raise SourceError(f"{source} is a kernel pseudo-file, not content")
    try:
        opened = open_existing(source_root, source)
    except (PermanentError, TransientError) as exc:
        # A symlink in the way is transient for a target; for a source it is refused
        # until the manifest is applied again, like any other change of the source.
        raise SourceError(str(exc)) from None
    except OSError as exc:
        raise SourceError(f"{source}: {exc.strerror}") from None
    if opened is None:
        raise SourceError(f"{source} does not exist")
    handle, info = opened
    try:
        if os.fstatvfs(handle).f_blocks == 0:
            raise SourceError(f"{source} lies on a pseudo filesystem, not a disk")
        return read_all(handle, info.st_size), info
    except OSError as exc:
        raise SourceError(f"{source}: {exc.strerror}") from None
    finally:
        os.close(handle)
