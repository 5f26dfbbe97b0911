"""``--import MODULE``: the kinds an embedding service declares, visible to the CLI.

A service that declares kinds of its own (an operator's ``Widget``) passes them to its
``Runtime(kinds=...)``; the command line knows only the installed providers' kinds, so
``get``, ``describe``, ``history`` and ``explain`` would call its objects unknown. The
service names the module that declares them, with ``--import`` (repeatable) or
``RECONCILE_IMPORT`` (comma-separated), and the CLI imports it.

The convention is the entry points' own spelling, ``MODULE[:ATTRIBUTE]``, with
``kinds`` as the attribute when none is given: the attribute is an iterable of
:class:`~reconcile.model.Kind` (a list, or the very ``KindRegistry`` the service gives
its Runtime), or a provider (``name``, ``kinds``, ``connect``: what an entry point of the
``reconcile.providers`` group would name, registered under its name), or an
:class:`~reconcile.runtime.Operator` (its kinds, with no provider). Nothing is called:
importing the module must be enough, as it is for the service itself.

As uvicorn does with its application, the current folder is put on ``sys.path`` first, so
``reconcile --import myservice.kinds get`` works from the service's checkout. A module
that cannot be imported, or that lacks the attribute, or whose attribute holds something
else, is bad input (exit 2) naming the module, never a traceback nor a kind silently left
out.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reconcile.cli.failing import BadInput

if TYPE_CHECKING:  # the model is imported when a module is, not for every command
    from reconcile.model import Kind, KindRegistry
    from reconcile.runtime import Operator

__all__ = ["ENVIRONMENT", "import_kinds", "imported_operators", "imports_from"]

#: The environment variable that lists modules to import (comma-separated).
ENVIRONMENT = "RECONCILE_IMPORT"
_DEFAULT_ATTRIBUTE = "kinds"


def imports_from(options: Sequence[str], environment: str | None) -> tuple[str, ...]:
    """The modules to import: those ``RECONCILE_IMPORT`` lists, then the ``--import``
    options (each once, in that order)."""
    listed = [part.strip() for part in (environment or "").split(",")]
    return tuple(dict.fromkeys(name for name in (*listed, *options) if name))


def _is_provider(candidate: object) -> bool:
    return not isinstance(candidate, type) and all(
        hasattr(candidate, attribute) for attribute in ("name", "kinds", "connect")
    )


def _load(spec: str) -> object:
    module_name, _, attribute = spec.partition(":")
    attribute = attribute or _DEFAULT_ATTRIBUTE
    if not module_name:
        raise BadInput(f"--import {spec}: give MODULE or MODULE:ATTRIBUTE")
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any error of the module's own code is the user's to fix
        raise BadInput(f"--import {spec}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise BadInput(
            f"--import {spec}: module {module_name} has no {attribute!r} (an iterable of Kind, or a provider)"
        ) from None


def _kinds_of(spec: str, value: object) -> tuple[str | None, list[Kind]]:
    from reconcile.model import Kind  # noqa: PLC0415 - see the imports above

    provider = None
    if _is_provider(value):
        provider, value = str(value.name), value.kinds  # type: ignore[attr-defined]
    elif not isinstance(value, type) and hasattr(value, "kinds"):
        value = value.kinds  # an Operator (kinds, no provider): its kinds
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        kinds = list(value)
        strangers = [type(k).__name__ for k in kinds if not isinstance(k, Kind)]
        if not strangers:
            return provider, kinds
        found = f"{strangers[0]} among them"
    else:
        found = type(value).__name__
    raise BadInput(f"--import {spec}: expected an iterable of Kind or a provider, found {found}")


def import_kinds(registry: KindRegistry, specs: Sequence[str]) -> KindRegistry:
    """Register in ``registry`` the kinds of every module ``specs`` name; return it."""
    for spec in specs:
        provider, kinds = _kinds_of(spec, _load(spec))
        for kind in kinds:
            try:
                registry.register(kind, provider=provider)
            except ValueError as exc:
                raise BadInput(f"--import {spec}: {exc}") from None
    return registry


def imported_operators(specs: Sequence[str]) -> list[Operator]:
    """The :class:`~reconcile.runtime.Operator` values among what ``specs`` name
    (``--import sites:operator``): ``reconcile run`` runs their controllers."""
    from reconcile.runtime import Operator  # noqa: PLC0415 - only run needs the runtime

    return [value for value in (_load(spec) for spec in specs) if isinstance(value, Operator)]
