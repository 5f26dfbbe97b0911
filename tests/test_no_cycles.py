"""No circles inside a package: the modules of each package of ``reconcile`` and
``reconcile_providers`` import one another in one direction only.

An import counts wherever it is written: at the top, inside a function (an import put
off to run time is still a dependency), or under ``TYPE_CHECKING`` (a type is one too).
The modules are read with :mod:`ast`, never imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[1]
TREES = {"reconcile": ROOT / "reconcile", "reconcile_providers": ROOT / "providers" / "reconcile_providers"}


def modules(top: str, where: Path) -> dict[str, Path]:
    """Every module under ``where`` (the package ``top``), by dotted name."""
    found = {}
    for path in sorted(where.rglob("*.py")):
        parts = [top, *path.relative_to(where).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every module of ``known`` an import anywhere in the module names: ``import a.b``
    names ``a.b``; ``from a import b`` names ``a.b`` when that is a module, else ``a``
    (whose ``b`` it reads). A package's own ``__init__``, which Python runs before any of
    its modules, is named only when a name is read from it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                source = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [node.module])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in known:
                    yield submodule
                elif source in known:
                    yield source


def package_of(name: str, path: Path) -> str:
    """The package whose circle a module could be part of: a package's ``__init__`` is
    in the package it starts."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def strongly_connected(members: set[str], edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The groups of two or more of ``members`` that import one another round a circle
    (Tarjan's algorithm over the edges among them)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    result: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges[node] & members):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                result.append(frozenset(group))

    for node in sorted(members):
        if node not in index:
            visit(node)
    return result


def circles(found: dict[str, Path]) -> list[frozenset[str]]:
    """The circles of the import graph restricted to each package."""
    edges = {name: set(imported(name, path, set(found))) - {name} for name, path in found.items()}
    packages: dict[str, set[str]] = {}
    for name, path in found.items():
        packages.setdefault(package_of(name, path), set()).add(name)
    return [group for members in packages.values() for group in strongly_connected(members, edges)]


def test_no_circle_inside_a_package() -> None:
    """Within each package, the modules' imports form no circle."""
    found = [group for top, where in TREES.items() for group in circles(modules(top, where))]
    assert not found, sorted(sorted(group) for group in found)


def test_a_circle_is_found_however_it_is_imported(tmp_path: Path) -> None:
    """A circle closed by an import under TYPE_CHECKING and a relative one inside a
    function is found, and so is one through the package's ``__init__``; imports one way
    are no circle, nor are imports that go round through another package."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg.e import E\n",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b.py": "B = 2\ndef late():\n    from .a import A\n",
        "c.py": "import pkg.a\n",
        "d.py": "from pkg import c\nimport pkg.sub.x\n",
        "e.py": "import pkg\nE = 5\n",
        "sub/__init__.py": "",
        "sub/x.py": "from pkg import d\nfrom . import y\n",
        "sub/y.py": "",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    found = circles(modules("pkg", package))
    assert sorted(sorted(group) for group in found) == [["pkg", "pkg.e"], ["pkg.a", "pkg.b"]]
