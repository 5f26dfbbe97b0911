"""How the command line fails: one clear line per problem, the right exit code, and no
traceback unless ``--debug``.

Exit codes (stable, for scripts):

* ``0``: done;
* ``1``: a runtime failure (an object not found, not Ready in time, a store that failed,
  a verify that found differences);
* ``2``: bad input (a manifest, a flag, a database path that is not a reconcile store);
  nothing was written;
* ``130``: interrupted (SIGINT, Ctrl-C) before it finished; ``143``: stopped by SIGTERM
  (128 + the signal's number, as shells report it). ``apply`` says what it stored.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

from reconcile.errors import InvalidError

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "BadInput",
    "Failure",
    "Interrupted",
    "invalid_lines",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130


class Failure(Exception):  # noqa: N818 - it is what the user sees: "a failure"
    """A command failed; ``lines`` say why, one problem each."""

    exit_code = EXIT_FAILURE

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines: Sequence[str] = lines


class BadInput(Failure):
    """The input was refused; nothing was written."""

    exit_code = EXIT_INPUT


class Interrupted(Failure):
    """A one-shot command was stopped by a signal (Ctrl-C, SIGTERM) before it finished.
    With ``signum``, it exits 128 + that signal's number (143 for SIGTERM)."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, *lines: str, signum: signal.Signals | None = None) -> None:
        super().__init__(*lines)
        if signum is not None:
            self.exit_code = 128 + signum.value


def invalid_lines(error: InvalidError) -> list[str]:
    """One line per field error: ``file, document N: Kind ns/name: path: reason``."""
    where = ": ".join(part for part in (error.source, error.subject) if part)
    return [f"{where}: {field}" if where else str(field) for field in error.errors] or [str(error)]
