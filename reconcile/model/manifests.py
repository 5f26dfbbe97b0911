"""Reading manifests: multi-document YAML and JSON, safely.

YAML is read with the safe loader only, so a tag that asks to construct a Python object
(``!!python/object`` and friends) is an error, never executed. Aliases are legal YAML, but
a "billion laughs" document expands them exponentially: before constructing a document we
walk its node graph, counting every alias expansion, and refuse it past a budget, so the
bomb is rejected after a bounded amount of work and memory. The walk counts the expanded
text of the scalars too (:data:`MAX_EXPANDED_BYTES`): an alias of one long string,
repeated, is few nodes but each is the whole string once the document is written out. The same walk refuses
nesting deeper than :data:`MAX_DEPTH` (JSON is checked after parsing, and a document too
deep for the parser's own recursion is refused with the same message), so no later
recursive step (structuring, encoding) can overflow the stack on hostile input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs
import yaml

from reconcile.errors import FieldError, InvalidError
from reconcile.model.validation import MAX_DEPTH

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_NODES",
    "MAX_EXPANDED_BYTES",
    "MAX_INPUT_BYTES",
    "Document",
    "check_depth",
    "load_manifests",
    "read_manifests",
]


#: Expanded YAML nodes one document may have (a 1.5 MiB object has far fewer).
MAX_DOCUMENT_NODES = 1_000_000
#: Bytes one manifest file or stream may have.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: Characters of scalars one document may expand to, its aliases counted each time.
MAX_EXPANDED_BYTES = MAX_INPUT_BYTES
#: Files read as YAML whatever their first character.
_YAML_SUFFIXES = (".yaml", ".yml")

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@attrs.frozen
class Document:
    """One object read from a manifest: where it came from, and its raw data."""

    source: str
    index: int
    data: object

    @property
    def location(self) -> str:
        """``site.yaml, document 2``: how errors name this document."""
        return f"{self.source}, document {self.index}"


def _invalid(source: str, message: str) -> InvalidError:
    return InvalidError([FieldError("", message)], source=source)


def _check_nodes(root: yaml.Node, budget: int) -> None:
    """Count expanded nodes against the budget; refuse duplicate keys in a mapping (a
    silent "last one wins" hides typos, and Kubernetes' strict decoding refuses them)."""
    stack, seen, size = [(root, 1)], 0, 0
    checked: set[int] = set()
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > budget:
            raise ValueError(f"document expands to more than {budget} nodes (alias bomb?)")
        if isinstance(node, yaml.ScalarNode):
            size += len(node.value)
            if size > MAX_EXPANDED_BYTES:
                raise ValueError(f"document expands to more than {MAX_EXPANDED_BYTES} bytes (alias bomb?)")
        if depth > MAX_DEPTH and isinstance(node, yaml.CollectionNode):
            mark = node.start_mark
            raise ValueError(f"{_too_deep()} (line {mark.line + 1}, column {mark.column + 1})")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            if id(node) not in checked:
                checked.add(id(node))
                _check_duplicates(node)
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _too_deep() -> str:
    return f"nested deeper than {MAX_DEPTH} levels"


_SCALARS = frozenset({str, int, float, bool, type(None)})


def check_depth(data: object) -> None:
    """Refuse (ValueError) data nested deeper than MAX_DEPTH, without recursing: for
    manifests that did not come through :func:`load_manifests` (the Python API). One
    level at a time, its children gathered with ``extend`` (no tuple per node: the bulk
    apply checks every document)."""
    level: list[object] = [data]
    depth = 1
    while level:
        below: list[object] = []
        for item in level:
            kind = type(item)
            # The plain types first: an ABC check per node was most of this function's time.
            if kind in _SCALARS:
                continue
            if kind is dict or (kind is not list and isinstance(item, Mapping)):
                below.extend(item.values())  # type: ignore[attr-defined]
            elif kind is list or isinstance(item, list):
                below.extend(item)  # type: ignore[arg-type]
            else:
                continue
            if depth > MAX_DEPTH:
                raise ValueError(_too_deep())
        level = below
        depth += 1


def _check_duplicates(node: yaml.MappingNode) -> None:
    keys: set[str] = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value != "<<":
            if key.value in keys:
                mark = key.start_mark
                where = f"line {mark.line + 1}, column {mark.column + 1}"
                raise ValueError(f"duplicate key {key.value!r} ({where})")
            keys.add(key.value)


def _yaml_documents(text: str, source: str) -> Iterator[object]:
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node guards this
                break
            _check_nodes(node, MAX_DOCUMENT_NODES)
            yield loader.construct_document(node)
    except yaml.constructor.ConstructorError as exc:
        message = f"{_describe(exc)} (only plain data is allowed)"
        raise _invalid(source, f"invalid YAML: {message}") from None
    except yaml.YAMLError as exc:
        message = _describe(exc).replace("exceeded maximum nesting depth", _too_deep())
        raise _invalid(source, f"invalid YAML: {message}") from None
    except RecursionError:
        raise _invalid(source, f"invalid YAML: {_too_deep()}") from None
    except ValueError as exc:
        raise _invalid(source, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def _describe(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"{exc.problem}{where}"
    return " ".join(str(exc).split())


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _flatten(data: object) -> Iterator[object]:
    """A list, or a ``kind: List`` object, stands for its items."""
    if isinstance(data, list):
        yield from data
    elif isinstance(data, dict) and data.get("kind") == "List" and "items" in data:
        items = data["items"]
        yield from items if isinstance(items, list) else [items]
    elif data is not None:
        yield data


def load_manifests(text: str | bytes, *, source: str = "<stdin>") -> list[Document]:
    """Parse every document in ``text``: YAML when ``source`` names a ``.yaml``/``.yml``
    file (YAML includes JSON: a file whose first document is a flow mapping ``{...}``
    followed by more is YAML, not broken JSON), else JSON when it looks like JSON."""
    if len(text) > MAX_INPUT_BYTES:
        raise _invalid(source, f"input is larger than {MAX_INPUT_BYTES} bytes")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _invalid(source, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    raw: list[object]
    if not source.endswith(_YAML_SUFFIXES) and text.lstrip()[:1] in ("{", "["):
        try:
            raw = [json.loads(text, object_pairs_hook=_unique_pairs)]
            check_depth(raw[0])
        except json.JSONDecodeError as exc:
            raise _invalid(source, f"invalid JSON: {exc}") from None
        except ValueError as exc:
            raise _invalid(source, f"invalid JSON: {exc}") from None
        except RecursionError:
            raise _invalid(source, f"invalid JSON: {_too_deep()}") from None
    else:
        raw = list(_yaml_documents(text, source))
    items = [item for data in raw for item in _flatten(data)]
    return [Document(source, index, item) for index, item in enumerate(items, start=1)]


#: Top-level fields of which a manifest has at least one; a file of a folder whose
#: documents have none (a provider config kept beside the manifests) is not one.
_MANIFEST_FIELDS = ("apiVersion", "api_version", "kind")


def _is_manifest(documents: list[Document]) -> bool:
    """Whether a file's documents look like manifests: some document is a mapping with an
    ``apiVersion`` (or ``api_version``) or a ``kind``. One with only half of them still
    counts, so that a manifest missing its ``kind`` is refused with the field path rather
    than passed over."""
    return any(
        isinstance(document.data, dict) and any(field in document.data for field in _MANIFEST_FIELDS)
        for document in documents
    )


def read_manifests(path: str | Path, *, skipped: Callable[[Path], None] | None = None) -> list[Document]:
    """Read one manifest file, or every ``.yaml``/``.yml``/``.json`` file under a folder.

    In a folder, a file that is not a manifest (no document has ``apiVersion`` or
    ``kind``: a provider config, a CI file) is passed over and handed to ``skipped`` (the
    CLI says so on stderr); a file named on its own is always read as manifests, so
    giving the wrong one is an error naming what is missing."""
    root = Path(path)
    folder = root.is_dir()
    if folder:
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))
    else:
        files = [root]
    documents: list[Document] = []
    for file in files:
        try:
            with file.open("rb") as handle:
                text = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise _invalid(str(file), f"cannot read: {exc.strerror}") from None
        found = load_manifests(text, source=str(file))
        if folder and found and not _is_manifest(found):
            if skipped is not None:
                skipped(file)
            continue
        documents.extend(found)
    return documents
