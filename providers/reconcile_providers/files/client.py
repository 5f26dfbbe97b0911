"""The files provider's client: observe, create, update and delete files and
directories on the local filesystem, each idempotent.

* ``observe`` only reads (the entry's stat, its owner mark, a file's content) and never
  writes.
* Every step is confined to the object's root by directory descriptors, following no
  symlink (:mod:`reconcile_providers.files.operations`): a folder swapped for a symlink, before or
  during a write, stops the write or the read with an error that names it, and nothing
  outside the root is read or written. A symlink is a TransientError (the swap may be
  undone: the object is tried again with backoff and repaired then); a folder where a
  file goes, and what the spec or the runner's config gets wrong, a PermanentError.
* Writes are atomic, and missing parent folders are made marked ``parent`` in one step.
  A ``Directory`` resource for one of them, not yet created, observes it as missing, and
  its create takes it over: the folder the engine made for a declared Directory is that
  Directory's, created once in its history, whichever reconciled first.
* A ``source`` is read confined to its source root and must still match the fingerprint
  recorded at admission (:mod:`reconcile_providers.files.sourcing`).

Blocking calls that may wait on the disk (fsync) run in a worker thread; the short reads
of ``observe`` run inline, which is cheaper than a thread hop for small files.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import stat
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import reconcile
from reconcile.annotations import ANNOTATION_CREATE_SUCCEEDED, ANNOTATION_MANAGEMENT_POLICY
from reconcile.errors import PermanentError, TransientError
from reconcile_providers.files.confinement import check_still_confined, inside
from reconcile_providers.files.describing import describe_content, describe_mode, digest
from reconcile_providers.files.kinds import (
    DirectorySpec,
    FileSpec,
    allowed_roots,
    parse_mode,
    special_mode_error,
)
from reconcile_providers.files.marking import PARENT
from reconcile_providers.files.operations import (
    adopt,
    chmod,
    lstat_entry,
    read_directory,
    read_file,
    remove_directory,
    remove_file,
    write_directory,
    write_file,
)
from reconcile_providers.files.sourcing import SourceError, fingerprint, read_source
from reconcile_providers.files.sweeping import sweep

__all__ = ["FilesClient"]

AnyResource = reconcile.Resource[Any, Any]
#: What retrying will not fix: a file or folder of the wrong type in the way (a conflict
#: made by hand), a name too long. Not ELOOP: a symlink may be swapped back (a transient
#: error, see :mod:`reconcile_providers.files.walking`).
_SPEC_ERRORS = {errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG}
_Result = TypeVar("_Result")


def _creates(resource: AnyResource) -> bool:
    """Whether the engine is to create ``resource``: its create is not recorded as done,
    and its management policy (the documented annotation) lets the engine write."""
    annotations = resource.metadata.annotations
    return (
        ANNOTATION_CREATE_SUCCEEDED not in annotations
        and annotations.get(ANNOTATION_MANAGEMENT_POLICY, "Full") == "Full"
    )


def _translate(path: str, exc: OSError) -> Exception:
    reason = exc.strerror or str(exc)
    if exc.errno in _SPEC_ERRORS:
        return PermanentError(f"{path}: {reason}")
    if exc.errno == errno.ENOSPC:
        return TransientError(f"{path}: disk full ({reason})")
    return TransientError(f"{path}: {reason}")


def _confined_call(path: str, function: Callable[..., _Result], *args: Any) -> _Result:
    try:
        return function(*args)
    except OSError as exc:
        raise _translate(path, exc) from exc


class FilesClient:
    """observe / create / update / delete for ``File`` and ``Directory``."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        config = config or {}
        #: The roots this process may write under; None: each object's own root only.
        self.allowed: Sequence[str] | None = allowed_roots(config)
        #: The source roots this process may read sources under; None: each object's own.
        self.source_roots: Sequence[str] | None = allowed_roots(config, key="source_roots")
        self._config = config
        # Folders (device, inode) already swept of leftover temporaries by this client.
        self._swept: set[tuple[int, int]] = set()
        self._swept_lock = threading.Lock()

    # -- the contract ----------------------------------------------------------------------

    async def observe(self, resource: AnyResource) -> reconcile.Observation:
        """Read the file or directory; never write."""
        spec = resource.spec
        self._confined(spec)
        if isinstance(spec, DirectorySpec):
            return self._observe_directory(resource)
        return self._observe_file(resource)

    async def create(self, resource: AnyResource) -> reconcile.Created | None:
        """Create it, marked as ours; one that exists and is ours is brought to the spec.
        Returns what holds after it (what was written), so the engine need not look again."""
        self._confined(resource.spec)
        written = await self._write(resource)
        return None if written is None else reconcile.Created(observation=written)

    async def update(
        self,
        resource: AnyResource,
        observation: reconcile.Observation,  # noqa: ARG002 - a summary for people; the file is re-read
    ) -> reconcile.Observation | None:
        """Bring it to the spec: rewrite the content, or only change the mode. Returns what
        holds after it (what was written), so the engine need not look again."""
        spec = resource.spec
        self._confined(spec)
        if isinstance(spec, FileSpec):
            if spec.ensure == "absent":
                await self._thread(spec.path, remove_file, spec.root, spec.path, None)
                return _absence(resource, present=False)
            declared = self._declared(spec)
            if self._holds(spec, declared):  # only the mode differs: no rewrite
                mode, uid = self._mode(spec), resource.metadata.uid
                await self._thread(spec.path, chmod, spec.root, spec.path, mode, uid)
                return _file_observation(spec, declared, mode, uid, declared=declared, wanted=mode)
        return await self._write(resource)

    async def delete(self, resource: AnyResource) -> None:
        """Remove it (a missing one is already deleted); an absent-file resource deletes
        nothing; a folder is removed only once empty (our leftovers in it swept first)."""
        spec = resource.spec
        if isinstance(spec, FileSpec) and spec.ensure == "absent":
            return
        self._confined(spec)
        uid = resource.metadata.uid
        if isinstance(spec, DirectorySpec):
            await self._thread(spec.path, remove_directory, spec.root, spec.path, uid)
        else:
            await self._thread(spec.path, remove_file, spec.root, spec.path, uid)

    async def adopt(self, resource: AnyResource) -> None:
        """Take over an existing file or folder that is not ours (``reconcile adopt``):
        mark it as this resource's; the next reconcile brings it to the spec."""
        spec = resource.spec
        self._confined(spec)
        if isinstance(spec, FileSpec) and spec.ensure == "absent":
            return  # a rule about absence owns nothing
        directory = isinstance(spec, DirectorySpec)
        marking = functools.partial(adopt, directory=directory)
        await self._thread(spec.path, marking, spec.root, spec.path, resource.metadata.uid)

    async def close(self) -> None:
        """Nothing to release."""

    # -- helpers -----------------------------------------------------------------------------

    def _confined(self, spec: FileSpec | DirectorySpec) -> None:
        if spec.root is None:
            raise PermanentError(f"{spec.path}: no root recorded; apply the resource again")
        check_still_confined(spec.path, spec.root, self.allowed)

    def _mode(self, spec: FileSpec | DirectorySpec) -> int:
        mode = parse_mode(spec.mode)
        if mode is None:
            raise PermanentError(f"{spec.path}: mode {spec.mode!r} is not an octal permission")
        refused = special_mode_error(mode, self._config)
        if refused is not None:
            raise PermanentError(f"{spec.path}: mode {refused} (of the runner)")
        return mode

    def _sweep_once(self, folder: int) -> None:
        """Sweep a folder's leftover temporaries the first time this client writes into it."""
        info = os.fstat(folder)
        key = (info.st_dev, info.st_ino)
        with self._swept_lock:
            if key in self._swept:
                return
            self._swept.add(key)
        sweep(folder)

    def _holds(self, spec: FileSpec, declared: bytes) -> bool:
        """Whether the file on disk holds the ``declared`` bytes."""
        found = _confined_call(spec.path, read_file, spec.root, spec.path)
        return found is not None and found.data == declared

    def _declared(self, spec: FileSpec) -> bytes:
        """The bytes the file should hold: inline, or the source read confined and checked
        against the fingerprint admission recorded."""
        if spec.source is None:
            return spec.inline()
        if spec.source_root is None or spec.source_digest is None:
            message = f"source {spec.source}: admitted before sources were confined; apply it again"
            raise PermanentError(message)
        if self.source_roots is not None and not any(inside(spec.source_root, r) for r in self.source_roots):
            message = (
                f"source {spec.source}: its source root {spec.source_root} is outside "
                "the source roots this runner may read"
            )
            raise PermanentError(message)
        try:
            data, info = read_source(spec.source, spec.source_root)
        except SourceError as exc:
            raise PermanentError(f"source {exc}") from None
        if fingerprint(data, info, sensitive=spec.sensitive) != spec.source_digest:
            message = f"source {spec.source} changed since it was applied; apply again to publish it"
            raise PermanentError(message)
        return data

    @staticmethod
    async def _thread(path: str, function: Callable[..., None], *args: Any) -> None:
        await asyncio.to_thread(_confined_call, path, function, *args)

    async def _write(self, resource: AnyResource) -> reconcile.Observation | None:
        """Write it; what then holds (the mode and mark set, the bytes written), or None
        for a File declared absent (nothing written)."""
        spec = resource.spec
        uid = resource.metadata.uid
        mode = self._mode(spec)
        if isinstance(spec, DirectorySpec):
            await self._thread(spec.path, write_directory, spec.root, spec.path, mode, uid, self._sweep_once)
            return _directory_observation(mode, mode, uid, [])
        if spec.ensure != "present":
            return None
        data = self._declared(spec)
        writing = (mode, uid)
        await self._thread(spec.path, write_file, spec.root, spec.path, data, writing, self._sweep_once)
        return _file_observation(spec, data, mode, uid, declared=data, wanted=mode)

    def _observe_file(self, resource: AnyResource) -> reconcile.Observation:
        spec: FileSpec = resource.spec
        if spec.ensure == "absent":
            # Only its presence is looked at (see _absence).
            present = _confined_call(spec.path, lstat_entry, spec.root, spec.path) is not None
            return _absence(resource, present=present)
        found = _confined_call(spec.path, read_file, spec.root, spec.path)
        if found is None:
            return reconcile.Observation(exists=False)
        mode = stat.S_IMODE(found.info.st_mode)
        declared, wanted = self._declared(spec), self._mode(spec)
        return _file_observation(spec, found.data, mode, found.mark, declared=declared, wanted=wanted)

    def _observe_directory(self, resource: AnyResource) -> reconcile.Observation:
        spec: DirectorySpec = resource.spec
        found = _confined_call(spec.path, read_directory, spec.root, spec.path)
        if found is None:
            return reconcile.Observation(exists=False)
        owner = found.mark
        if owner == PARENT and _creates(resource):
            # Made by this provider as some file's parent, before this Directory's create:
            # the folder is the one the engine makes for it, so it is to be created, and
            # create takes it over (marks it, sets the mode). Reported as found, it would be
            # recorded as somebody else's taken over ("found in place", ``plan``'s "adopt")
            # after an update: a history the engine did not live.
            return reconcile.Observation(exists=False)
        changes = []
        if owner == PARENT:
            # Created, then removed and made again as some file's parent: ours again (the
            # update marks it).
            owner = resource.metadata.uid
            changes.append("taking back the folder made again as a parent of a file")
        return _directory_observation(stat.S_IMODE(found.info.st_mode), self._mode(spec), owner, changes)


def _absence(resource: AnyResource, *, present: bool) -> reconcile.Observation:
    """A File declared absent: the resource "exists" as a rule; it is up to date when the
    file is gone. Removing what the user declared absent is the point, so the engine may
    act whoever wrote the file."""
    path = resource.spec.path
    return reconcile.Observation(
        exists=True,
        up_to_date=not present,
        observed={"present": present},
        diff=f"{path} exists; declared absent" if present else "",
        owner=resource.metadata.uid,
        found=f"nothing to create: {path} is declared absent and is not there",
    )


def _file_observation(
    spec: FileSpec, on_disk: bytes, mode: int, owner: str | None, *, declared: bytes, wanted: int
) -> reconcile.Observation:
    """A file found (or just written) holding ``on_disk`` with ``mode``, compared with the
    spec's bytes and mode."""
    changes = []
    if on_disk != declared:
        changes.append(describe_content(on_disk, declared, sensitive=spec.sensitive))
    if mode != wanted:
        changes.append(describe_mode(mode, wanted))
    observed = {"size": len(on_disk), "mode": f"{mode:04o}"}
    if not spec.sensitive:  # a digest of a short secret can be brute-forced
        observed["sha256"] = digest(on_disk)
    return reconcile.Observation.present(changes, observed=observed, owner=owner, separator="\n")


def _directory_observation(
    mode: int, wanted: int, owner: str | None, changes: list[str]
) -> reconcile.Observation:
    """A folder found (or just made) with ``mode``, compared with the spec's."""
    if mode != wanted:
        changes.append(describe_mode(mode, wanted))
    observed = {"mode": f"{mode:04o}"}
    return reconcile.Observation.present(changes, observed=observed, owner=owner, separator="\n")
