"""The runtime layer: the Runtime that wires store, controllers and providers, supervision
and provider discovery; the process-wide collector tuning it applies when asked
(:mod:`reconcile.runtime.collecting`).

Its names are imported on first use (PEP 562), as :mod:`reconcile`'s are: a command that
needs only the collector tuning (``reconcile apply``) does not pay for the Runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconcile._exports import lazy_exports

if TYPE_CHECKING:
    from reconcile.model.discovery import discover_providers
    from reconcile.runtime.converging import Convergence
    from reconcile.runtime.health import ControllerHealth, Health
    from reconcile.runtime.operators import Operator
    from reconcile.runtime.options import RuntimeOptions
    from reconcile.runtime.running import Runtime
    from reconcile.runtime.supervising import Supervisor

#: The modules of this layer's names, as the imports above list them.
_MODULES: dict[str, tuple[str, ...]] = {
    "reconcile.model.discovery": ("discover_providers",),
    "reconcile.runtime.converging": ("Convergence",),
    "reconcile.runtime.health": ("ControllerHealth", "Health"),
    "reconcile.runtime.operators": ("Operator",),
    "reconcile.runtime.options": ("RuntimeOptions",),
    "reconcile.runtime.running": ("Runtime",),
    "reconcile.runtime.supervising": ("Supervisor",),
}
_HOMES: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}
"""Where each name lives: the module imported on its first use."""

__all__ = [
    "ControllerHealth",
    "Convergence",
    "Health",
    "Operator",
    "Runtime",
    "RuntimeOptions",
    "Supervisor",
    "discover_providers",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
