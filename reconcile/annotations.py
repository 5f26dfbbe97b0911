"""The annotations and the finalizer the engine reads and writes on a managed resource.

Users set the policies (``reconcile.dev/deletion-policy``,
``reconcile.dev/management-policy``, ``reconcile.dev/paused``, ``reconcile.dev/adopt``);
the engine writes the rest, and a provider may read them (the identity its own last write
left, whether a create is pending). Plain strings, importable without any layer of the
engine: providers use them without reaching into :mod:`reconcile.model`.
"""

from __future__ import annotations

__all__ = [
    "ANNOTATION_ADOPT",
    "ANNOTATION_CREATE_PENDING",
    "ANNOTATION_CREATE_SUCCEEDED",
    "ANNOTATION_DELETION_POLICY",
    "ANNOTATION_EXTERNAL_IDENTITY",
    "ANNOTATION_EXTERNAL_NAME",
    "ANNOTATION_MANAGEMENT_POLICY",
    "ANNOTATION_PAUSED",
    "DELETION_POLICIES",
    "FINALIZER",
    "MANAGEMENT_POLICIES",
]

#: The finalizer the engine puts on every managed resource it may have to clean up.
FINALIZER = "reconcile.dev/managed"
#: The external name (id) of the resource, when the external system chose it.
ANNOTATION_EXTERNAL_NAME = "reconcile.dev/external-name"
#: What the provider reported as the identity of the external resource the engine's own
#: last create or update left (a bucket's creation date, an object's ETag and version):
#: written by the engine with the action's outcome, never from a mere observation, so an
#: unmarked resource somebody else put in ours' place is told apart (see :func:`reconcile.ours`).
ANNOTATION_EXTERNAL_IDENTITY = "reconcile.dev/external-identity"
#: Set (durably) just before create is called, and when it returned.
ANNOTATION_CREATE_PENDING = "reconcile.dev/external-create-pending"
ANNOTATION_CREATE_SUCCEEDED = "reconcile.dev/external-create-succeeded"
#: ``Delete`` (default): deleting the resource deletes the external one. ``Orphan``: keeps it.
ANNOTATION_DELETION_POLICY = "reconcile.dev/deletion-policy"
DELETION_POLICIES = ("Delete", "Orphan")
#: ``Full`` (default): create, update, delete. ``ObserveOnly``: only report what exists.
ANNOTATION_MANAGEMENT_POLICY = "reconcile.dev/management-policy"
MANAGEMENT_POLICIES = ("Full", "ObserveOnly")
#: ``"true"``: the engine does nothing for this resource until it is removed.
ANNOTATION_PAUSED = "reconcile.dev/paused"
#: ``"true"``: take over an external resource that exists and is not ours (Terraform's
#: ``import``), through the provider's optional ``adopt``; recorded as ``Adopted`` and
#: removed once done (``reconcile adopt KIND/NAME`` sets it).
ANNOTATION_ADOPT = "reconcile.dev/adopt"
