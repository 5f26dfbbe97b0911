"""Field ownership for server-side apply, after Kubernetes' structured-merge-diff.

Each field manager owns the fields it declared in its last apply, recorded in
``metadata.managedFields`` as paths: ``labels/KEY``, ``annotations/KEY`` and
``finalizers/NAME`` (since the first releases) and ``spec/A/B`` for the spec (each segment
escaped as a JSON pointer's is: ``~`` as ``~0``, ``/`` as ``~1``). A spec path names a
leaf: mappings are walked key by key (granular, as Kubernetes' structs and maps), and
anything else -- a scalar, a list, an empty mapping -- is owned whole (atomic, as
Kubernetes' ``x-kubernetes-list-type: atomic``).

What an apply of manager M does to the spec (:func:`merge_spec`):

* a field M declares takes M's value; when another manager owns it (or a field above or
  below it) with a different value, that is a conflict, refused unless ``force``, which
  moves the field to M (Kubernetes' ``--force-conflicts``); the same value is shared;
* a field another manager owns and M does not declare keeps its stored value;
* every other field takes the value of M's admitted spec: what M declares, and the
  kind's default for the rest. So a field M stops declaring goes (back to its default)
  unless somebody else owns it, and fields nobody owns (written by ``patch``, or stored
  before spec fields were tracked) are brought to M's declaration, as apply did before.

Labels, annotations, finalizers and owner references merge the same way, key by key
(:func:`merge_metadata`; a label or annotation set to another value than another
manager's is a conflict too: :func:`metadata_conflicts`).

The common apply -- one manager, nobody else owning spec fields -- takes the admitted
spec as it is, without walking anything (:func:`others_own_spec` says when).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from reconcile.api.changing import same
from reconcile.api.merging import json_equal
from reconcile.store.encoding import dumps, loads

__all__ = [
    "SPEC",
    "UPDATE",
    "FieldConflict",
    "converted_paths",
    "declared_paths",
    "field_name",
    "filled",
    "leaf_paths",
    "managed_paths",
    "merge_metadata",
    "merge_spec",
    "metadata_conflicts",
    "only_spec_paths_recorded",
    "others_own_spec",
    "recorded_update",
    "update_entry",
    "value_at",
]

#: The prefix of a spec path in ``managedFields``.
SPEC = "spec/"
#: What a manager's entry for its non-apply writes (``update``, ``patch``, ``edit``) is
#: keyed by after its name (``reconcile-patch (Update)``): Kubernetes keeps a manager's
#: ``operation: Apply`` and ``operation: Update`` entries apart, so a field a manager
#: patched is never dropped by that manager's next apply for not being declared.
UPDATE = " (Update)"
_ABSENT: Any = object()
_LEAVES = frozenset({str, int, float, bool, list, type(None)})
#: The metadata fields merged key by key.
_MERGED = ("labels", "annotations")


@attrs.frozen
class FieldConflict:
    """A field an apply declares with a value other than the one another manager owns."""

    #: The field, written as a field path (``spec.content``, ``metadata.labels.app``).
    field: str
    #: The manager that owns it.
    manager: str


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1") if "/" in segment or "~" in segment else segment


def _segments(path: str) -> list[str]:
    """The unescaped keys below ``spec`` of a spec path."""
    return [s.replace("~1", "/").replace("~0", "~") for s in path[len(SPEC) :].split("/")]


def field_name(path: str) -> str:
    """A managed path as a field path for a person: ``spec/a/b`` -> ``spec.a.b``,
    ``labels/app`` -> ``metadata.labels.app``."""
    if path.startswith(SPEC):
        return "spec." + ".".join(_segments(path))
    head, _, rest = path.partition("/")
    return f"metadata.{head}.{rest}"


def leaf_paths(spec: Mapping[str, Any], prefix: str = SPEC) -> list[str]:
    """Every leaf path of an unstructured spec (mappings walked, anything else a leaf)."""
    paths: list[str] = []
    for key, value in spec.items():
        path = prefix + _escape(key)
        if isinstance(value, Mapping) and value:
            paths.extend(leaf_paths(value, path + "/"))
        else:
            paths.append(path)
    return paths


def declared_paths(raw: Mapping[str, Any], admitted: Mapping[str, Any], prefix: str = SPEC) -> list[str]:
    """The spec paths a manifest declares: the leaves of the spec as written (``raw``),
    each cut where the admitted spec holds a leaf (a mapping written for a list, say),
    and left out where admission dropped the key."""
    paths: list[str] = []
    for key, value in raw.items():
        if key not in admitted:
            continue
        path = prefix + (key if "/" not in key and "~" not in key else _escape(key))
        # A scalar first (most fields are): isinstance against the Mapping ABC is slow.
        if type(value) in _LEAVES or not value or not isinstance(value, Mapping):
            paths.append(path)
            continue
        stored = admitted[key]
        if isinstance(stored, Mapping) and stored:
            paths.extend(declared_paths(value, stored, path + "/"))
        else:
            paths.append(path)
    return paths


def _cut(spec: Mapping[str, Any], segments: Sequence[str]) -> str | None:
    """The spec path of ``segments`` in ``spec``, cut where ``spec`` holds a leaf; None
    when ``spec`` has no field there."""
    value: Any = spec
    for depth, segment in enumerate(segments):
        if not isinstance(value, Mapping) or not value:
            return SPEC + "/".join(_escape(s) for s in segments[:depth]) if depth else None
        if segment not in value:
            return None
        value = value[segment]
    return SPEC + "/".join(_escape(s) for s in segments)


def converted_paths(
    raw: Mapping[str, Any],
    storage: Mapping[str, Any],
    renamed: Sequence[tuple[str, str]],
    old_fields: Callable[[], Mapping[str, Any]],
) -> list[str]:
    """The storage version's spec paths a manifest of another version declares.

    ``raw`` is its spec as written, ``storage`` the admitted (converted) spec, ``renamed`` the
    version's ``(old field, storage field)`` pairs (dotted, documents' spelling), and
    ``old_fields()`` the old version's whole spec (defaults included; asked for only
    when needed). The rule, in order:

    1. a written field the storage version has at the same path declares that path
       (most fields: a conversion usually keeps names);
    2. a written field ``renamed`` maps (or one below it) declares the mapped path;
    3. when a written field is neither, the conversion put its value somewhere the rule
       cannot see: every storage field the old version has no field for is declared
       too, as every field was before (a conflict is loud; a write lost because another
       manager kept the field would be silent).
    """
    renames = [(old.split("."), new.split(".")) for old, new in renamed]
    paths: set[str] = set()
    unmapped = False
    for path in leaf_paths(raw):
        segments = _segments(path)
        found = _cut(storage, segments)
        if found is None:
            for old, new in renames:
                if segments[: len(old)] == old:
                    found = _cut(storage, [*new, *segments[len(old) :]])
                    break
        if found is None:
            unmapped = True
        else:
            paths.add(found)
    if unmapped:
        whole = old_fields()
        paths.update(p for p in leaf_paths(storage) if _cut(whole, _segments(p)) is None)
    return sorted(paths)


def value_at(spec: Mapping[str, Any], path: str) -> Any:
    """The value at a spec path of an unstructured spec (a marker object when absent)."""
    value: Any = spec
    for segment in _segments(path):
        if not isinstance(value, Mapping) or segment not in value:
            return _ABSENT
        value = value[segment]
    return value


def _set(spec: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = _segments(path)
    target = spec
    for segment in parents:
        child = target.get(segment)
        if not isinstance(child, dict):
            child = target[segment] = {}
        target = child
    target[last] = value


def _ancestors(path: str) -> Iterable[str]:
    end = path.rfind("/")
    while end > len(SPEC) - 1:
        yield path[:end]
        end = path.rfind("/", 0, end)


def filled(raw: Mapping[str, Any], stored: Mapping[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """``raw`` (a manifest's spec) with the stored values of ``paths`` it leaves out: a
    partial manifest, made whole enough to admit, when other managers own the fields it
    does not declare (a required one among them)."""
    result: dict[str, Any] = dict(raw)
    for path in paths:
        value = value_at(stored, path)
        if value is _ABSENT or value_at(result, path) is not _ABSENT:
            continue
        *parents, last = _segments(path)
        target = result
        for segment in parents:
            child = target.get(segment)
            target[segment] = child = dict(child) if isinstance(child, Mapping) else {}
            target = child
        target[last] = value
    return result


def others_own_spec(managed: Mapping[str, Sequence[str]], manager: str) -> bool:
    """Whether a manager other than ``manager`` owns a spec field (else an apply of
    ``manager`` takes its admitted spec as it is)."""
    return any(name != manager and any(p.startswith(SPEC) for p in paths) for name, paths in managed.items())


def merge_spec(
    old: Mapping[str, Any],
    desired: dict[str, Any],
    managed: dict[str, list[str]],
    manager: str,
    declared: Sequence[str],
    *,
    force: bool,
) -> tuple[dict[str, Any], list[FieldConflict]]:
    """The spec an apply of ``manager`` declaring ``declared`` (spec paths) makes of the
    stored spec ``old``, given the admitted spec ``desired`` (used as the result:
    pass a copy). Returns it with the conflicts found; when ``force`` they are none, and
    the fields moved to ``manager`` are taken out of the others' lists in ``managed``
    (changed in place: pass a copy)."""
    mine = set(declared)
    above = {ancestor for path in mine for ancestor in _ancestors(path)}
    conflicts: list[FieldConflict] = []
    for name, paths in list(managed.items()):
        if name == manager:
            continue
        kept: list[str] = []
        for path in paths:
            if not path.startswith(SPEC):
                kept.append(path)
                continue
            overlaps = path in mine or path in above or any(a in mine for a in _ancestors(path))
            if overlaps and not json_equal(value_at(old, path), value_at(desired, path)):
                if not force:
                    conflicts.append(FieldConflict(field_name(path), name))
                    kept.append(path)
                continue  # forced: the field is the applier's now
            kept.append(path)
            if not overlaps:
                value = value_at(old, path)
                if value is not _ABSENT:
                    _set(desired, path, value)
        if kept:
            managed[name] = kept
        else:
            del managed[name]
    return desired, conflicts


def metadata_conflicts(
    old: Mapping[str, Any],
    desired: Mapping[str, Any],
    managed: dict[str, list[str]],
    manager: str,
    *,
    force: bool,
) -> list[FieldConflict]:
    """Labels and annotations ``desired`` (an applied metadata) sets to a value other
    than the stored one while another manager owns them; with ``force`` they move to
    ``manager`` (taken out of the others' lists in ``managed``, changed in place)."""
    changed: set[str] = set()
    for field in ("labels", "annotations"):
        stored = old.get(field) or {}
        for key, value in (desired.get(field) or {}).items():
            if key in stored and stored[key] != value:
                changed.add(f"{field}/{key}")
    if not changed:
        return []
    conflicts: list[FieldConflict] = []
    for name, paths in list(managed.items()):
        if name == manager:
            continue
        taken = [p for p in paths if p in changed]
        if not taken:
            continue
        if force:
            kept = [p for p in paths if p not in changed]
            if kept:
                managed[name] = kept
            else:
                del managed[name]
        else:
            conflicts.extend(FieldConflict(field_name(p), name) for p in taken)
    return conflicts


def managed_paths(meta: Mapping[str, Any]) -> set[str]:
    """The metadata paths an applied metadata declares (labels, annotations,
    finalizers, owner references)."""
    # Written out field by field, with list comprehensions: every apply asks (a bulk
    # apply once per document), and a loop of generators took half again as long.
    paths: set[str] = set()
    labels = meta.get("labels")
    if labels:
        paths.update(["labels/" + key for key in labels])
    annotations = meta.get("annotations")
    if annotations:
        paths.update(["annotations/" + key for key in annotations])
    names = meta.get("finalizers")
    if names:
        paths.update(["finalizers/" + name for name in names])
    references = meta.get("ownerReferences")
    if references:
        paths.update(["ownerReferences/" + reference["uid"] for reference in references])
    return paths


def merge_metadata(
    old: Mapping[str, Any],
    desired: Mapping[str, Any],
    manager: str,
    wanted: Sequence[str],
    managed: dict[str, list[str]],
    *,
    wanted_set: frozenset[str],
) -> dict[str, Any]:
    """The applied metadata: ``managed`` is the managed fields after the spec's merge
    (changed here: ``manager`` gets ``wanted``, its metadata and spec paths, also given
    as a set)."""
    meta = dict(old)  # the store hands each mutation its own parsed copy
    dropped = set(managed.get(manager, ())) - wanted_set
    if dropped and len(managed) > 1:
        dropped -= {path for name, paths in managed.items() if name != manager for path in paths}
    for field in _MERGED:
        merged = {k: v for k, v in (meta.get(field) or {}).items() if f"{field}/{k}" not in dropped}
        merged.update(desired.get(field) or {})
        meta[field] = dict(sorted(merged.items()))
    finalizers = [f for f in meta.get("finalizers") or () if f"finalizers/{f}" not in dropped]
    finalizers += [f for f in desired.get("finalizers") or () if f not in finalizers]
    meta["finalizers"] = finalizers
    applied = desired.get("ownerReferences") or ()
    if applied or any(p.startswith("ownerReferences/") for p in dropped):
        uids = {reference["uid"] for reference in applied}
        stored = meta.get("ownerReferences") or ()
        meta["ownerReferences"] = [
            r for r in stored if r["uid"] not in uids and f"ownerReferences/{r['uid']}" not in dropped
        ] + loads(dumps(list(applied)))
    if wanted:
        managed[manager] = list(wanted)
    else:
        managed.pop(manager, None)
    meta["managedFields"] = dict(sorted(managed.items()))
    return meta


def update_entry(manager: str) -> str:
    """The ``managedFields`` key of ``manager``'s non-apply writes."""
    return manager + UPDATE


def _metadata_values(meta: Mapping[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    for field in _MERGED:
        for key, value in (meta.get(field) or {}).items():
            values[f"{field}/{key}"] = value
    for name in meta.get("finalizers") or ():
        values[f"finalizers/{name}"] = True
    for reference in meta.get("ownerReferences") or ():
        values[f"ownerReferences/{reference['uid']}"] = reference
    return values


def _spec_values(spec: Mapping[str, Any], prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    for key, value in spec.items():
        path = prefix + _escape(key)
        if isinstance(value, Mapping) and value:
            _spec_values(value, path + "/", values)
        else:
            values[path] = value
    return values


def recorded_update(old: Mapping[str, Any], new: Mapping[str, Any], manager: str) -> dict[str, list[str]]:
    """The managed fields after a write that is not an apply (``update``, ``patch``,
    ``edit``, ``label``) of ``manager`` turned body ``old`` into ``new``, as
    structured-merge-diff's ``Updater.Update``: every field it added or changed is
    ``manager``'s (under :func:`update_entry`) and no longer any other manager's --
    an update always wins, without conflict -- and a field it removed is nobody's.
    The same mapping (not a copy) when it changed no field."""
    managed: dict[str, list[str]] = old["metadata"].get("managedFields") or {}
    before = _metadata_values(old["metadata"], {})
    after = _metadata_values(new["metadata"], {})
    if not same(old["spec"], new["spec"]):
        _spec_values(old["spec"], SPEC, before)
        _spec_values(new["spec"], SPEC, after)
    changed = {
        path for path, value in after.items() if path not in before or not json_equal(before[path], value)
    }
    removed = before.keys() - after.keys()
    touched = changed | removed
    if not touched:
        return managed
    above = {ancestor for path in touched if path.startswith(SPEC) for ancestor in _ancestors(path)}
    key = update_entry(manager)
    result: dict[str, list[str]] = {}
    for name, paths in managed.items():
        if name == key:
            continue
        kept = [
            path
            for path in paths
            if path not in touched
            and path not in above
            and not (path.startswith(SPEC) and any(a in touched for a in _ancestors(path)))
        ]
        if kept:
            result[name] = kept
    mine = (set(managed.get(key, ())) | changed) - removed
    if mine:
        result[key] = sorted(mine)
    return dict(sorted(result.items()))


def only_spec_paths_recorded(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` (an object stored before spec fields were
    tracked: no spec path in its managed fields) only by the spec paths it would record:
    an identical apply to it still appends nothing (the log is forever, and an upgrade
    does not rewrite it); its spec paths are recorded with its next real change."""
    if not same(new["spec"], old["spec"]):
        return False
    managed = old["metadata"].get("managedFields") or {}
    if any(path.startswith(SPEC) for paths in managed.values() for path in paths):
        return False
    stripped = {
        name: kept
        for name, paths in new["metadata"]["managedFields"].items()
        if (kept := [p for p in paths if not p.startswith(SPEC)])
    }
    return {**new, "metadata": {**new["metadata"], "managedFields": stripped}} == old
