"""The ``File`` and ``Directory`` kinds of ``files.reconcile.dev/v1``: their specs, the
checks that need only the spec (``validate``), and admission (``admit``): confinement to
the roots, the canonical mode, the source file resolved against the manifest's folder.

A path is its own identity (deterministic): a create interrupted by a crash is simply
retried, and finds the file it wrote by the owner mark.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import attrs

import reconcile
from providers.files.confinement import confine, real_roots
from reconcile.errors import FieldError, InvalidError

__all__ = ["API_VERSION", "DIRECTORY", "FILE", "DirectorySpec", "FileSpec", "allowed_roots", "parse_mode"]

API_VERSION = "files.reconcile.dev/v1"
ENSURE_VALUES = ("present", "absent")
_MODE = re.compile(r"^(?:0o|0)?([0-7]{3,4})$")


@attrs.frozen
class FileSpec:
    """A regular file: where, what it holds (at most one of ``content``,
    ``content_base64``, ``source``; none means empty), its permissions, and whether it
    should exist. ``sensitive`` keeps the content out of the event log. ``root`` is filled
    in at admission: the root the path was confined to."""

    path: str
    content: str | None = None
    content_base64: str | None = None
    source: str | None = None
    mode: str = "0644"
    ensure: str = "present"
    #: Keep the content out of the event log: drift is summarised by sizes only, and no
    #: digest is reported. (Give the content as ``source``: inline content is part of the
    #: declared spec, which the log keeps.)
    sensitive: bool = False
    root: str | None = None

    def data(self) -> bytes:
        """The bytes the file should hold (reads ``source``; OSError when it is gone)."""
        if self.content_base64 is not None:
            return base64.b64decode(self.content_base64)
        if self.source is not None:
            with open(self.source, "rb") as handle:
                return handle.read()
        return (self.content or "").encode()


@attrs.frozen
class DirectorySpec:
    """A directory and its permissions; ``root`` is filled in at admission."""

    path: str
    mode: str = "0755"
    root: str | None = None


def parse_mode(mode: str) -> int | None:
    """``"0644"``, ``"644"`` or ``"0o644"`` as an int; None when it is not octal permissions."""
    match = _MODE.match(mode)
    return int(match.group(1), 8) if match else None


def _path_errors(path: str) -> Iterator[FieldError]:
    if not path:
        yield FieldError("path", "must not be empty")
    elif "\0" in path:
        yield FieldError("path", "must not contain a NUL character")


def _mode_errors(mode: str) -> Iterator[FieldError]:
    if parse_mode(mode) is None:
        yield FieldError("mode", f'{mode!r} is not an octal permission such as "0644"')


def validate_file(spec: FileSpec) -> Iterator[FieldError]:
    """Checks that need only the spec."""
    yield from _path_errors(spec.path)
    yield from _mode_errors(spec.mode)
    if spec.ensure not in ENSURE_VALUES:
        yield FieldError("ensure", f"must be one of {', '.join(ENSURE_VALUES)}, not {spec.ensure!r}")
    given = [name for name in ("content", "content_base64", "source") if getattr(spec, name) is not None]
    if len(given) > 1:
        yield FieldError(given[1], f"{' and '.join(given)} are mutually exclusive: give at most one")
    if spec.ensure == "absent" and given:
        yield FieldError(given[0], "a file that should be absent has no content")
    if spec.content_base64 is not None:
        try:
            base64.b64decode(spec.content_base64, validate=True)
        except binascii.Error as exc:
            yield FieldError("content_base64", f"not valid base64 ({exc})")


def validate_directory(spec: DirectorySpec) -> Iterator[FieldError]:
    """Checks that need only the spec."""
    yield from _path_errors(spec.path)
    yield from _mode_errors(spec.mode)


def allowed_roots(config: Any, origin: os.PathLike[str] | None = None) -> list[str] | None:
    """The roots a config allows (``roots``: a list of folders, or one folder); without
    any, the folder of the manifest; None when neither is known."""
    roots = config.get("roots") if config else None
    if isinstance(roots, str | os.PathLike):
        roots = [roots]
    if roots:
        return real_roots(roots)
    if origin is not None:
        return real_roots([os.path.dirname(os.path.abspath(origin))])
    return None


def _canonical_mode(mode: str) -> str:
    value = parse_mode(mode)
    assert value is not None  # validate ran first
    return f"{value:04o}"


def _source(source: str, origin: os.PathLike[str] | None) -> str:
    if not os.path.isabs(source):
        if origin is None:
            reason = "a relative source needs a manifest file to be relative to: give an absolute path"
            raise InvalidError([FieldError("source", reason)])
        source = os.path.join(os.path.dirname(os.path.abspath(origin)), source)
    source = os.path.normpath(source)
    if not os.path.exists(source):
        raise InvalidError([FieldError("source", f"{source} does not exist")])
    if not os.path.isfile(source):
        raise InvalidError([FieldError("source", f"{source} is not a regular file")])
    if not os.access(source, os.R_OK):
        raise InvalidError([FieldError("source", f"{source} is not readable")])
    return source


_Spec = TypeVar("_Spec", FileSpec, DirectorySpec)


def _locate(spec: _Spec, context: reconcile.AdmissionContext) -> _Spec:
    """Confine the path to a root, canonicalise the mode."""
    path, root = confine(spec.path, spec.root, allowed_roots(context.config, context.origin))
    return attrs.evolve(spec, path=path, root=root, mode=_canonical_mode(spec.mode))


def admit_directory(spec: DirectorySpec, context: reconcile.AdmissionContext) -> DirectorySpec:
    """Confine the path, canonicalise the mode."""
    return _locate(spec, context)


def admit_file(spec: FileSpec, context: reconcile.AdmissionContext) -> FileSpec:
    """Confine the path, canonicalise the mode, resolve the source."""
    spec = _locate(spec, context)
    if spec.source is None:
        return spec
    return attrs.evolve(spec, source=_source(spec.source, context.origin))


FILE = reconcile.Kind(
    API_VERSION,
    "File",
    FileSpec,
    reconcile.ManagedStatus,
    validate=validate_file,
    admit=admit_file,
    deterministic_identity=True,
    immutable=("path", "root"),
)
DIRECTORY = reconcile.Kind(
    API_VERSION,
    "Directory",
    DirectorySpec,
    reconcile.ManagedStatus,
    validate=validate_directory,
    admit=admit_directory,
    deterministic_identity=True,
    immutable=("path", "root"),
    short_names=("dir",),
)
KINDS: Sequence[reconcile.Kind] = (DIRECTORY, FILE)
