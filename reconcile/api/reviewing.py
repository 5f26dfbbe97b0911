"""Running a kind's admission chain: its mutating hooks, then its validating hooks, each
under its failure policy and timeout (see :mod:`reconcile.model.hooks` for the contract).

:meth:`Admission.admit <reconcile.api.admission.Admission.admit>` is synchronous and
needs no store: the schema (structuring, defaults, validators, the kind's ``validate``
and ``admit``) runs there, so the CLI refuses bad input before it opens a database. The
hooks may await (a read of another object, a call to some service), so they run here,
on the write path, once the store is open: :func:`review` turns an :class:`Admitted`
into the reviewed one the write stores. A kind without hooks is never awaited for: the
callers test ``needs_review`` first, so a bulk apply of such kinds pays one attribute
read per document and no coroutine.

A mutating hook's result is admitted again (schema and all) before the next hook sees
it, so no hook can store what the schema refuses, and every hook sees a canonical
object. Validating hooks all run, and every refusal is reported in one
:class:`InvalidError`, field paths in the documents' spelling (``spec.maxPages``). A
hook that breaks (raises something other than InvalidError, or overruns its timeout)
refuses the write under ``Fail``, naming the hook, and under ``Ignore`` is skipped: the
reviewed object carries what to record (``AdmissionHookIgnored``, in the same
transaction as the write) and what to warn the caller of. A synchronous hook runs on
the event loop: its timeout can only be enforced on what it awaits, so a hook that may
take long should be ``async``.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import attrs

from reconcile.api.admission import Admission, Admitted
from reconcile.errors import FieldError, InvalidError
from reconcile.model.hooks import AdmissionHook, AdmissionRequest, FailurePolicy, field_errors
from reconcile.model.meta import ObjectMeta
from reconcile.model.resource import Resource
from reconcile.model.spelling import camel_path

__all__ = ["ADMISSION_HOOK_IGNORED", "review"]

#: The event recorded in an object's history when a hook under ``Ignore`` broke.
ADMISSION_HOOK_IGNORED = "AdmissionHookIgnored"


class _Broken(Exception):  # noqa: N818 - not an error of ours: a hook that broke
    """A hook raised (not a refusal) or overran its timeout: its policy decides."""


async def _call(hook: AdmissionHook, request: AdmissionRequest) -> Any:
    try:
        result = hook.function(request)
        if inspect.isawaitable(result):
            async with asyncio.timeout(hook.timeout):
                result = await result
    except InvalidError:
        raise
    except TimeoutError:
        raise _Broken(f"did not answer within {hook.timeout:g} s") from None
    except Exception as exc:
        raise _Broken(f"raised {type(exc).__name__}: {exc}") from exc
    return result


def _object_of(admission: Admission, admitted: Admitted) -> Resource[Any, Any]:
    body = admitted.body
    meta = admission.converter.structure(body["metadata"], ObjectMeta)
    return Resource(body["apiVersion"], body["kind"], meta, admitted.spec, admitted.kind.status_type())


def _from_root(errors: tuple[FieldError, ...] | list[FieldError], hook: AdmissionHook) -> list[FieldError]:
    """A hook's field errors, paths in the documents' spelling, each saying which hook."""
    return [FieldError(camel_path(e.path), f"{e.message} (hook {hook.name})") for e in errors]


def _mutated(obj: Resource[Any, Any], result: object, hook: AdmissionHook) -> Resource[Any, Any] | None:
    """The object a mutating hook's result makes (None: unchanged); InvalidError for
    field errors (a mutating hook may refuse too); TypeError for a result that is
    neither the spec's class, a Resource, field errors nor None."""
    if result is None or result is obj:
        return None
    if isinstance(result, FieldError | list | tuple):  # a refusal, as a validating hook's
        errors = field_errors(result, hook)
        if errors:
            raise InvalidError(errors)
        return None
    if isinstance(result, Resource):
        if (result.api_version, result.kind, result.metadata.namespace, result.metadata.name) != (
            obj.api_version,
            obj.kind,
            obj.metadata.namespace,
            obj.metadata.name,
        ):
            raise TypeError(
                f"mutating hook {hook.name} changed the object's apiVersion, kind, namespace or name"
            )
        return result
    if isinstance(result, type(obj.spec)):
        return None if result == obj.spec else attrs.evolve(obj, spec=result)
    raise TypeError(
        f"mutating hook {hook.name} returned {type(result).__name__}; "
        f"return the new {type(obj.spec).__name__}, the new Resource, or None"
    )


async def review(admission: Admission, admitted: Admitted, client: Any) -> Admitted:
    """``admitted`` through its kind's admission chain (itself when it has none, or was
    reviewed already): the object to store, or InvalidError with every field refused
    and every hook that broke under ``Fail``. ``client`` is what hooks read other
    objects with."""
    if not admitted.needs_review:
        return admitted
    kind, origin, said, declared = admitted.kind, admitted.origin, admitted.warnings, admitted.declared
    subject = f'{kind.kind} "{admitted.metadata["name"]}"'
    obj = _object_of(admission, admitted)
    ignored: list[dict[str, str]] = []

    def broke(hook: AdmissionHook, reason: str) -> None:
        if hook.failure_policy is FailurePolicy.FAIL:
            message = f"admission hook {hook.name} ({hook.phase}) failed: {reason}"
            raise InvalidError([FieldError("", message)], subject=subject)
        ignored.append(
            {
                "hook": hook.name,
                "phase": hook.phase,
                "failurePolicy": hook.failure_policy.value,
                "message": reason,
            }
        )

    for hook in kind.mutating_hooks:
        try:
            result = await _call(hook, AdmissionRequest(obj, client, origin))
            changed = _mutated(obj, result, hook)
        except InvalidError as exc:
            raise InvalidError(_from_root(exc.errors, hook), subject=subject) from None
        except _Broken as exc:
            broke(hook, str(exc))
            continue
        except TypeError as exc:
            broke(hook, str(exc))
            continue
        if changed is not None:
            try:
                admitted = admission.admit(changed, origin=origin)
            except InvalidError as exc:
                errors = [FieldError(e.path, f"{e.message} (as set by hook {hook.name})") for e in exc.errors]
                raise InvalidError(errors, subject=subject) from None
            obj = _object_of(admission, admitted)
    refused: list[FieldError] = []
    for hook in kind.validating_hooks:
        try:
            refused += _from_root(
                field_errors(await _call(hook, AdmissionRequest(obj, client, origin)), hook), hook
            )
        except InvalidError as exc:
            refused += _from_root(exc.errors, hook)
        except _Broken as exc:
            broke(hook, str(exc))
        except TypeError as exc:
            broke(hook, str(exc))
    if refused:
        raise InvalidError(refused, subject=subject)
    return attrs.evolve(
        admitted,
        warnings=said,
        origin=origin,
        reviewed=True,
        ignored=tuple(ignored),
        # The spec paths the applier declares stay its manifest's: the hooks run on the
        # manifest, before it is merged with the stored object, so a field a hook fills
        # in is owned by nobody (each apply brings it to what the hooks make of that
        # apply), never by every manager whose apply the hook happened to default.
        declared=declared,
    )
