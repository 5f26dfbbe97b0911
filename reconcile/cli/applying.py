"""``apply``, ``diff`` and ``delete``: declaring and withdrawing desired state.

``apply`` is all or nothing for bad input: every document is read and admitted before
the first write, and one refused document means none is stored (each problem is one line
naming the file, the document and the field path). Admission is pure, so checking first
costs a second pass over memory, not a second write.

The writes are all or nothing too, by default (``--atomic``): one store transaction for
every document, so a kill at any moment leaves none or all stored. ``--no-atomic`` writes
runs of 1,024 documents one after the other (less memory, shorter holds of the write
lock). Either way SIGINT and SIGTERM are taken from Python's defaults (a traceback, or
death on the spot) while ``apply`` runs: a signal stops it between two runs of writes,
never inside one, and it says exactly what is stored and where to go on from, exiting
130 or 143 (:mod:`reconcile.cli.stopping`).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from reconcile.api import Client
from reconcile.cli.completing import complete_kinds, complete_names
from reconcile.cli.declaring import (
    STDIN,
    Declared,
    admit_all,
    applied_body,
    current_of,
    read_documents,
    report,
    reviewed,
)
from reconcile.cli.failing import EXIT_FAILURE, EXIT_INPUT, BadInput, Failure
from reconcile.cli.main import checked_name, cli, run_async
from reconcile.cli.naming import split_names, type_and_name
from reconcile.cli.pruning import Pruning, prune_targets
from reconcile.cli.reading import list_all
from reconcile.cli.remembering import remember_applied, with_remembered_config
from reconcile.cli.rendering import as_yaml, qualified
from reconcile.cli.settings import Settings
from reconcile.cli.stopping import stopping_on_signals
from reconcile.errors import InvalidError, NotFoundError, ReconcileError
from reconcile.model import Event, EventType
from reconcile.model.external import ANNOTATION_ADOPT
from reconcile.model.meta import ObjectKey
from reconcile.model.printing import printable
from reconcile.runtime.collecting import collecting_less

__all__: list[str] = []

#: ``apply``'s default for ``--atomic``: one transaction was no slower for 10,000
#: documents (0.76 s against 0.81 s, ``benchmarks/atomic.py``), for a longer hold of the
#: write lock (0.16 s against 0.02 s) and a larger heap (63 MiB against 45 MiB).
ATOMIC_DEFAULT = True


_FILENAMES = click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    required=True,
    help="A manifest file, a folder (read recursively), or - for stdin. Repeatable.",
)


@cli.command()
@click.argument(
    "saved_plan", metavar="[PLANFILE]", required=False, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    help="A manifest file, a folder (read recursively), or - for stdin. Repeatable.",
)
@click.option(
    "--plan", "plan_only", is_flag=True, help="Store nothing: show what run would do (reconcile plan -f)."
)
@click.option(
    "--atomic/--no-atomic",
    default=ATOMIC_DEFAULT,
    show_default=True,
    help="Store every object in one transaction: all or none, even if killed. --no-atomic "
    "stores them 1,024 at a time (less memory, shorter holds of the store's write lock); "
    "SIGINT/SIGTERM then stop after those in flight, saying what was stored.",
)
@click.option(
    "--prune",
    is_flag=True,
    help="Delete the stored objects -l SELECTOR (or --all) selects that the manifests no longer "
    "declare, with the apply (in its transaction, with --atomic).",
)
@click.option(
    "-l", "--selector", help="Apply only the documents whose labels match; with --prune, the set pruned."
)
@click.option("--all", "prune_all", is_flag=True, help="With --prune: every stored object is in the set.")
@click.option(
    "--force-conflicts",
    is_flag=True,
    help="Take over the fields other field managers own (server-side apply refuses a "
    "document that sets one to another value without it, naming the field and its manager).",
)
@click.option(
    "--field-manager",
    "apply_manager",
    metavar="NAME",
    help="The field manager this apply's fields are owned by (as the global --field-manager).",
)
@click.pass_obj
def apply(  # noqa: PLR0917 - click passes one parameter per option
    settings: Settings,
    saved_plan: Path | None,
    filenames: tuple[str, ...],
    plan_only: bool,
    atomic: bool,
    prune: bool,
    selector: str | None,
    prune_all: bool,
    force_conflicts: bool,
    apply_manager: str | None,
) -> None:
    """Declare the objects in manifests (-f: YAML or JSON, multi-document), or those of
    a plan saved by `reconcile plan -f ... -out PLANFILE`, exactly as planned."""
    if apply_manager is not None:
        settings = attrs.evolve(settings, field_manager=checked_name("--field-manager", apply_manager))
    if saved_plan is not None:
        if filenames or selector is not None or prune or prune_all or plan_only:
            raise BadInput(
                f"{saved_plan}: a saved plan is applied as it is: give it alone (no -f, -l, --prune, --plan)"
            )
        from reconcile.cli.saving import apply_saved  # noqa: PLC0415 - apply with a saved plan only

        run_async(apply_saved(settings, saved_plan, atomic=atomic))
        return
    if not filenames:
        raise BadInput("give the manifests with -f FILE|DIR|- (or a saved plan: reconcile apply PLANFILE)")
    from reconcile.cli.saving import is_saved_plan  # noqa: PLC0415 - apply with a saved plan only

    for filename in filenames:
        if filename != STDIN and is_saved_plan(Path(filename)):
            raise BadInput(f"{filename} is a saved plan: apply it with `reconcile apply {filename}` (no -f)")
    if prune and selector is None and not prune_all:
        raise BadInput(
            "--prune needs -l SELECTOR or --all: which stored objects are the set the manifests declare?"
        )
    if prune_all and not prune:
        raise BadInput("--all is for --prune (apply --prune --all)")
    if plan_only and prune:
        raise BadInput("--plan does not show what --prune would delete; give one or the other")
    if plan_only and selector is not None:
        raise BadInput("--plan plans every document: -l is for apply (and --prune)")
    pruning = Pruning(selector, everything=prune_all) if prune or selector is not None else None
    if plan_only:
        from reconcile.cli.planning import show_plan  # noqa: PLC0415 - apply --plan only

        show_plan(settings, filenames)
        return
    run_async(_apply(settings, filenames, atomic=atomic, pruning=pruning, prune=prune, force=force_conflicts))


async def _apply(
    settings: Settings,
    filenames: Sequence[str],
    *,
    atomic: bool,
    pruning: Pruning | None,
    prune: bool,
    force: bool = False,
) -> None:
    with stopping_on_signals() as stop:
        documents = read_documents(filenames)
        settings = await with_remembered_config(settings)
        declared_all = admit_all(settings.admission(), documents)
        if pruning is not None:  # -l: the documents in the set only, as kubectl apply -l
            declared_all = [d for d in declared_all if pruning.matches(d.admitted.metadata.get("labels"))]
        if stop():
            raise stop.interrupted(f"nothing stored (of {len(declared_all)} documents); re-run apply")
        async with settings.client(create=True) as client:
            # One admission per document (done above, for every document before anything
            # is written), and one mutation per document: checked against what is stored
            # for all first (immutable fields, deletions, claims), then written in group
            # commits, or in one transaction with --atomic. A signal stops the apply
            # between two runs of writes (never inside one), and it says where.
            pruned = (
                await prune_targets(client, pruning, [_key_of(d) for d in declared_all])
                if prune and pruning is not None
                else []
            )
            with collecting_less():  # the CLI owns its process (see reconcile.runtime.collecting)
                results = await client.apply_many(
                    [d.admitted for d in declared_all],
                    check_all_first=True,
                    atomic=atomic,
                    stop=stop,
                    prune=pruned,
                    force=force,
                )
            await report(client, declared_all, results, stop)
            await remember_applied(client, settings, declared_all, results)


def _key_of(declared: Declared) -> ObjectKey:
    kind, meta = declared.admitted.kind, declared.admitted.metadata
    return ObjectKey(kind.api_group, kind.kind, meta["namespace"], meta["name"])


def _comparable(body: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    """The parts of an object a manifest decides: spec, and its own labels/annotations."""
    meta = body.get("metadata", {})
    wanted = declared.get("metadata", {})
    result: dict[str, Any] = {}
    for field in ("labels", "annotations"):
        keys = set(wanted.get(field) or {})
        values = {k: v for k, v in (meta.get(field) or {}).items() if k in keys}
        if values:
            result.setdefault("metadata", {})[field] = values
    result["spec"] = body.get("spec", {})
    return result


class _DiffFailed(Failure):
    """diff could not compare: exit 2, so that 1 means only "there are differences"."""

    exit_code = EXIT_INPUT


@cli.command()
@_FILENAMES
@click.option(
    "--exit-code",
    is_flag=True,
    help="Deprecated, no effect: diff exits 1 whenever there are differences.",
)
@click.pass_obj
def diff(settings: Settings, filenames: tuple[str, ...], exit_code: bool) -> None:  # noqa: ARG001 - deprecated
    """Show what apply would change, without writing anything. Exit 0: no differences;
    1: differences; 2: an error (kubectl's and diff(1)'s convention)."""
    try:
        changed = run_async(_diff(settings, filenames))
    except Failure as exc:
        if exc.exit_code != EXIT_FAILURE:
            raise  # bad input (2) or interrupted (130) already say so
        raise _DiffFailed(*exc.lines) from exc
    except InvalidError:
        raise
    except ReconcileError as exc:
        raise _DiffFailed(str(exc)) from exc
    except OSError as exc:
        raise _DiffFailed(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)) from exc
    if changed:
        raise Failure


async def _diff(settings: Settings, filenames: Sequence[str]) -> bool:
    documents = read_documents(filenames)
    settings = await with_remembered_config(settings)
    admission = settings.admission()
    declared_all = admit_all(admission, documents)
    changed = False
    async with contextlib.AsyncExitStack() as stack:
        # No database yet: everything is new, and diff must not create one.
        client = (
            await stack.enter_async_context(settings.client(read_only=True))
            if settings.store.exists()
            else None
        )
        if client is not None:  # the admission hooks' defaults, as apply would store them
            declared_all = await reviewed(client, declared_all)
        for declared in declared_all:
            current = None if client is None else await current_of(client, declared)
            body = declared.admitted.body
            if current is not None and client is not None:
                body = applied_body(client, declared, current, settings.field_manager)
            new = _comparable(body, declared.admitted.body)
            old = {} if current is None else _comparable(admission.converter.unstructure(current), new)
            if old == new:
                continue
            changed = True
            lines = difflib.unified_diff(
                as_yaml(old).splitlines() if old else [],
                as_yaml(new).splitlines(),
                fromfile=f"{declared.name} (stored)" if current else "/dev/null",
                tofile=f"{declared.name} (declared)",
                lineterm="",
            )
            for line in lines:
                click.echo(line)
    return changed


@cli.command()
@click.argument("kind", required=False, shell_complete=complete_kinds)
@click.argument("names", nargs=-1, shell_complete=complete_names)
@click.option(
    "-f", "--filename", "filenames", multiple=True, help="Delete the objects these manifests declare."
)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--all", "everything", is_flag=True, help="Every object of KIND in the namespace.")
@click.option("-l", "--selector", help="The objects of KIND whose labels match (app=web,tier!=db).")
@click.option("--ignore-not-found", is_flag=True, help="An object that does not exist is not an error.")
@click.option("--wait", is_flag=True, help="Wait until each object is gone (a runner must be cleaning up).")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds --wait waits.")
@click.option(
    "--cascade",
    type=click.Choice(["background", "foreground", "orphan"], case_sensitive=False),
    default="background",
    show_default=True,
    help="What becomes of the objects each one owns: background (it goes now, the garbage "
    "collector deletes them after), foreground (it waits, with the foregroundDeletion "
    "finalizer, until those that block it are gone), orphan (they stay, their owner "
    "reference to it removed).",
)
@click.pass_obj
def delete(
    settings: Settings,
    *,
    kind: str | None,
    names: tuple[str, ...],
    filenames: tuple[str, ...],
    namespace: str,
    everything: bool,
    selector: str | None,
    ignore_not_found: bool,
    wait: bool,
    timeout: float,
    cascade: str,
) -> None:
    """Delete objects: KIND NAME... (or KIND/NAME...), KIND --all, KIND -l SELECTOR, or
    -f FILE. The runner then deletes what they manage, and its garbage collector the
    objects they own (--cascade)."""
    kind, names = split_names(kind, names)
    if bool(filenames) == bool(kind):
        raise BadInput("give either KIND NAME... (or KIND --all, KIND -l SELECTOR) or -f FILE")
    choices = sum((bool(names), everything, selector is not None))
    if kind and choices != 1:
        raise BadInput(f"which {kind}? give NAME..., --all or -l SELECTOR (one of them)")
    run_async(
        _delete(
            settings,
            kind=kind,
            names=names,
            selector="" if everything else selector,
            filenames=filenames,
            namespace=namespace,
            ignore_not_found=ignore_not_found,
            wait=wait,
            timeout=timeout,
            cascade=cascade,
        )
    )


async def _delete(
    settings: Settings,
    *,
    kind: str | None,
    names: Sequence[str],
    selector: str | None,
    filenames: Sequence[str],
    namespace: str,
    ignore_not_found: bool,
    wait: bool,
    timeout: float,
    cascade: str = "background",
) -> None:
    async with settings.client() as client:
        targets: list[tuple[Any, str, str]] = []
        if filenames:
            for declared in admit_all(settings.admission(), read_documents(filenames), unique=False):
                meta = declared.admitted.metadata
                targets.append((declared.admitted.kind, meta["name"], meta["namespace"]))
        else:
            assert kind is not None
            found = client.kinds.resolve(kind)
            if selector is not None:  # --all is the empty selector
                listed = await list_all(client, [found], namespace, selector)
                names = [obj.metadata.name for obj in listed]
            targets = [(found, name, namespace) for name in names]
        missing: list[str] = []
        for target_kind, name, target_namespace in targets:
            label = qualified(target_kind.kind, target_kind.api_group, name)
            try:
                await client.delete(target_kind, name, namespace=target_namespace, propagation_policy=cascade)
            except NotFoundError:
                if not ignore_not_found:
                    missing.append(
                        f"{label} not found in namespace {printable(target_namespace, quoted=True)}"
                    )
                continue
            click.echo(f"{label} deleted")
            if wait:
                await _wait_gone(client, target_kind, name, target_namespace, timeout)
        if missing:
            raise Failure(*missing)


async def _wait_gone(client: Client, kind: Any, name: str, namespace: str, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            since = 0
            try:
                since = (await client.get(kind, name, namespace=namespace)).metadata.resource_version or 0
            except NotFoundError:
                return
            async for event in client.watch(kind, namespace=namespace, since=since):
                if isinstance(event, Event) and event.key.name == name and event.type == EventType.DELETED:
                    return
    except TimeoutError:
        raise Failure(
            f"{kind.kind} {namespace}/{name} still exists after {timeout:g} s (is a runner up?)"
        ) from None


@cli.command()
@click.argument("kind", shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.pass_obj
def adopt(settings: Settings, kind: str, name: str | None, namespace: str) -> None:
    """Take over an existing external resource that is not ours (KIND NAME or KIND/NAME),
    as Terraform's import does: the runner marks it this object's, records Adopted, and
    then keeps it at the spec (and deletes it with the object, unless its deletion policy
    is Orphan)."""
    found_kind, found_name = type_and_name(kind, name)
    if found_name is None:
        raise BadInput("which object? give KIND NAME or KIND/NAME")
    run_async(_adopt(settings, found_kind or kind, found_name, namespace))


async def _adopt(settings: Settings, kind: str, name: str, namespace: str) -> None:
    async with settings.client() as client:
        # Under its own field manager (an update's entry, apart from the applier's), so a
        # later apply does not drop the mark for not declaring it.
        obj = await client.patch(
            kind,
            name,
            {"metadata": {"annotations": {ANNOTATION_ADOPT: "true"}}},
            namespace=namespace,
            manager=settings.field_manager or "reconcile-adopt",
        )
    label = qualified(obj.kind, obj.key.api_group, name)
    click.echo(f"{label} marked for adoption: the runner takes over the existing resource")
