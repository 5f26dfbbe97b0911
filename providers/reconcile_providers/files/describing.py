"""Human-readable differences between a file on disk and its declaration: what
``DriftDetected`` and ``UpdateRequested`` record in the history.

Small text files get a few lines of unified diff; anything else a size and digest
summary. The summary is bounded (``MAX_LINES`` lines of at most ``MAX_WIDTH``
characters) so a large edit never bloats the event log.
"""

from __future__ import annotations

import difflib
import hashlib

__all__ = ["MAX_LINES", "MAX_WIDTH", "describe_content", "describe_mode", "digest"]

MAX_LINES = 12
MAX_WIDTH = 120
_TEXT_LIMIT = 64 * 1024


def digest(data: bytes) -> str:
    """The sha256 of ``data``, hex."""
    return hashlib.sha256(data).hexdigest()


def _text(data: bytes) -> list[str] | None:
    if len(data) > _TEXT_LIMIT or b"\0" in data:
        return None
    try:
        return data.decode().splitlines()
    except UnicodeDecodeError:
        return None


def _clip(line: str) -> str:
    return line if len(line) <= MAX_WIDTH else line[: MAX_WIDTH - 1] + "…"


def describe_content(on_disk: bytes, declared: bytes, *, sensitive: bool = False) -> str:
    """``content: +2 -1 lines`` and the first changed lines, or a digest summary; for a
    sensitive file only the sizes (nothing of the content reaches the event log)."""
    if sensitive:
        return f"content: {len(on_disk)} bytes on disk, {len(declared)} bytes declared (sensitive: not shown)"
    old, new = _text(on_disk), _text(declared)
    if old is None or new is None:
        return (
            f"content: {len(on_disk)} bytes (sha256 {digest(on_disk)[:12]}) on disk, "
            f"{len(declared)} bytes (sha256 {digest(declared)[:12]}) declared"
        )
    changed = [
        line
        for line in difflib.unified_diff(old, new, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    added = sum(1 for line in changed if line.startswith("+"))
    removed = len(changed) - added
    if not changed:  # only line endings or a final newline differ
        return f"content: {len(on_disk)} bytes on disk, {len(declared)} bytes declared (whitespace)"
    lines = [f"content: +{added} -{removed} lines (- on disk, + declared)"]
    lines += [_clip(line) for line in changed[:MAX_LINES]]
    if len(changed) > MAX_LINES:
        lines.append(f"... {len(changed) - MAX_LINES} more changed lines")
    return "\n".join(lines)


def describe_mode(on_disk: int, declared: int) -> str:
    """``mode: 0600 on disk, 0644 declared``."""
    return f"mode: {on_disk:04o} on disk, {declared:04o} declared"
