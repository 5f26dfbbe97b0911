"""Confinement: the files provider writes only inside the root directories it was given.

Two checks, with the same rule:

* at **admission** (:func:`confine`), before anything is stored: a relative ``path``
  resolves against the first root, an absolute one must lie inside some root; ``..``
  that climbs out, and a symlink on the way, are refused with the field path and the
  reason. The admitted spec carries the absolute path and the root that contains it, so
  the stored object means the same thing to every process.
* at **every read and write** (:func:`check_still_confined`, then
  :mod:`reconcile_providers.files.walking`): the root must be one this process may use, and the
  entry is reached from the root by directory descriptors following no symlink, so a
  symlink planted after admission (even mid-write) carries nothing in or out. A root
  or path outside its roots fails the reconcile with a PermanentError; a symlink found
  on the way, with a TransientError, since it may be swapped back (Synced=False says why
  either way).

Roots are compared after ``os.path.realpath``, so a root reached through a symlink
(``/tmp`` on some systems) still works; below a root, no symlink is followed.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from reconcile.errors import FieldError, InvalidError, PermanentError

__all__ = ["check_still_confined", "confine", "inside", "real_roots"]


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies under it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def real_roots(roots: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The roots as absolute, symlink-free paths (resolved once per process and root:
    admission of a thousand manifests should not resolve the same root a thousand times;
    every write checks the real path again anyway)."""
    return [_real(os.path.abspath(os.fspath(root))) for root in roots]


@functools.lru_cache(maxsize=256)
def _real(path: str) -> str:
    return os.path.realpath(path)


def _first_link(path: str, root: str) -> str | None:
    """The first symlink between ``root`` and ``path`` (none are followed below a root).
    One ``lstat`` per part, which says both whether it is a link and whether it exists
    (``os.path.islink`` then ``os.path.lexists`` made two): admission runs on the event
    loop, and each system call there lets another thread take the GIL."""
    relative = os.path.relpath(path, root)
    current = root
    for part in Path(relative).parts:
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except (OSError, ValueError):  # as lexists: missing (or not a path the OS takes)
            return None
        if stat.S_ISLNK(mode):
            return current
    return None


def confine(path: str, root: str | None, allowed: Sequence[str] | None) -> tuple[str, str]:
    """Resolve a spec's ``path`` (and optional ``root``) against the allowed roots.

    Returns the absolute path and the root that contains it. ``allowed`` None means no
    configured roots: then the spec must name its root itself (an object admitted
    before, read back by a process that was given no roots).
    """
    if root is not None:
        chosen = os.path.realpath(root)
        if allowed is not None and not any(inside(chosen, a) for a in allowed):
            roots = ", ".join(allowed)
            raise InvalidError([FieldError("root", f"{chosen} is outside the allowed roots ({roots})")])
        candidates = [chosen]
    elif allowed:
        candidates = list(allowed)
    else:
        message = (
            "no root directory to confine this path to: give the files provider its roots "
            "(reconcile --root DIR, or the provider config files.roots)"
        )
        raise InvalidError([FieldError("path", message)])
    if os.path.isabs(path):
        resolved = os.path.normpath(path)
        chosen = next((c for c in candidates if inside(resolved, c)), "")
        if not chosen:
            roots = ", ".join(candidates)
            raise InvalidError([FieldError("path", f"{resolved} is outside the allowed roots ({roots})")])
    else:
        chosen = candidates[0]
        resolved = os.path.normpath(os.path.join(chosen, path))
        if not inside(resolved, chosen):
            raise InvalidError([FieldError("path", f"{path} escapes the root {chosen} (through ..)")])
    if resolved == chosen:
        raise InvalidError([FieldError("path", f"must name an entry inside the root {chosen}, not the root")])
    link = _first_link(resolved, chosen)
    if link is not None:
        message = (
            f"leads through the symlink {link} -> {os.readlink(link)}; the files provider follows no symlinks"
        )
        raise InvalidError([FieldError("path", message)])
    return resolved, chosen


def check_still_confined(path: str, root: str, allowed: Sequence[str] | None) -> None:
    """Refuse (PermanentError) a stored path outside its root, and a root outside the
    roots this process was given; what changed on disk since admission is the walk's
    business (:mod:`reconcile_providers.files.walking`)."""
    if allowed is not None and not any(inside(root, a) for a in allowed):
        raise PermanentError(f"{path}: its root {root} is outside the roots this runner may write")
    if not inside(os.path.normpath(path), root) or path == root:
        raise PermanentError(f"{path} is outside its root {root}")
