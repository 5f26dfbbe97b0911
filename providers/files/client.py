"""The files provider's client: observe, create, update and delete files and
directories on the local filesystem, each idempotent.

* ``observe`` only reads (``lstat``, the owner mark, the content) and never writes.
* Writes are atomic: a temporary file in the same folder, written, marked, fsynced and
  renamed over the target, then the folder fsynced; a reader sees the old file or the new
  one, never half of either, and a crash leaves at most a ``.name.*.tmp`` behind.
* Missing parent folders are created (mode 0755) and marked ``parent`` so a ``Directory``
  resource for one of them adopts it.
* Every write first checks the path is still inside its root (a symlink planted after
  admission does not carry a write outside).

Blocking calls that may wait on the disk (fsync) run in a worker thread; the short reads
of ``observe`` run inline, which is cheaper than a thread hop for small files.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Sequence
from typing import Any

import reconcile
from providers.files.confinement import check_still_confined
from providers.files.describing import describe_content, describe_mode, digest
from providers.files.kinds import DirectorySpec, FileSpec, parse_mode
from providers.files.marking import PARENT, read_mark, write_mark
from reconcile.errors import NotOwnedError, PermanentError, TransientError

__all__ = ["FilesClient"]

AnyResource = reconcile.Resource[Any, Any]
_SPEC_ERRORS = {errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP}


def _translate(path: str, exc: OSError) -> Exception:
    reason = exc.strerror or str(exc)
    if exc.errno in _SPEC_ERRORS:
        return PermanentError(f"{path}: {reason}")
    return TransientError(f"{path}: {reason}")


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_parents(directory: str, root: str) -> None:
    """Create the missing folders from ``root`` down to ``directory``, marked ``parent``."""
    missing: list[str] = []
    current = directory
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current or len(current) < len(root):
            break
        current = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o755)
        except FileExistsError:
            continue
        write_mark(folder, PARENT)
        _fsync_directory(os.path.dirname(folder))


def _write_file(path: str, root: str, data: bytes, mode: int, mark: str) -> None:
    directory, name = os.path.split(path)
    _make_parents(directory, root)
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(fd, mode)
            write_mark(fd, mark)
            os.fsync(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)


def _make_directory(path: str, root: str, mode: int, mark: str) -> None:
    _make_parents(os.path.dirname(path), root)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    os.chmod(path, mode)  # mkdir's mode passes through the umask
    write_mark(path, mark)
    _fsync_directory(os.path.dirname(path))


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _translate(path, exc) from exc


class FilesClient:
    """observe / create / update / delete for ``File`` and ``Directory``."""

    def __init__(self, allowed: Sequence[str] | None) -> None:
        #: The roots this process may write under; None: each object's own root only.
        self.allowed = allowed

    # -- the contract ----------------------------------------------------------------------

    async def observe(self, resource: AnyResource) -> reconcile.Observation:
        """Read the file or directory; never write."""
        if isinstance(resource.spec, DirectorySpec):
            return self._observe_directory(resource)
        return self._observe_file(resource)

    async def create(self, resource: AnyResource) -> str | None:
        """Create it, marked as ours; one that exists and is ours is brought to the spec."""
        spec = resource.spec
        self._confined(spec)
        info = _lstat(spec.path)
        if info is not None:
            mark = read_mark(spec.path)
            if mark not in (resource.metadata.uid, PARENT if stat.S_ISDIR(info.st_mode) else None):
                raise NotOwnedError(f"{spec.path} exists and was not created by this resource")
        await self._write(resource)
        return None

    async def update(
        self,
        resource: AnyResource,
        observation: reconcile.Observation,  # noqa: ARG002 - a summary for people; the file is re-read
    ) -> None:
        """Bring it to the spec: rewrite the content, or only change the mode."""
        spec = resource.spec
        self._confined(spec)
        if isinstance(spec, FileSpec):
            if spec.ensure == "absent":
                await self._remove(spec.path)
                return
            if self._holds(spec):  # only the mode differs: no rewrite
                mode = parse_mode(spec.mode)
                assert mode is not None
                await self._run(spec.path, os.chmod, spec.path, mode)
                return
        await self._write(resource)

    async def delete(self, resource: AnyResource) -> None:
        """Remove it (a missing one is already deleted); an absent-file resource deletes
        nothing; a folder is removed only once empty."""
        spec = resource.spec
        if isinstance(spec, FileSpec) and spec.ensure == "absent":
            return
        info = _lstat(spec.path)
        if info is None:
            return
        self._confined(spec)
        if read_mark(spec.path) != resource.metadata.uid:
            raise NotOwnedError(f"{spec.path} was not created by this resource; leaving it")
        if isinstance(spec, DirectorySpec):
            try:
                await asyncio.to_thread(os.rmdir, spec.path)
            except OSError as exc:
                if exc.errno != errno.ENOTEMPTY:
                    raise _translate(spec.path, exc) from exc
                entries = sorted(os.listdir(spec.path))
                shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")  # noqa: PLR2004
                raise TransientError(f"{spec.path} is not empty yet ({shown})") from None
            return
        await self._remove(spec.path)

    async def close(self) -> None:
        """Nothing to release."""

    # -- helpers -----------------------------------------------------------------------------

    def _confined(self, spec: FileSpec | DirectorySpec) -> None:
        if spec.root is None:
            raise PermanentError(f"{spec.path}: no root recorded; apply the resource again")
        check_still_confined(spec.path, spec.root, self.allowed)

    def _holds(self, spec: FileSpec) -> bool:
        """Whether the file on disk holds the declared bytes."""
        try:
            with open(spec.path, "rb") as handle:
                return handle.read() == self._declared(spec)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _translate(spec.path, exc) from exc

    @staticmethod
    def _declared(spec: FileSpec) -> bytes:
        try:
            return spec.data()
        except OSError as exc:
            raise PermanentError(f"source {spec.source}: {exc.strerror}") from exc

    @staticmethod
    async def _run(path: str, function: Any, *args: Any) -> None:
        try:
            await asyncio.to_thread(function, *args)
        except OSError as exc:
            raise _translate(path, exc) from exc

    async def _write(self, resource: AnyResource) -> None:
        spec = resource.spec
        uid = resource.metadata.uid
        assert spec.root is not None
        mode = parse_mode(spec.mode)
        assert mode is not None
        if isinstance(spec, DirectorySpec):
            await self._run(spec.path, _make_directory, spec.path, spec.root, mode, uid)
        elif spec.ensure == "present":
            await self._run(spec.path, _write_file, spec.path, spec.root, self._declared(spec), mode, uid)

    async def _remove(self, path: str) -> None:
        def remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                _fsync_directory(os.path.dirname(path))

        await self._run(path, remove)

    def _observe_file(self, resource: AnyResource) -> reconcile.Observation:
        spec: FileSpec = resource.spec
        info = _lstat(spec.path)
        if spec.ensure == "absent":
            # Declared absent: the resource "exists" as a rule; it is up to date when the
            # file is gone. Removing what the user declared absent is the point, so the
            # engine may act whoever wrote the file.
            present = info is not None
            diff = f"{spec.path} exists; declared absent" if present else ""
            observed: dict[str, Any] = {"present": present}
            return reconcile.Observation(
                exists=True, up_to_date=not present, observed=observed, diff=diff, owner=resource.metadata.uid
            )
        if info is None:
            return reconcile.Observation(exists=False)
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise PermanentError(f"{spec.path} is {what}")
        try:
            with open(spec.path, "rb") as handle:
                on_disk = handle.read()
            owner = read_mark(spec.path)
        except FileNotFoundError:
            return reconcile.Observation(exists=False)
        except OSError as exc:
            raise _translate(spec.path, exc) from exc
        declared = self._declared(spec)
        mode, wanted = stat.S_IMODE(info.st_mode), parse_mode(spec.mode)
        assert wanted is not None
        changes = []
        same_content = on_disk == declared
        if not same_content:
            changes.append(describe_content(on_disk, declared, sensitive=spec.sensitive))
        if mode != wanted:
            changes.append(describe_mode(mode, wanted))
        observed = {"size": len(on_disk), "mode": f"{mode:04o}"}
        if not spec.sensitive:  # a digest of a short secret can be brute-forced
            observed["sha256"] = digest(on_disk)
        return reconcile.Observation(
            exists=True, up_to_date=not changes, observed=observed, diff="\n".join(changes), owner=owner
        )

    def _observe_directory(self, resource: AnyResource) -> reconcile.Observation:
        spec: DirectorySpec = resource.spec
        info = _lstat(spec.path)
        if info is None:
            return reconcile.Observation(exists=False)
        if not stat.S_ISDIR(info.st_mode):
            raise PermanentError(f"{spec.path} exists and is not a directory")
        owner = read_mark(spec.path)
        mode, wanted = stat.S_IMODE(info.st_mode), parse_mode(spec.mode)
        assert wanted is not None
        diff = "" if mode == wanted else describe_mode(mode, wanted)
        if owner == PARENT:
            # Made by this provider as some file's parent: adopt it (update marks it ours).
            owner = resource.metadata.uid
            diff = "\n".join(filter(None, ["adopting the folder made as a parent of a file", diff]))
        return reconcile.Observation(
            exists=True, up_to_date=not diff, observed={"mode": f"{mode:04o}"}, diff=diff, owner=owner
        )
