"""The ``File`` and ``Directory`` kinds of ``files.reconcile.dev/v1``: their specs, the
checks that need only the spec (``validate``), and admission (``admit``): confinement to
the roots, the canonical mode, the source file confined to the source roots (by default
the manifest's folder) and fingerprinted.

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
from reconcile.errors import FieldError, InvalidError
from reconcile_providers.files.confinement import confine, inside, real_roots
from reconcile_providers.files.sourcing import SourceError, fingerprint, read_source

__all__ = [
    "API_VERSION",
    "DIRECTORY",
    "FILE",
    "SPECIAL_BITS",
    "DirectorySpec",
    "FileSpec",
    "allowed_roots",
    "parse_mode",
    "special_mode_error",
]

API_VERSION = "files.reconcile.dev/v1"
ENSURE_VALUES = ("present", "absent")
_MODE = re.compile(r"(?:0o|0)?([0-7]{3,4})")
#: setuid, setgid and sticky: refused unless the provider config sets ``special_modes``.
SPECIAL_BITS = 0o7000


def _field(doc: str, *, default: Any = attrs.NOTHING, values: Sequence[str] = ()) -> Any:
    """An attrs field with its description (and allowed values) for ``reconcile explain``."""
    metadata: dict[str, Any] = {"doc": doc}
    if values:
        metadata["values"] = tuple(values)
    return attrs.field(default=default, metadata=metadata)


@attrs.frozen
class FileSpec:
    """A regular file: where, what it holds (at most one of ``content``,
    ``contentBase64``, ``source``; none means empty), its permissions, and whether it
    should exist. ``sensitive`` keeps the content out of the event log. ``root``,
    ``sourceRoot`` and ``sourceDigest`` are filled in at admission: the root the path
    was confined to, the source root the source was read from, and what the source held
    then (see :mod:`reconcile_providers.files.sourcing`)."""

    path: str = _field("Where the file goes: relative to the first root, or absolute in one.")
    content: str | None = _field("The file's text (UTF-8).", default=None)
    content_base64: str | None = _field("The file's bytes, base64-encoded (for binary files).", default=None)
    source: str | None = _field("A file whose bytes it holds (relative: to the manifest).", default=None)
    mode: str = _field('Octal permissions, quoted: "0644" (setuid etc.: special_modes).', default="0644")
    ensure: str = _field("Whether the file should exist.", default="present", values=ENSURE_VALUES)
    #: Keep the content out of the event log: drift is summarised by sizes only, and no
    #: digest is reported. (Give the content as ``source``: inline content is part of the
    #: declared spec, which the log keeps.)
    sensitive: bool = _field("Keep the content out of the event log (drift: sizes only).", default=False)
    root: str | None = _field("Set at admission: the root the path was confined to.", default=None)
    source_root: str | None = _field("Set at admission: the source root it was read from.", default=None)
    source_digest: str | None = _field("Set at admission: the source's fingerprint.", default=None)

    def inline(self) -> bytes:
        """The bytes declared in the spec itself (``content`` or ``content_base64``)."""
        if self.content_base64 is not None:
            return base64.b64decode(self.content_base64)
        return (self.content or "").encode()


@attrs.frozen
class DirectorySpec:
    """A directory and its permissions; ``root`` is filled in at admission."""

    path: str = _field("Where the folder goes: relative to the first root, or absolute in one.")
    mode: str = _field('Octal permissions, quoted: "0755" (setuid etc.: special_modes).', default="0755")
    root: str | None = _field("Set at admission: the root the path was confined to.", default=None)


def parse_mode(mode: str) -> int | None:
    """``"0644"``, ``"644"`` or ``"0o644"`` as an int; None when it is not octal permissions."""
    match = _MODE.fullmatch(mode)
    return int(match.group(1), 8) if match else None


def _path_errors(path: str) -> Iterator[FieldError]:
    if not path:
        yield FieldError("path", "must not be empty")
    elif "\0" in path:
        yield FieldError("path", "must not contain a NUL character")


def _mode_errors(mode: str) -> Iterator[FieldError]:
    if parse_mode(mode) is None:
        yield FieldError("mode", f'{mode!r} is not an octal permission such as "0644"')


def special_mode_error(mode: int, config: Any) -> str | None:
    """Why ``mode`` may not be used: setuid, setgid or sticky without ``special_modes``."""
    if not mode & SPECIAL_BITS or (config and config.get("special_modes") is True):
        return None
    bits = [name for bit, name in ((0o4000, "setuid"), (0o2000, "setgid"), (0o1000, "sticky")) if mode & bit]
    return (
        f"{mode:04o} sets the {' and '.join(bits)} bit{'s' if len(bits) > 1 else ''}; "
        "allow it with special_modes: true in the files provider config"
    )


def validate_file(spec: FileSpec) -> Iterator[FieldError]:
    """Checks that need only the spec."""
    yield from _path_errors(spec.path)
    yield from _mode_errors(spec.mode)
    if spec.ensure not in ENSURE_VALUES:
        yield FieldError("ensure", f"must be one of {', '.join(ENSURE_VALUES)}, not {spec.ensure!r}")
    declared = (("content", spec.content), ("contentBase64", spec.content_base64), ("source", spec.source))
    given = [name for name, value in declared if value is not None]
    if len(given) > 1:
        yield FieldError(given[1], f"{' and '.join(given)} are mutually exclusive: give at most one")
    if spec.ensure == "absent" and given:
        yield FieldError(given[0], "a file that should be absent has no content")
    if spec.content_base64 is not None:
        try:
            base64.b64decode(spec.content_base64, validate=True)
        except binascii.Error as exc:
            yield FieldError("contentBase64", f"not valid base64 ({exc})")


def validate_directory(spec: DirectorySpec) -> Iterator[FieldError]:
    """Checks that need only the spec."""
    yield from _path_errors(spec.path)
    yield from _mode_errors(spec.mode)


def allowed_roots(
    config: Any, origin: os.PathLike[str] | None = None, key: str = "roots"
) -> list[str] | None:
    """The roots a config allows (``roots``: a list of folders, or one folder; or the
    ``source_roots``); without any, the folder of the manifest; None when neither is
    known."""
    roots = config.get(key) if config else None
    if isinstance(roots, str | os.PathLike):
        roots = [roots]
    if roots:
        return real_roots(roots)
    if origin is not None:
        return real_roots([os.path.dirname(os.path.abspath(origin))])
    return None


def _canonical_mode(mode: str, config: Any) -> str:
    value = parse_mode(mode)
    assert value is not None  # validate ran first
    refused = special_mode_error(value, config)
    if refused is not None:
        raise InvalidError([FieldError("mode", refused)])
    return f"{value:04o}"


def _source(spec: FileSpec, context: reconcile.AdmissionContext) -> FileSpec:
    """Confine the source to a source root, read it there, record its fingerprint."""
    assert spec.source is not None
    source, root, digest = resolve_source(spec.source, context, sensitive=spec.sensitive)
    return attrs.evolve(spec, source=source, source_root=root, source_digest=digest)


def resolve_source(
    source: str, context: reconcile.AdmissionContext, *, sensitive: bool
) -> tuple[str, str, str]:
    """A ``source`` confined to the source roots of ``context.config`` (by default the
    manifest's folder), read there, and fingerprinted: ``(path, root, digest)``, or an
    InvalidError on ``source`` saying why not. Any provider with a ``source`` field (the
    s3 provider's Object) resolves it this way."""
    origin = context.origin
    if not os.path.isabs(source):
        if origin is None:
            reason = "a relative source needs a manifest file to be relative to: give an absolute path"
            raise InvalidError([FieldError("source", reason)])
        source = os.path.join(real_roots([os.path.dirname(os.path.abspath(origin))])[0], source)
    source = os.path.normpath(source)
    roots = allowed_roots(context.config, origin, key="source_roots")
    if not roots:
        reason = (
            "no folder to read sources from: apply from a manifest file (its folder is the "
            "default), or give the provider its source roots (reconcile --source-root "
            "DIR, or the provider config's source_roots)"
        )
        raise InvalidError([FieldError("source", reason)])
    root = next((r for r in roots if inside(source, r) and source != r), None)
    if root is None:
        reason = f"{source} is outside the source roots ({', '.join(roots)})"
        raise InvalidError([FieldError("source", reason)])
    try:
        data, info = read_source(source, root)
    except SourceError as exc:
        raise InvalidError([FieldError("source", str(exc))]) from None
    return source, root, fingerprint(data, info, sensitive=sensitive)


_Spec = TypeVar("_Spec", FileSpec, DirectorySpec)


def _locate(spec: _Spec, context: reconcile.AdmissionContext) -> _Spec:
    """Confine the path to a root, canonicalise the mode."""
    path, root = confine(spec.path, spec.root, allowed_roots(context.config, context.origin))
    return attrs.evolve(spec, path=path, root=root, mode=_canonical_mode(spec.mode, context.config))


def admit_directory(spec: DirectorySpec, context: reconcile.AdmissionContext) -> DirectorySpec:
    """Confine the path, canonicalise the mode."""
    return _locate(spec, context)


def admit_file(spec: FileSpec, context: reconcile.AdmissionContext) -> FileSpec:
    """Confine the path, canonicalise the mode, confine and fingerprint the source."""
    spec = _locate(spec, context)
    if spec.source is None:
        return attrs.evolve(spec, source_root=None, source_digest=None)
    return _source(spec, context)


FILE = reconcile.Kind(
    API_VERSION,
    "File",
    FileSpec,
    reconcile.ManagedStatus,
    validate=validate_file,
    admit=admit_file,
    behaviour=reconcile.Behaviour.MARKED_ON_CREATE,
    immutable=("path", "root"),
    identity=("path",),
)
DIRECTORY = reconcile.Kind(
    API_VERSION,
    "Directory",
    DirectorySpec,
    reconcile.ManagedStatus,
    validate=validate_directory,
    admit=admit_directory,
    behaviour=reconcile.Behaviour.MARKED_ON_CREATE,
    immutable=("path", "root"),
    identity=("path",),
    short_names=("dir",),
)
KINDS: Sequence[reconcile.Kind] = (DIRECTORY, FILE)
