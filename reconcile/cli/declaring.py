"""The documents the commands that declare take: read (``-f`` files, folders, stdin),
admitted all before anything is written, and what an apply made of them reported.

``apply``, ``diff``, ``plan``, a saved plan's apply and the remembered settings build on
these; they live apart from the commands (:mod:`reconcile.cli.applying`,
:mod:`reconcile.cli.planning`, :mod:`reconcile.cli.saving`) so that those import them,
and one another, one way only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from reconcile.api import Client
from reconcile.api.admission import Admission, Admitted
from reconcile.api.bulk import Applied
from reconcile.cli.failing import BadInput, invalid_lines
from reconcile.cli.rendering import qualified
from reconcile.cli.stopping import Stop
from reconcile.errors import FieldError, InvalidError, NotFoundError, ReconcileError
from reconcile.model import Document, Resource, load_manifests, read_manifests
from reconcile.model.printing import printable
from reconcile.store.contract import StoredObject

__all__ = ["STDIN", "Declared", "admit_all", "current_of", "origin", "read_documents", "report", "reviewed"]

STDIN = "-"


@attrs.frozen
class Declared:
    """One admitted document: where it came from and what it declares."""

    document: Document
    admitted: Admitted

    @property
    def name(self) -> str:
        """``file.files.reconcile.dev/index`` (kubectl's way of naming an object)."""
        kind = self.admitted.kind
        return qualified(kind.kind, kind.api_group, self.admitted.metadata["name"])


def read_documents(filenames: Sequence[str]) -> list[Document]:
    """Every document of every ``-f`` argument (a file, a folder, or ``-`` for stdin)."""
    documents: list[Document] = []
    problems: list[str] = []
    for filename in filenames:
        try:
            if filename == STDIN:
                documents.extend(load_manifests(sys.stdin.buffer.read(), source="<stdin>"))
            else:
                documents.extend(read_manifests(filename, skipped=_say_skipped))
        except InvalidError as exc:
            problems.extend(invalid_lines(exc))
    if problems:
        raise BadInput(*problems)
    if not documents:
        raise BadInput(f"no objects in {', '.join(filenames)}")
    return documents


def _say_skipped(path: Path) -> None:
    click.echo(f"reconcile: skipped {printable(str(path))}: not a manifest (no apiVersion or kind)", err=True)


def origin(document: Document) -> Path | None:
    """The manifest file a document came from (None for stdin)."""
    return None if document.source == "<stdin>" else Path(document.source)


_ONE_OBJECT = "one external resource is declared by one object"


async def reviewed(client: Client, declared_all: Sequence[Declared]) -> list[Declared]:
    """The documents through their kinds' admission hooks (those the store is needed
    for: :func:`admit_all` runs the schema only), as ``apply`` will store them;
    BadInput listing every refusal."""
    done: list[Declared] = []
    problems: list[str] = []
    for declared in declared_all:
        if not declared.admitted.needs_review:
            done.append(declared)
            continue
        try:
            done.append(attrs.evolve(declared, admitted=await client.engine.review(declared.admitted)))
        except InvalidError as exc:
            problems.extend(invalid_lines(exc.with_source(declared.document.location)))
    if problems:
        raise BadInput(*problems)
    return done


def admit_all(
    admission: Admission,
    documents: Sequence[Document],
    *,
    unique: bool = True,
    origins: Sequence[Path | None] | None = None,
) -> list[Declared]:
    """Admit every document; BadInput listing every problem if any is refused.
    ``origins``: the files they came from, when not their ``source`` (a saved plan's). With
    ``unique``, an object declared twice (the same kind, namespace and name), or two
    objects declaring one external resource (``Kind.identity``), are problems too: which
    should win is the user's call, not the order of the files."""
    declared: list[Declared] = []
    problems: list[str] = []
    first: dict[tuple[str, str, str, str], Declared] = {}
    claimed: dict[tuple[str, str, str], Declared] = {}
    for position, document in enumerate(documents):
        where = origin(document) if origins is None else origins[position]
        try:
            admitted = admission.admit(document.data, origin=where)  # type: ignore[arg-type]
        except InvalidError as exc:
            problems.extend(invalid_lines(exc.with_source(document.location)))
            continue
        for warning in admitted.warnings:
            click.echo(f"warning: {document.location}: {warning}", err=True)
        item = Declared(document, admitted)
        kind, meta = admitted.kind, admitted.metadata
        subject = f'{kind.kind} "{meta["name"]}"'
        earlier = first.setdefault((kind.api_group, kind.kind, meta["namespace"], meta["name"]), item)
        if earlier is not item:
            if unique:
                problems.append(
                    f"{document.location}: {subject}: declared again (first in {earlier.document.location}); "
                    "declare each object once"
                )
            continue
        identity = kind.identity_of(admitted.body["spec"])
        if unique and identity is not None:
            other = claimed.setdefault((kind.api_group, kind.kind, identity), item)
            if other is not item:
                problems.append(
                    f"{document.location}: {subject}: spec: {identity} is also declared by "
                    f"{other.name} ({other.document.location}); {_ONE_OBJECT}"
                )
        declared.append(item)
    if problems:
        raise BadInput(*problems)
    return declared


async def current_of(client: Client, declared: Declared) -> Resource[Any, Any] | None:
    """The stored object a document declares, None when there is none."""
    meta = declared.admitted.metadata
    try:
        return await client.get(declared.admitted.kind, meta["name"], namespace=meta["namespace"])
    except NotFoundError:
        return None


def applied_body(
    client: Client, declared: Declared, current: Resource[Any, Any], manager: str | None
) -> dict[str, Any]:
    """The body ``apply`` would leave of the stored ``current``, by the apply's own rule
    (``Engine.applied_body``: server-side apply keeps the fields other managers own);
    the stored body with the declared spec when that apply would be refused (the refusal
    is apply's to say). What ``plan`` and ``diff`` compare with."""
    stored_body = client.converter.unstructure(current)
    uid, version = current.metadata.uid or "", current.metadata.resource_version or 0
    stored = StoredObject(current.key, uid, version, stored_body)
    try:
        return client.engine.applied_body(declared.admitted, stored, manager=manager)
    except ReconcileError:
        return {**stored_body, "spec": declared.admitted.body["spec"]}


async def _refusal_lines(client: Client, declared: Declared, error: Exception) -> list[str]:
    """The lines that say why a document was refused when checked against the store."""
    if not isinstance(error, InvalidError):
        return [f"{declared.document.location}: {declared.name}: {error}"]
    kind, meta = declared.admitted.kind, declared.admitted.metadata
    errors = error.errors
    if any(e.path == "spec.root" for e in errors):
        # Another root, not another object: never suggest deleting it (that would delete
        # the live file); say which root it was applied with.
        stored = await current_of(client, declared)
        old_root = None if stored is None else getattr(stored.spec, "root", None)
        new_root = declared.admitted.body["spec"].get("root")
        if old_root and new_root and old_root != new_root:
            reason = f"{new_root} is not the root {old_root} this object was applied with"
            errors = (FieldError("spec.root", f"{reason}: give --root {old_root}"),)
    subject = f'{kind.kind} "{meta["name"]}"'
    return invalid_lines(InvalidError(list(errors), subject=subject, source=declared.document.location))


_STORED = ("created", "configured", "unchanged")


def _stopped_lines(declared_all: Sequence[Declared], results: Sequence[Applied]) -> list[str]:
    """What an interrupted apply stored and what it did not: the stored documents are
    the first ones (runs are written in order, each after the one before is durable)."""
    total = len(declared_all)
    stored = [i for i, r in enumerate(results) if r.outcome in _STORED]
    if not stored:
        return [f"nothing stored (of {total} documents); re-run apply"]
    last = declared_all[stored[-1]].document.location
    if len(stored) == total:
        return [f"stored all {total} documents (up to {last}) before stopping; nothing left to apply"]
    rest = next(i for i, r in enumerate(results) if r.outcome not in _STORED)
    first_missing = declared_all[rest].document.location
    line = (
        f"stored {len(stored)} of {total} documents (up to {last}); not stored: the other "
        f"{total - len(stored)} (from {first_missing}); re-run apply to finish"
    )
    return [line]


async def report(
    client: Client, declared_all: Sequence[Declared], every_result: Sequence[Applied], stop: Stop
) -> None:
    """Print what the apply did; raise what stopped it (a refusal, a failure, a signal).
    ``every_result`` has the documents' results, then those of the objects pruned."""
    results, pruned = every_result[: len(declared_all)], every_result[len(declared_all) :]
    if all(r.outcome in ("refused", "skipped") for r in every_result) and any(r.error for r in every_result):
        if any(r.error is not None for r in pruned):
            # The prune was refused (an object changed since it was listed): nothing stored.
            raise next(r.error for r in pruned if r.error is not None)
        # Nothing was written. A document the store's state refuses is bad input (exit
        # 2); a conflict (a stale resource_version) is a runtime failure (exit 1).
        errors = [r.error for r in results if r.error is not None]
        if not all(isinstance(e, InvalidError) for e in errors):
            raise next(e for e in errors if not isinstance(e, InvalidError))
        problems = [
            line
            for declared, result in zip(declared_all, results, strict=True)
            if result.error is not None
            for line in await _refusal_lines(client, declared, result.error)
        ]
        raise BadInput(*problems)
    for declared, result in zip(declared_all, results, strict=True):
        if result.outcome in _STORED:
            click.echo(f"{declared.name} {result.outcome}")
        for warning in result.warnings:
            click.echo(f"warning: {declared.document.location}: {warning}", err=True)
    for result in pruned:
        if result.outcome == "pruned" and result.key is not None:
            click.echo(f"{qualified(result.key.kind, result.key.api_group, result.key.name)} pruned")
    failed = next((r.error for r in every_result if r.error is not None), None)
    if stop():
        reason = [] if failed is None else [f"and: {failed}"]
        raise stop.interrupted(*_stopped_lines(declared_all, results), *reason)
    if failed is not None:
        # What was applied stays applied (and was printed); the first failure says why.
        raise failed
