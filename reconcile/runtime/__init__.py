"""The runtime layer: the Runtime that wires store, controllers and providers, supervision
and provider discovery."""

from reconcile.model.discovery import discover_providers
from reconcile.runtime.converging import Convergence
from reconcile.runtime.health import ControllerHealth, Health, ShardingHealth
from reconcile.runtime.operators import Operator
from reconcile.runtime.options import RuntimeOptions
from reconcile.runtime.running import Runtime
from reconcile.runtime.supervising import Supervisor

__all__ = [
    "ControllerHealth",
    "Convergence",
    "Health",
    "Operator",
    "Runtime",
    "RuntimeOptions",
    "ShardingHealth",
    "Supervisor",
    "discover_providers",
]
