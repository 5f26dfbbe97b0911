"""Names a package exports without importing their homes until first use (PEP 562).

``reconcile``, ``reconcile.model`` and ``reconcile.store`` each keep a map from a public
name to the module it lives in; :func:`lazy_exports` makes the package's module-level
``__getattr__`` (import the home on first use, then keep the value so later lookups are
plain attribute reads) and ``__dir__`` (the public names, loaded or not). A command that
needs one constant does not pay for every layer.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for the names in ``homes``."""
    module = sys.modules[package]
    names = frozenset(public)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's own name
        home = homes.get(name)
        if home is None:
            message = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(message)
        value = getattr(importlib.import_module(home), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted({*vars(module), *names})

    return __getattr__, __dir__
