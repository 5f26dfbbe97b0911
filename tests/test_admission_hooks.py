"""A kind's admission chain: mutating hooks in registration order, then validating hooks,
sync or async, each under its failure policy (Fail refuses, Ignore stores and records a
warning event) and its timeout, before anything is stored, on every write path."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reconcile
from reconcile import (
    AdmissionHook,
    AdmissionRequest,
    AdmissionWarning,
    FailurePolicy,
    FieldError,
    InvalidError,
    Kind,
    KindRegistry,
    NotFoundError,
)
from reconcile.api import Client


@attrs.frozen
class GadgetSpec:
    """A gadget: a title and a page limit."""

    title: str = ""
    max_pages: int = attrs.field(default=10, validator=attrs.validators.ge(0))
    tags: tuple[str, ...] = ()


def gadget_kind(**options: Any) -> Kind:
    """A fresh kind (hooks are added to a kind, so each test makes its own)."""
    return Kind("gadgets.example.dev/v1", "Gadget", GadgetSpec, short_names=("gd",), **options)


def gadget(name: str = "g1", **spec: Any) -> dict[str, Any]:
    """A Gadget manifest."""
    return {
        "apiVersion": "gadgets.example.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.fixture
def connect(tmp_path: Path) -> Callable[[Kind], Any]:
    """A client on a file database that knows ``kind``."""

    def opened(kind: Kind) -> Any:
        return reconcile.connect(tmp_path / "hooks.db", kinds=KindRegistry([kind]))

    return opened


async def history_types(client: Client, name: str = "g1") -> list[str]:
    """The event types of a gadget's history."""
    return [event.type for event in await client.history("Gadget", name)]


class TestOrder:
    """Mutating hooks in registration order, then validating hooks, on a canonical object."""

    async def test_mutating_then_validating_in_registration_order(self, connect: Any) -> None:
        """Each mutating hook sees the last one's result; validating hooks see the final
        object; the stored spec is the mutated one, defaults filled."""
        kind = gadget_kind()
        seen: list[tuple[str, Any]] = []

        @kind.validating
        def first_check(request: AdmissionRequest) -> None:
            seen.append(("check", request.spec.title))

        @kind.mutating
        def title(request: AdmissionRequest) -> GadgetSpec:
            seen.append(("title", request.spec.title))
            return attrs.evolve(request.spec, title=request.spec.title or request.object.metadata.name)

        @kind.mutating
        async def shout(request: AdmissionRequest) -> GadgetSpec:
            seen.append(("shout", request.spec.title))
            return attrs.evolve(request.spec, title=request.spec.title.upper())

        async with connect(kind) as client:
            stored = await client.apply(gadget())
        assert seen == [("title", ""), ("shout", "g1"), ("check", "G1")]
        assert stored.spec == GadgetSpec(title="G1", max_pages=10)

    async def test_a_mutating_hooks_changes_are_the_appliers_fields(self, connect: Any) -> None:
        """Server-side apply: a manager owns the fields its manifest declares, not those a
        mutating hook filled in (the hooks run on the manifest, before the merge with the
        stored object) nor the rest of the spec: another manager's field is kept, no
        conflict is made of fields the applier never declared, and the hook's field stays
        what the hook makes of each apply."""
        kind = gadget_kind()

        @kind.mutating
        def title(request: AdmissionRequest) -> GadgetSpec:
            return attrs.evolve(request.spec, title=request.spec.title or request.object.metadata.name)

        async with connect(kind) as client:
            await client.apply(gadget(maxPages=3), manager="alice")
            both = await client.apply(gadget(tags=["x"]), manager="bob")
        assert both.spec == GadgetSpec(title="g1", max_pages=3, tags=("x",))
        assert both.metadata.managed_fields == {"alice": ("spec/maxPages",), "bob": ("spec/tags",)}

    async def test_a_mutating_hook_may_change_labels(self, connect: Any) -> None:
        """A hook returning a whole Resource changes metadata too."""
        kind = gadget_kind()

        @kind.mutating
        def label(request: AdmissionRequest) -> Any:
            meta = attrs.evolve(request.object.metadata, labels={"team": "web"})
            return attrs.evolve(request.object, metadata=meta)

        async with connect(kind) as client:
            stored = await client.apply(gadget())
        assert stored.metadata.labels == {"team": "web"}

    async def test_a_hook_may_not_rename_the_object(self, connect: Any) -> None:
        """A mutating hook that changes the object's name is broken: under Fail, refused."""
        kind = gadget_kind()

        @kind.mutating
        def rename(request: AdmissionRequest) -> Any:
            meta = attrs.evolve(request.object.metadata, name="other")
            return attrs.evolve(request.object, metadata=meta)

        async with connect(kind) as client:
            with pytest.raises(
                InvalidError, match="changed the object's apiVersion, kind, namespace or name"
            ):
                await client.apply(gadget())
            assert await client.revision() == 0

    async def test_a_mutation_the_schema_refuses_is_refused(self, connect: Any) -> None:
        """What a mutating hook sets is admitted again: a spec its attrs validators refuse
        is not stored, and the error names the hook."""
        kind = gadget_kind()

        @kind.mutating
        def negative(request: AdmissionRequest) -> GadgetSpec:
            return _unchecked(request.spec, -1)

        async with connect(kind) as client:
            with pytest.raises(InvalidError, match=r"spec\.maxPages: .*as set by hook .*negative") as caught:
                await client.apply(gadget())
            assert caught.value.errors[0].path == "spec.maxPages"
            with pytest.raises(NotFoundError):
                await client.get("Gadget", "g1")

    async def test_class_style_hooks(self, connect: Any) -> None:
        """Hooks given to the Kind itself, as values, run as decorated ones do."""

        def check(request: AdmissionRequest) -> list[FieldError]:
            return [FieldError("spec.title", "must not be empty")] if not request.spec.title else []

        kind = gadget_kind(hooks=[AdmissionHook(check, "validating")])
        async with connect(kind) as client:
            with pytest.raises(InvalidError, match=r"spec\.title: must not be empty"):
                await client.apply(gadget())
        assert [h.name for h in kind.validating_hooks] == ["TestOrder.test_class_style_hooks.<locals>.check"]


def _unchecked(spec: GadgetSpec, max_pages: int) -> GadgetSpec:
    """A spec with a value its validator refuses (built past attrs' check)."""
    made = attrs.evolve(spec)
    object.__setattr__(made, "max_pages", max_pages)
    return made


class TestRefusal:
    """A validating hook's refusal: its message and field path reach the caller; nothing stored."""

    async def test_field_errors_name_the_path(self, connect: Any) -> None:
        """Paths from the object's root, in the documents' spelling; every refusal at once."""
        kind = gadget_kind()

        @kind.validating
        def limits(request: AdmissionRequest) -> list[FieldError]:
            return [FieldError("spec.max_pages", "at most 5 for now")] if request.spec.max_pages > 5 else []

        @kind.validating
        async def titled(request: AdmissionRequest) -> None:
            if not request.spec.title:
                raise InvalidError([FieldError("spec.title", "a gadget needs a title")])

        async with connect(kind) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(gadget(maxPages=7))
            here = "TestRefusal.test_field_errors_name_the_path.<locals>"
            assert [(e.path, e.message) for e in caught.value.errors] == [
                ("spec.maxPages", f"at most 5 for now (hook {here}.limits)"),
                ("spec.title", f"a gadget needs a title (hook {here}.titled)"),
            ]
            assert 'Gadget "g1"' in str(caught.value)
            assert await client.revision() == 0

    async def test_a_refusal_is_never_ignored(self, connect: Any) -> None:
        """Ignore is for a hook that breaks, not for one that says no."""
        kind = gadget_kind()
        kind.validating(lambda _request: [FieldError("spec", "no")], failure_policy="Ignore")
        async with connect(kind) as client:
            with pytest.raises(InvalidError, match="spec: no"):
                await client.apply(gadget())

    async def test_cross_object_rule_reads_through_the_client(self, connect: Any) -> None:
        """A hook reads other objects: two gadgets may not share a title."""
        kind = gadget_kind()

        @kind.validating
        async def unique(request: AdmissionRequest) -> list[FieldError]:
            listed = await request.client.list("Gadget")
            taken = [o.metadata.name for o in listed.items if o.spec.title == request.spec.title]
            others = [n for n in taken if n != request.object.metadata.name]
            return [FieldError("spec.title", f"taken by {others[0]}")] if others else []

        async with connect(kind) as client:
            await client.apply(gadget("a", title="T"))
            await client.apply(gadget("a", title="T", tags=["x"]))  # itself is no conflict
            with pytest.raises(InvalidError, match=r"spec\.title: taken by a"):
                await client.apply(gadget("b", title="T"))


def broken_kind(policy: str, *, hang: bool = False, phase: str = "validating") -> Kind:
    """A kind whose one hook raises, or waits on an event nobody sets (timeout 0.05 s)."""
    kind = gadget_kind()
    never = asyncio.Event()

    async def flaky(_request: AdmissionRequest) -> None:
        if hang:
            await never.wait()
        raise RuntimeError("the policy server is down")

    kind.hooks.append(AdmissionHook(flaky, phase, policy, timeout=0.05, name="policy-server"))  # type: ignore[arg-type]
    return kind


class TestFailurePolicy:
    """A hook that raises or hangs: Fail refuses the write, Ignore stores it with a warning event."""

    @pytest.mark.parametrize("hang", [False, True], ids=["raises", "hangs"])
    @pytest.mark.parametrize("phase", ["mutating", "validating"])
    async def test_fail_refuses_naming_the_hook(self, connect: Any, hang: bool, phase: str) -> None:
        """Refused, the message naming the hook and what happened; nothing stored."""
        async with connect(broken_kind("Fail", hang=hang, phase=phase)) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(gadget())
            reason = (
                "did not answer within 0.05 s" if hang else "raised RuntimeError: the policy server is down"
            )
            assert (
                str(caught.value) == f'Gadget "g1": admission hook policy-server ({phase}) failed: {reason}'
            )
            assert await client.revision() == 0

    @pytest.mark.parametrize("hang", [False, True], ids=["raises", "hangs"])
    async def test_ignore_stores_and_records_a_warning_event(self, connect: Any, hang: bool) -> None:
        """Stored; the caller is warned; the history has AdmissionHookIgnored, written
        with the object; applying again changes nothing and records nothing."""
        async with connect(broken_kind("Ignore", hang=hang)) as client:
            with pytest.warns(AdmissionWarning, match="admission hook policy-server .*Ignore"):
                stored = await client.apply(gadget(title="t"))
            assert stored.spec.title == "t"
            events = await client.history("Gadget", "g1")
            assert [e.type for e in events] == ["Created", "AdmissionHookIgnored"]
            assert events[1].data is not None
            assert events[1].data["hook"] == "policy-server"
            assert events[1].data["failurePolicy"] == "Ignore"
            revision = await client.revision()
            with pytest.warns(AdmissionWarning):
                await client.apply(gadget(title="t"))
            assert await client.revision() == revision

    def test_policies_by_name(self) -> None:
        """Fail and Ignore by value or name, any case; anything else is refused."""
        assert AdmissionHook(print, "mutating", "ignore").failure_policy is FailurePolicy.IGNORE
        with pytest.raises(ValueError, match="Fail or Ignore"):
            AdmissionHook(print, "mutating", "Retry")
        with pytest.raises(ValueError, match="timeout must be > 0"):
            AdmissionHook(print, "mutating", timeout=0)


class TestWritePaths:
    """Every write that stores a spec runs the chain: apply, create, update, patch, apply_many."""

    async def test_update_and_patch(self, connect: Any) -> None:
        """update and a spec patch are admitted through the hooks too."""
        kind = gadget_kind()

        @kind.validating
        def small(request: AdmissionRequest) -> list[FieldError]:
            return [FieldError("spec.max_pages", "too many")] if request.spec.max_pages > 5 else []

        async with connect(kind) as client:
            stored = await client.create(gadget(maxPages=1))
            with pytest.raises(InvalidError, match=r"spec\.maxPages: too many"):
                await client.update(attrs.evolve(stored, spec=attrs.evolve(stored.spec, max_pages=9)))
            with pytest.raises(InvalidError, match=r"spec\.maxPages: too many"):
                await client.patch("Gadget", "g1", {"spec": {"maxPages": 9}})
            assert (await client.get("Gadget", "g1")).spec.max_pages == 1

    async def test_apply_many_refuses_only_the_refused(self, connect: Any) -> None:
        """In a bulk apply each document goes through its chain; a refusal is that
        document's result, and with check_all_first nothing is stored."""
        kind = gadget_kind()

        @kind.validating
        async def small(request: AdmissionRequest) -> list[FieldError]:
            return [FieldError("spec.max_pages", "too many")] if request.spec.max_pages > 5 else []

        async with connect(kind) as client:
            results = await client.apply_many(
                [gadget("a", maxPages=1), gadget("b", maxPages=9)], check_all_first=True
            )
            assert [r.outcome for r in results] == ["skipped", "refused"]
            assert await client.revision() == 0
            results = await client.apply_many([gadget("a", maxPages=1), gadget("b", maxPages=9)])
            assert [r.outcome for r in results] == ["created", "refused"]
            assert "spec.maxPages: too many" in str(results[1].error)

    async def test_apply_many_warns_of_ignored_hooks(self, connect: Any) -> None:
        """A broken hook under Ignore: the document is stored, its result carries the
        warning and the history the event."""
        async with connect(broken_kind("Ignore")) as client:
            with pytest.warns(AdmissionWarning):
                [result] = await client.apply_many([gadget()])
            assert result.outcome == "created"
            assert "policy-server" in result.warnings[0]
            assert await history_types(client) == ["Created", "AdmissionHookIgnored"]

    async def test_kinds_without_hooks_are_never_reviewed(
        self, connect: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The fast path: a bulk apply of a kind with no hooks never awaits the chain."""
        async with connect(gadget_kind()) as client:

            async def never(_admitted: Any) -> Any:
                raise AssertionError("reviewed a kind without hooks")

            monkeypatch.setattr(client.engine, "review", never)
            results = await client.apply_many([gadget("a"), gadget("b")])
            assert [r.outcome for r in results] == ["created", "created"]
            await client.apply(gadget("c"))


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[reconcile.Runtime]:
    """A Runtime knowing a gadget kind with a mutating hook."""
    kind = gadget_kind()
    kind.mutating(lambda request: attrs.evolve(request.spec, title=request.spec.title or "untitled"))
    async with reconcile.Runtime(tmp_path / "rt.db", providers=[], kinds=KindRegistry([kind])) as running:
        yield running


async def test_the_runtime_applies_through_the_chain(runtime: reconcile.Runtime) -> None:
    """Runtime.apply and apply_many store the mutated object."""
    assert (await runtime.apply(gadget())).spec.title == "untitled"
    [result] = await runtime.apply_many([gadget("g2")])
    assert result.object is not None
    assert result.object.spec.title == "untitled"


HOOKED = '''\
"""Kinds whose hooks break: raising or hanging, under Fail or under Ignore."""
import asyncio

import attrs
from reconcile import AdmissionHook, FieldError, Kind


@attrs.frozen
class ThingSpec:
    size: int = 1


NEVER = asyncio.Event()


async def raising(request):
    raise RuntimeError("the policy server is down")


async def hanging(request):
    await NEVER.wait()


def checked(request):
    if request.spec.size > 3:
        return [FieldError("spec.size", "at most 3 things")]


kinds = [
    Kind(
        "things.example.dev/v1",
        f"{how.capitalize()}{policy}",
        ThingSpec,
        hooks=[AdmissionHook(function, "validating", policy, timeout=0.05, name=f"{how}-hook")],
    )
    for how, function in (("raising", raising), ("hanging", hanging))
    for policy in ("Fail", "Ignore")
]
checking = [AdmissionHook(checked, "validating")]
kinds.append(Kind("things.example.dev/v1", "Checked", ThingSpec, hooks=checking))
'''


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The command line, in a folder whose module ``hooked`` declares the kinds above."""
    from test_cli import Cli  # noqa: PLC0415 - the in-process runner

    service = tmp_path / "service"
    service.mkdir()
    (service / "hooked.py").write_text(HOOKED)
    monkeypatch.chdir(service)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "hooked", raising=False)
    monkeypatch.delenv("RECONCILE_IMPORT", raising=False)
    return Cli(tmp_path, capsys)


def thing(kind: str, size: int = 1) -> str:
    """A manifest of one of the kinds above."""
    return (
        f"apiVersion: things.example.dev/v1\nkind: {kind}\nmetadata: {{name: t1}}\nspec: {{size: {size}}}\n"
    )


class TestCommandLine:
    """Bad input through ``reconcile apply``: exit 2 with the path and nothing stored, or
    stored with a warning, as each policy says."""

    def test_a_validation_hook_refusal(self, cli: Any) -> None:
        """The hook's message and field path; exit 2; nothing stored."""
        manifest = cli.write("t.yaml", thing("Checked", size=5))
        code, out, err = cli("--import", "hooked", "apply", "-f", str(manifest))
        assert (code, out) == (2, "")
        assert "spec.size: at most 3 things (hook checked)" in err
        assert cli.revision() == 0

    @pytest.mark.parametrize(
        ("how", "reason"),
        [
            ("raising", "raised RuntimeError: the policy server is down"),
            ("hanging", "did not answer within 0.05 s"),
        ],
    )
    def test_fail(self, cli: Any, how: str, reason: str) -> None:
        """A hook that raises or hangs under Fail: refused, naming the hook; exit 2; nothing stored."""
        manifest = cli.write("t.yaml", thing(f"{how.capitalize()}Fail"))
        code, out, err = cli("--import", "hooked", "apply", "-f", str(manifest))
        assert (code, out) == (2, "")
        assert f"admission hook {how}-hook (validating) failed: {reason}" in err
        assert "Traceback" not in err
        assert cli.revision() == 0

    @pytest.mark.parametrize("how", ["raising", "hanging"])
    def test_ignore(self, cli: Any, how: str) -> None:
        """Under Ignore: stored, a warning printed, and the history says which hook broke."""
        kind = f"{how.capitalize()}Ignore"
        manifest = cli.write("t.yaml", thing(kind))
        code, out, err = cli("--import", "hooked", "apply", "-f", str(manifest))
        assert code == 0, err
        assert out.strip() == f"{kind.lower()}.things.example.dev/t1 created"
        assert (
            f"warning: {manifest}, document 1: admission hook {how}-hook (validating) failed and was ignored"
            in err
        )
        code, out, _ = cli("--import", "hooked", "history", kind, "t1", "-o", "json")
        assert code == 0
        events = json.loads(out)
        assert [e["type"] for e in events] == ["Created", "AdmissionHookIgnored"]
        assert events[1]["data"]["hook"] == f"{how}-hook"


#: What a hook of the property below does: pass, refuse, raise, or (mutating) change the title.
BEHAVIOURS = ("pass", "refuse", "raise", "mutate")


def _hook_doing(behaviour: str, index: int) -> Callable[[AdmissionRequest], Any]:
    def hook(request: AdmissionRequest) -> Any:
        if behaviour == "refuse":
            return [FieldError("spec.title", f"refused by {index}")]
        if behaviour == "raise":
            raise RuntimeError(f"hook {index} broke")
        if behaviour == "mutate":
            return attrs.evolve(request.spec, title=f"{request.spec.title}+{index}")
        return None

    return hook


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    chain=st.lists(
        st.tuples(st.sampled_from(["mutating", "validating"]), st.sampled_from(BEHAVIOURS), st.booleans()),
        max_size=4,
    )
)
async def test_the_chain_stores_exactly_what_its_policies_allow(tmp_path: Path, chain: list[Any]) -> None:
    """For any chain of hooks that pass, refuse, raise (under Fail or Ignore) or mutate:
    the object is stored iff no hook refused and no hook under Fail broke; what is
    stored has every mutation that ran, in order; each hook ignored is one event."""
    kind = gadget_kind()
    chain = [(p, "pass" if (p, b) == ("validating", "mutate") else b, i) for p, b, i in chain]
    for index, (phase, behaviour, ignore) in enumerate(chain):
        policy = "Ignore" if ignore else "Fail"
        kind.hooks.append(AdmissionHook(_hook_doing(behaviour, index), phase, policy, name=f"h{index}"))
    mutating = [(i, h) for i, h in enumerate(chain) if h[0] == "mutating"]
    validating = [(i, h) for i, h in enumerate(chain) if h[0] == "validating"]
    ordered = [*mutating, *validating]
    fails = any(behaviour == "raise" and not ignore for _, (_, behaviour, ignore) in ordered)
    refused = any(behaviour == "refuse" for _, (_, behaviour, _) in ordered)
    title = "t" + "".join(f"+{i}" for i, (_, behaviour, _) in mutating if behaviour == "mutate")
    ignored = sum(1 for _, (_, behaviour, ignore) in ordered if behaviour == "raise" and ignore)
    path = tmp_path / f"{uuid.uuid4().hex}.db"
    async with reconcile.connect(path, kinds=KindRegistry([kind])) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AdmissionWarning)
            try:
                stored = await client.apply(gadget(title="t", maxPages=1))
            except InvalidError as exc:
                assert fails or refused, exc
                assert await client.revision() == 0
                return
        assert not fails
        assert not refused
        assert stored.spec.title == title
        assert await history_types(client) == ["Created", *["AdmissionHookIgnored"] * ignored]
