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
    from reconcile.runtime.options import RuntimeOptions
    from reconcile.runtime.running import Runtime
    from reconcile.runtime.supervising import Supervisor

_HOMES: dict[str, str] = {
    "ControllerHealth": "reconcile.runtime.health",
    "Convergence": "reconcile.runtime.converging",
    "Health": "reconcile.runtime.health",
    "Runtime": "reconcile.runtime.running",
    "RuntimeOptions": "reconcile.runtime.options",
    "Supervisor": "reconcile.runtime.supervising",
    "discover_providers": "reconcile.model.discovery",
}
"""Where each name lives: the module imported on its first use."""

__all__ = [
    "ControllerHealth",
    "Convergence",
    "Health",
    "Runtime",
    "RuntimeOptions",
    "Supervisor",
    "discover_providers",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
