"""The curated public API: what ``import reconcile`` exports is documented, grouped, and
closed under what it returns; what left the top level is still where the docs say."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import reconcile
import reconcile.errors

ROOT = Path(__file__).parents[1]
#: Where the rest of the public API lives (the module docstring names them): a type a
#: public function returns is reachable when ``reconcile`` or one of these exports it.
SUBPACKAGES = (
    "reconcile.errors",
    "reconcile.typing",
    "reconcile.annotations",
    "reconcile.controller",
    "reconcile.store",
    "reconcile.testing",
)
#: The names that left the top level, and the public module each is imported from now.
MOVED = {
    "ANNOTATION_CREATE_PENDING": "reconcile.annotations",
    "ANNOTATION_CREATE_SUCCEEDED": "reconcile.annotations",
    "ANNOTATION_EXTERNAL_IDENTITY": "reconcile.annotations",
    "ANNOTATION_MANAGEMENT_POLICY": "reconcile.annotations",
    "CachedClient": "reconcile.controller",
    "Controller": "reconcile.controller",
    "Priority": "reconcile.controller",
    "WorkQueue": "reconcile.controller",
    "SQLiteStore": "reconcile.store",
    "VerifyReport": "reconcile.store",
    "open_store": "reconcile.store",
    "ListingOwned": "reconcile.typing",
    "StoreBound": "reconcile.typing",
}


def reachable() -> dict[int, str]:
    """Every object ``reconcile`` and its public subpackages export, by identity."""
    found: dict[int, str] = {}
    for name in ("reconcile", *SUBPACKAGES):
        module = importlib.import_module(name)
        for public in module.__all__:
            found.setdefault(id(getattr(module, public)), f"{name}.{public}")
    return found


def named_types(annotation: object) -> Iterator[type]:
    """The classes an annotation names (``list[Applied] | None`` names list, Applied and
    NoneType)."""
    origin = typing.get_origin(annotation)
    if origin is not None:
        if isinstance(origin, type):
            yield origin
        for argument in typing.get_args(annotation):
            yield from named_types(argument)
    elif isinstance(annotation, list | tuple):  # Callable's parameter list
        for argument in annotation:
            yield from named_types(argument)
    elif isinstance(annotation, type):
        yield annotation


def public_callables() -> Iterator[tuple[str, Callable[..., object]]]:
    """Each exported function, and each public method and property of each exported
    class (inherited ones included: they are called on the class's objects)."""
    for name in reconcile.__all__:
        value = getattr(reconcile, name)
        if inspect.isfunction(value):
            yield name, value
        elif inspect.isclass(value) and not issubclass(value, BaseException):
            for attribute in dir(value):
                if attribute.startswith("_"):
                    continue
                static = inspect.getattr_static(value, attribute)
                if isinstance(static, property) and static.fget is not None:
                    yield f"{name}.{attribute}", static.fget
                elif isinstance(static, staticmethod | classmethod):
                    yield f"{name}.{attribute}", static.__func__
                elif inspect.isfunction(static):
                    yield f"{name}.{attribute}", static


def from_outside(cls: type) -> bool:
    """Whether ``cls`` is the standard library's (builtins included)."""
    return cls.__module__.partition(".")[0] in {*sys.stdlib_module_names, "builtins"}


class TestCurated:
    """What the top level exports."""

    def test_returned_types_are_reachable(self) -> None:
        """Every class named by the return annotation of an exported function or of a
        public method of an exported class (resolved with ``typing.get_type_hints``) is
        the standard library's or exported by ``reconcile`` or a public subpackage."""
        exported = reachable()
        unreachable: list[str] = []
        unresolved: list[str] = []
        for where, function in public_callables():
            try:
                hints = typing.get_type_hints(function)
            except NameError as exc:
                unresolved.append(f"{where}: {exc}")
                continue
            unreachable.extend(
                f"{where} -> {cls.__module__}.{cls.__qualname__}"
                for cls in named_types(hints.get("return"))
                if id(cls) not in exported and not from_outside(cls)
            )
        assert not unresolved, unresolved
        assert not unreachable, unreachable

    def test_the_checks_see_what_the_issue_named(self) -> None:
        """The walk covers the methods and functions the missing types came from."""
        walked = dict(public_callables())
        assert {"Client.apply_many", "Runtime.health", "Runtime.apply_many", "load_manifests"} <= set(walked)
        returned = set(named_types(typing.get_type_hints(walked["Client.apply_many"])["return"]))
        assert reconcile.Applied in returned
        assert reconcile.Health in set(named_types(typing.get_type_hints(walked["Runtime.health"])["return"]))

    def test_every_error_is_exported(self) -> None:
        """The errors group is all of :mod:`reconcile.errors`."""
        assert set(reconcile.errors.__all__) <= set(reconcile.__all__)
        for name in reconcile.errors.__all__:
            assert getattr(reconcile, name) is getattr(reconcile.errors, name)

    def test_the_docstring_groups_every_name(self) -> None:
        """Every exported name but the errors (a group of their own, "every subclass") is
        named in the module docstring, in one of its groups."""
        assert reconcile.__doc__ is not None
        groups = reconcile.__doc__.split("* **")[1:]
        assert [group.split("**")[0] for group in groups] == [
            "A service author",
            "An operator author",
            "A provider author",
            "Errors",
        ]
        for name in set(reconcile.__all__) - set(reconcile.errors.__all__):
            assert re.search(rf":(class|func):`{name}`", reconcile.__doc__), name

    @pytest.mark.parametrize(("name", "home"), sorted(MOVED.items()))
    def test_moved_names_live_in_their_subpackage(self, name: str, home: str) -> None:
        """What left the top level is no longer there, and is exported where it lives
        now (the subpackage's ``__all__``)."""
        assert name not in reconcile.__all__
        with pytest.raises(AttributeError):
            getattr(reconcile, name)
        module = importlib.import_module(home)
        assert name in module.__all__
        assert getattr(module, name) is not None


class TestDocumented:
    """The reference documents every exported name."""

    @staticmethod
    def code_in_reference() -> str:
        """The code spans and blocks of ``docs/reference/*.md``."""
        text = "\n".join(path.read_text() for path in sorted((ROOT / "docs" / "reference").glob("*.md")))
        return "\n".join(re.findall(r"```.*?```|`[^`\n]+`", text, flags=re.DOTALL))

    def test_every_exported_name_is_in_the_reference(self) -> None:
        """Each name of ``reconcile.__all__`` appears as code in docs/reference (as
        ``Name``, ``Name(...)`` or ``reconcile.Name``; not as part of another name)."""
        code = self.code_in_reference()
        missing = [
            name
            for name in reconcile.__all__
            if not re.search(rf"(?:(?<![\w.])|(?<=\breconcile\.)){re.escape(name)}\b", code)
        ]
        assert not missing

    def test_an_undocumented_name_would_be_found(self) -> None:
        """The check is not vacuous: a name met only inside another name, or as another
        module's attribute, is not taken for documented."""
        code = "`ControllerHealthy` `x.Health` `reconcile.Runtime`"
        pattern = r"(?:(?<![\w.])|(?<=\breconcile\.)){}\b"
        assert not re.search(pattern.format("Health"), code)
        assert re.search(pattern.format("Runtime"), code)
