"""Admission hooks: a kind's own mutating and validating steps, with a failure policy
each, as Kubernetes' admission webhooks have (seed principle 5: "fail open or fail closed
deliberately").

A hook is a function of an :class:`AdmissionRequest`, plain or ``async``. A *mutating*
hook returns the object's new spec (or the whole new :class:`~reconcile.model.Resource`,
to change labels or annotations), or None for no change: it is where defaults that need
more than an attrs default are set (defaulting hooks). It may refuse as a validating
hook does. A *validating* hook returns the
:class:`~reconcile.errors.FieldError` values it finds (paths from the object's root:
``spec.title``), or raises :class:`~reconcile.errors.InvalidError`; returning None or
nothing means the object passes.

What a hook does when it breaks (raises anything else, or does not answer within its
``timeout`` seconds) is its :class:`FailurePolicy`: ``Fail`` refuses the write, naming
the hook; ``Ignore`` lets the object through unchanged by that hook, and the write
records an ``AdmissionHookIgnored`` event in the object's history (and the caller hears
a warning). A refusal by a hook (field errors) is never ignored: it is the hook working.

The order is fixed and documented: the schema first (structuring, attrs defaults and
validators, the kind's ``validate`` and ``admit``), then every mutating hook in the order
it was registered (each sees the previous one's result, structured again, so attrs
validators hold), then every validating hook in registration order (each sees the final
object; every refusal is reported at once). Nothing is stored before the last one passed.
The running of the chain is :mod:`reconcile.api.reviewing`'s.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import attrs

from reconcile.errors import FieldError
from reconcile.model.resource import Resource

__all__ = [
    "DEFAULT_HOOK_TIMEOUT",
    "AdmissionHook",
    "AdmissionRequest",
    "FailurePolicy",
    "HookFunction",
]

#: Seconds a hook may take when it declares no timeout (Kubernetes' webhook default).
DEFAULT_HOOK_TIMEOUT = 10.0


class FailurePolicy(enum.Enum):
    """What a hook that breaks (raises, or times out) does to the write."""

    #: Refuse the write (fail closed): the hook's check is a guarantee.
    FAIL = "Fail"
    #: Let the object through as it stands, and record a warning event (fail open): the
    #: hook's work is a convenience the write may go without.
    IGNORE = "Ignore"


@attrs.frozen
class AdmissionRequest:
    """What an admission hook is given."""

    #: The object as admitted so far: metadata, and the spec structured into the kind's
    #: class (mutating hooks before this one applied). Its status is the kind's default.
    object: Resource[Any, Any]
    #: A reader of other objects (``get`` and ``list``), for rules across objects: in a
    #: Runtime, a :class:`~reconcile.controller.HookReader` answering from the informer
    #: cache where a kind's informer has synced (as a webhook reads its informers: it
    #: may trail the store by the watch), else the store; outside one, the client the
    #: write goes through, reading the store.
    client: Any
    #: The manifest file the object was read from, when it came from one.
    origin: Path | None = None

    @property
    def spec(self) -> Any:
        """The object's spec (``request.object.spec``)."""
        return self.object.spec


#: A hook: a function (plain or async) of the request. Mutating hooks return the new
#: spec, the new object or None; validating hooks return field errors or None.
HookFunction = Callable[[AdmissionRequest], Any | Awaitable[Any]]


@attrs.frozen
class AdmissionHook:
    """One hook of a kind's admission chain."""

    function: HookFunction
    phase: Literal["mutating", "validating"]
    failure_policy: FailurePolicy = FailurePolicy.FAIL
    #: Seconds the hook may take; past them it counts as broken (its failure policy says
    #: what then).
    timeout: float = DEFAULT_HOOK_TIMEOUT
    #: How messages and events name it (the function's qualified name by default).
    name: str = ""

    def __attrs_post_init__(self) -> None:
        if self.phase not in ("mutating", "validating"):
            raise ValueError(f"hook phase must be mutating or validating, not {self.phase!r}")
        if not self.timeout > 0:
            raise ValueError(f"hook {self.name or self.function!r}: timeout must be > 0 seconds")
        if not self.name:
            name = getattr(self.function, "__qualname__", None) or type(self.function).__name__
            object.__setattr__(self, "name", name)
        if not isinstance(self.failure_policy, FailurePolicy):
            object.__setattr__(self, "failure_policy", policy_of(self.failure_policy))


def policy_of(value: FailurePolicy | str) -> FailurePolicy:
    """A failure policy from itself or its name (``"Fail"``, ``"Ignore"``, any case)."""
    if isinstance(value, FailurePolicy):
        return value
    for policy in FailurePolicy:
        if str(value).lower() == policy.value.lower():
            return policy
    raise ValueError(f"failure_policy must be Fail or Ignore, not {value!r}")


def field_errors(result: object, hook: AdmissionHook) -> list[FieldError]:
    """What a validating hook returned, as field errors (None and empty: none);
    TypeError for anything else, naming the hook."""
    if result is None:
        return []
    if isinstance(result, FieldError):
        return [result]
    if isinstance(result, Iterable) and not isinstance(result, str | bytes):
        errors = list(result)
        if all(isinstance(e, FieldError) for e in errors):
            return errors
    raise TypeError(f"validating hook {hook.name} returned {type(result).__name__}, not FieldErrors or None")
