"""Saved plans: ``reconcile plan -f DIR -out FILE``, then ``reconcile apply FILE``
(Terraform's ``plan -out`` and ``apply PLANFILE``).

What was reviewed is what gets applied, or nothing: the file holds the documents as read
(each with the file it came from, so relative references resolve as they did), their
admitted bodies, the store's revision when the plan was made and each planned object's
``resourceVersion`` then (null: it did not exist). ``apply FILE`` admits the documents
again and refuses if

* any admits differently now (a source file changed, another ``--root``): the plan
  would not be what was reviewed;
* the state moved: a planned object changed, was deleted, or appeared since (its
  ``resourceVersion`` is not the saved one). The revision is the fast path: a store still
  at it has moved for nobody.

Both are failures with one line per object and "make a new plan" (exit 1); nothing is
written. The writes then go in one transaction, each object's saved ``resourceVersion``
its precondition, so a change that lands between the check and the write is a conflict,
never a silent overwrite. (An object that did not exist has no version to hold: one that
appears in that window is found by the check, not the transaction.)

The file is JSON, ``{"format": "reconcile.dev/plan", "version": 1, ...}``, recognised by
its content, never its name. It holds the manifests as they are (a File's ``content``
included), so it is written readable by its owner only, as Terraform warns of its own.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from reconcile.api import Client
from reconcile.cli.declaring import admit_all, report
from reconcile.cli.failing import BadInput, Failure
from reconcile.cli.remembering import remember_applied, with_remembered_config
from reconcile.cli.rendering import qualified
from reconcile.cli.settings import Settings
from reconcile.cli.stopping import stopping_on_signals
from reconcile.model import Document
from reconcile.model.meta import ObjectKey
from reconcile.runtime.collecting import collecting_less
from reconcile.store.encoding import dumps, loads

__all__ = [
    "FORMAT",
    "VERSION",
    "SavedDocument",
    "SavedPlan",
    "apply_saved",
    "is_saved_plan",
    "load_plan",
    "save_plan",
]

FORMAT = "reconcile.dev/plan"
#: 2: the documents in camelCase (apiVersion, resourceVersion); version 1 held snake_case.
VERSION = 2
#: How many bytes of a file are read to tell whether it is a saved plan.
_SNIFF = 4096
_FORMAT_FIELD = re.compile(rb'"format"\s*:\s*"' + re.escape(FORMAT.encode()) + rb'"')


@attrs.frozen
class SavedDocument:
    """One planned document: as read, as admitted, and its object's version then."""

    document: Document
    #: The manifest file it was read from (None for stdin).
    origin: Path | None
    #: The admitted body (canonical: what apply would store).
    body: dict[str, Any]
    #: The object's ``resourceVersion`` when planned; None when it did not exist.
    resource_version: int | None

    @property
    def key(self) -> ObjectKey:
        """The object's key."""
        meta = self.body["metadata"]
        group = str(self.body["apiVersion"]).rpartition("/")[0]
        return ObjectKey(group, str(self.body["kind"]), meta["namespace"], meta["name"])

    @property
    def name(self) -> str:
        """``file.files.reconcile.dev/index``."""
        key = self.key
        return qualified(key.kind, key.api_group, key.name)


@attrs.frozen
class SavedPlan:
    """A plan as saved: the store's revision then, the documents, the planned actions."""

    revision: int
    created: str
    documents: tuple[SavedDocument, ...]
    actions: tuple[dict[str, Any], ...] = ()


def _normal(body: Any) -> Any:
    """A body as it reads back from JSON (tuples become lists), to compare bodies."""
    return loads(dumps(body))


def save_plan(path: Path, plan: SavedPlan) -> None:
    """Write ``plan`` to ``path`` whole or not at all (a temporary file renamed over it),
    readable by its owner only."""
    data = {
        "format": FORMAT,
        "version": VERSION,
        "created": plan.created,
        "revision": plan.revision,
        "documents": [
            {
                "source": d.document.source,
                "index": d.document.index,
                "origin": None if d.origin is None else str(d.origin),
                "manifest": d.document.data,
                "admitted": d.body,
                "resourceVersion": d.resource_version,
            }
            for d in plan.documents
        ],
        "actions": list(plan.actions),
    }
    text = json.dumps(data, indent=1, default=str) + "\n"
    folder = path.absolute().parent
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as exc:
        raise BadInput(f"-out: {path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        Path(temporary).replace(path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise BadInput(f"-out: {path}: cannot write ({exc.strerror})") from None


def now() -> str:
    """The time a plan is made, RFC 3339 in UTC."""
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def is_saved_plan(path: Path) -> bool:
    """Whether ``path`` holds a saved plan (by its content: a JSON object naming the
    plan format near its start)."""
    try:
        with path.open("rb") as stream:
            head = stream.read(_SNIFF)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and _FORMAT_FIELD.search(head) is not None


def load_plan(path: Path) -> SavedPlan:
    """The plan saved in ``path``; BadInput saying why when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError):
        raise BadInput(f"{path}: not a saved plan (not JSON); give manifests with -f") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadInput(f'{path}: not a saved plan (no "format": "{FORMAT}"); give manifests with -f')
    if data.get("version") != VERSION:
        raise BadInput(
            f"{path}: a saved plan of version {data.get('version')!r}; this reconcile reads version "
            f"{VERSION}: make the plan again with this version"
        )
    try:
        documents = tuple(
            SavedDocument(
                Document(str(d["source"]), int(d["index"]), d["manifest"]),
                None if d["origin"] is None else Path(d["origin"]),
                dict(d["admitted"]),
                None if d["resourceVersion"] is None else int(d["resourceVersion"]),
            )
            for d in data["documents"]
        )
        return SavedPlan(
            int(data["revision"]), str(data["created"]), documents, tuple(data.get("actions", ()))
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(
            f"{path}: a damaged saved plan ({type(exc).__name__}: {exc}); make the plan again"
        ) from None


def changed_paths(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The top fields of spec and metadata whose values differ between two bodies."""
    paths = []
    for part in ("metadata", "spec"):
        before, after = _normal(old.get(part) or {}), _normal(new.get(part) or {})
        paths += [
            f"{part}.{field}"
            for field in sorted(set(before) | set(after))
            if before.get(field) != after.get(field)
        ]
    return paths or ["apiVersion"]


def admission_lines(saved: Sequence[SavedDocument], admitted: Sequence[dict[str, Any]]) -> list[str]:
    """One line per document that admits differently now than when planned."""
    return [
        f"{s.document.location}: {s.name}: admits differently than when planned "
        f"({', '.join(changed_paths(s.body, body))} changed): make a new plan"
        for s, body in zip(saved, admitted, strict=True)
        if _normal(s.body) != _normal(body)
    ]


async def moved_lines(client: Client, plan: SavedPlan) -> list[str]:
    """One line per planned object whose state moved since the plan (changed, deleted,
    or new); none when the store is still at the plan's revision."""
    if await client.revision() == plan.revision:
        return []
    lines = []
    for saved in plan.documents:
        current = await client.store.read(saved.key)
        now_at = None if current is None else current.resource_version
        if now_at == saved.resource_version:
            continue
        was = saved.resource_version
        if was is None:
            lines.append(f"{saved.name} appeared since the plan (resourceVersion {now_at})")
        elif now_at is None:
            lines.append(f"{saved.name} was deleted since the plan (it was at resourceVersion {was})")
        else:
            lines.append(f"{saved.name} changed since the plan (resourceVersion {was}, now {now_at})")
    return lines


def refuse_moved(plan: SavedPlan, lines: Sequence[str], path: Path) -> Failure:
    """The failure that says the state moved since the plan: nothing was written."""
    return Failure(
        f"{path}: the state moved since the plan was made (at revision {plan.revision}); nothing applied",
        *lines,
        "make a new plan (reconcile plan -f ... -out FILE) and review it",
    )


async def apply_saved(settings: Settings, path: Path, *, atomic: bool) -> None:
    """Apply a saved plan exactly, or refuse (see :mod:`reconcile.cli.saving`)."""
    plan = load_plan(path)
    with stopping_on_signals() as stop:
        settings = await with_remembered_config(settings)
        saved = plan.documents
        declared_all = admit_all(
            settings.admission(), [s.document for s in saved], origins=[s.origin for s in saved]
        )
        different = admission_lines(saved, [d.admitted.body for d in declared_all])
        if different:
            raise Failure(f"{path}: the manifests are not what was planned; nothing applied", *different)
        if stop():
            raise stop.interrupted(f"nothing stored (of {len(declared_all)} documents); re-run apply")
        async with settings.client(create=True) as client:
            moved = await moved_lines(client, plan)
            if moved:
                raise refuse_moved(plan, moved, path)
            # Each object's planned version is the write's precondition, inside the one
            # transaction: a change landing after the check is a conflict, not overwritten.
            admitted = [
                d.admitted
                if s.resource_version is None
                else attrs.evolve(
                    d.admitted,
                    body={
                        **d.admitted.body,
                        "metadata": {**d.admitted.metadata, "resourceVersion": s.resource_version},
                    },
                )
                for d, s in zip(declared_all, saved, strict=True)
            ]
            with collecting_less():  # the CLI owns its process (see reconcile.runtime.collecting)
                results = await client.apply_many(admitted, check_all_first=True, atomic=atomic, stop=stop)
            await report(client, declared_all, results, stop)
            await remember_applied(client, settings, declared_all, results)
