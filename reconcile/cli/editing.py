"""``edit``: change one object in an editor, as ``kubectl edit`` does.

The object's document (``get -o yaml``) goes into a temporary file (readable by this user
only) under a comment block saying what may change; ``$RECONCILE_EDITOR``, else
``$EDITOR``, else ``$VISUAL``, else ``vi`` opens it, and when the editor exits what
changed is written, on the version that was read (:mod:`reconcile.cli.changing`: spec,
labels and annotations; a change to status is ignored, anything else refused).

Saved as it was, or emptied, nothing is written (exit 0). A change that is refused (YAML
that does not parse, a field admission refuses, a field that may not change) opens the
editor again on what was saved, with the reasons as comments at the top, until it is
accepted, emptied, or saved again without a change (then "Edit cancelled, no valid
changes were saved.", exit 1). A person's edit cannot be redone on a newer version, so an
object changed or deleted meanwhile is not overwritten: the edit stops, exit 1, saying
so. In both cases the edited file is kept and named, so no typing is lost.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click
import yaml

from reconcile.api.merging import json_equal
from reconcile.cli.changing import (
    Change,
    Target,
    changes,
    field_manager_option,
    warn_status_ignored,
    with_manager,
)
from reconcile.cli.completing import complete_kinds, complete_names
from reconcile.cli.failing import BadInput, Failure, invalid_lines
from reconcile.cli.main import cli, run_async
from reconcile.cli.naming import type_and_name
from reconcile.cli.rendering import as_yaml, document_data
from reconcile.cli.settings import Settings
from reconcile.errors import ConflictError, InvalidError, NotFoundError
from reconcile.model.printing import printable

__all__ = ["EDITOR_VARIABLES", "EDIT_MANAGER", "editor_command"]

#: The field manager of ``edit`` when none is given (kubectl's is ``kubectl-edit``).
EDIT_MANAGER = "reconcile-edit"

#: Where the editor comes from, first set wins; ``vi`` when none is.
EDITOR_VARIABLES = ("RECONCILE_EDITOR", "EDITOR", "VISUAL")

_HEADER = """\
# Please edit the object below. Lines beginning with a '#' will be ignored,
# and an empty file will abort the edit. If an error occurs while saving this file will be
# reopened with the relevant failures.
#
# Only spec, metadata.labels and metadata.annotations can change; status is written by
# the controllers, and a change to it is ignored.
#
"""
UNCHANGED = "Edit cancelled, no changes made."
EMPTIED = "Edit cancelled, saved file was empty."
NOT_SAVED = "Edit cancelled, no valid changes were saved."


def editor_command() -> list[str]:
    """The editor to run, as arguments (the file's name is added last)."""
    for variable in EDITOR_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:
            try:
                return shlex.split(value)
            except ValueError as exc:
                raise BadInput(f"${variable}: {value!r} cannot be split into a command ({exc})") from None
    return ["vi"]


@attrs.frozen
class _Opened:
    """The object as it was read for editing."""

    target: Target
    document: dict[str, Any]


async def _read(settings: Settings, kind: str, name: str, namespace: str) -> _Opened:
    async with settings.client(read_only=True) as client:
        target = Target(client.kinds.resolve(kind), name, namespace)
        obj = await client.get(target.kind, name, namespace=namespace)
        return _Opened(target, document_data(client, obj))


async def _write(settings: Settings, target: Target, change: Change) -> None:
    async with settings.client() as client:
        await client.patch(
            target.kind,
            target.name,
            change.patch,
            namespace=target.namespace,
            resource_version=change.resource_version,
        )


def _without_header(text: str) -> str:
    """What was saved, less the comment block at the top (ours, errors included)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if not line.lstrip().startswith("#")), len(lines))
    return "".join(lines[start:])


def _error_block(subject: str, errors: Sequence[str]) -> str:
    lines = [f"# {subject} was not saved:", *(f"# * {' '.join(e.split())}" for e in errors), "#"]
    return "\n".join(lines) + "\n"


def _run_editor(command: Sequence[str], path: Path) -> None:
    try:
        finished = subprocess.run([*command, str(path)], check=False)  # noqa: S603 - the user's own editor
    except OSError as exc:
        raise Failure(
            f"cannot run the editor {shlex.join(command)} ({exc.strerror}); set EDITOR to an installed one"
        ) from None
    if finished.returncode != 0:
        raise Failure(
            f"the editor {shlex.join(command)} exited with status {finished.returncode}; nothing saved"
        )


class _UnreadableError(ValueError):
    """What was saved is not one YAML document; ``line`` (0-based, in the object's text
    below the comment block) and ``column`` when the parser says where."""

    def __init__(self, problem: str, line: int | None = None, column: int = 0) -> None:
        super().__init__(problem)
        self.problem, self.line, self.column = problem, line, column

    def said(self, first_line: int) -> str:
        """The message, its line counted in a file whose object starts at line
        ``first_line`` (1-based): the file the editor is about to show."""
        if self.line is None:
            return f"invalid YAML: {self.problem}"
        return f"invalid YAML at line {first_line + self.line}, column {self.column + 1}: {self.problem}"


def _parse(text: str) -> Any:
    """The one document in the object's text (None when there is none)."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        problem = str(exc.problem or exc.context)
        raise _UnreadableError(
            problem, None if mark is None else mark.line, 0 if mark is None else mark.column
        ) from None
    except yaml.YAMLError as exc:
        raise _UnreadableError(" ".join(str(exc).split())) from None
    if len(documents) > 1:
        raise _UnreadableError(f"expected one object, found {len(documents)} YAML documents")
    return documents[0] if documents else None


class _Kept(Failure):
    """The edit failed; the file with the user's changes stays, and is named."""

    def __init__(self, path: Path, *lines: str) -> None:
        super().__init__(*lines, f'A copy of your changes has been stored to "{path}"')


@cli.command(short_help="Edit one object in $EDITOR; what changed is saved.")
@click.argument("kind", shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@field_manager_option(EDIT_MANAGER)
@click.pass_obj
def edit(settings: Settings, kind: str, name: str | None, namespace: str, verb_manager: str | None) -> None:
    """Edit one object (KIND NAME or KIND/NAME) in $EDITOR and save it: spec, labels and
    annotations, checked by admission, written on the version that was opened."""
    settings = with_manager(settings, verb_manager, EDIT_MANAGER)
    found_kind, found_name = type_and_name(kind, name)
    if found_kind is None or found_name is None:
        raise BadInput("which object? give KIND NAME or KIND/NAME")
    command = editor_command()
    opened = run_async(_read(settings, found_kind, found_name, namespace))
    descriptor, filename = tempfile.mkstemp(prefix="reconcile-edit-", suffix=".yaml")
    os.close(descriptor)
    path = Path(filename)
    try:
        _edit_loop(settings, opened, command, path)
    except _Kept:
        raise  # the file stays: it holds what the user typed
    except BaseException:
        _remove(path)
        raise
    _remove(path)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _edit_loop(settings: Settings, opened: _Opened, command: Sequence[str], path: Path) -> None:
    """Edit until saved, cancelled or stopped (:class:`_Kept` when the user's changes
    could not be saved: the file stays)."""
    target, original = opened.target, opened.document
    subject = f"{target.kind.kind} {printable(target.name, quoted=True)}"
    body = as_yaml(original)
    errors: list[str | _UnreadableError] = []
    while True:
        header = _HEADER
        if errors:
            # The block has one line per error: the object's first line is known
            # before the errors are written, and a YAML error can name its line in
            # the file the editor shows.
            first_line = header.count("\n") + len(errors) + 3
            said = [e.said(first_line) if isinstance(e, _UnreadableError) else e for e in errors]
            header += _error_block(target.label, said)
        path.write_text(header + body)
        _run_editor(command, path)
        edited = _without_header(path.read_text())
        if errors and edited.strip() == body.strip():
            raise _Kept(path, NOT_SAVED)
        body = edited
        try:
            parsed = _parse(edited)
        except _UnreadableError as exc:
            errors = [exc]
            continue
        if parsed is None:
            click.echo(EMPTIED, err=True)
            return
        if json_equal(parsed, original):
            click.echo(UNCHANGED, err=True)
            return
        try:
            change = changes(original, parsed, subject=subject)
            if change.status_ignored:
                warn_status_ignored()
            if not change.patch:
                click.echo(UNCHANGED, err=True)
                return
            run_async(_write(settings, target, change))
        except InvalidError as exc:
            errors = list(invalid_lines(exc))
            continue
        except ConflictError:
            raise _Kept(
                path,
                f"{target.label} was changed by someone else while it was being edited "
                f"(it was at resourceVersion {original['metadata'].get('resourceVersion')}); "
                "nothing was saved: edit it again to change the latest version",
            ) from None
        except NotFoundError:
            raise _Kept(
                path, f"{target.label} was deleted while it was being edited; nothing was saved"
            ) from None
        click.echo(f"{target.label} edited")
        return
