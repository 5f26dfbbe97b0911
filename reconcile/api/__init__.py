"""The API layer: admission and the Client (apply, get, list, patch, delete, status,
watch, history)."""

from reconcile.api.admission import Admission, Admitted
from reconcile.api.bulk import Applied
from reconcile.api.client import DEFAULT_MANAGER, Client, ResourceList
from reconcile.api.connecting import connect
from reconcile.api.merging import merge_patch
from reconcile.api.owning import PROPAGATION_POLICIES, set_controller_reference

__all__ = [
    "DEFAULT_MANAGER",
    "PROPAGATION_POLICIES",
    "Admission",
    "Admitted",
    "Applied",
    "Client",
    "ResourceList",
    "connect",
    "merge_patch",
    "set_controller_reference",
]
