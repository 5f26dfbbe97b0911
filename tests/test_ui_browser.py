"""The web view in a real browser (Debian's chromium, driven by Playwright): the overview's
counts match the store, a File applied while the page is open appears and turns Ready,
an object's timeline shows the drift a runner repaired, the diff between two revisions
names the changed field, a reader sees no actions while an editor's pause is recorded
under their name, and the stream's loss is shown and recovers. Each test saves the
screenshot the docs page (docs/how-to/use-the-web-view.md) shows."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import httpx
import pytest
import yaml
from browser import DESKTOP, PHONE, chromium, expect, require_chromium, screenshot, serving
from http_helpers import CHECKOUT, reconcile_command, served
from servers import free_port
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from reconcile.api import connect
from reconcile.http import create_app
from reconcile.http.context import USER_SCOPE_KEY, Attributes, User
from reconcile.http.errors import ApiError, error_response
from reconcile.http.serving import serve
from reconcile.http.tokens import hash_token
from reconcile.model.conditions import ConditionStatus
from reconcile.runtime.health import ControllerHealth, Health, ShardingHealth

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"
MERGE = {"Content-Type": "application/merge-patch+json"}
TIMEOUT_MS = 20_000
#: Whether ``reconcile serve`` runs the controllers too (``--run``).
SERVE_RUNS = any(parameter.name == "run" for parameter in serve.params)
T = TypeVar("T")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium for the module's tests."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page at 1280x800 (its own session storage); its scripts' errors and any
    breach of its Content-Security-Policy fail the test."""
    context = browser.new_context(viewport=DESKTOP)
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on(
        "console",
        lambda message: errors.append(message.text) if "Content Security Policy" in message.text else None,
    )
    opened.script_errors = errors
    yield opened
    context.close()
    assert not errors, f"the page's scripts failed: {errors}"


def file_manifest(name: str, content: str, **labels: str) -> dict[str, Any]:
    """A File of the files provider."""
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name, "labels": labels or {"app": "site"}},
        "spec": {"path": f"{name}.txt", "content": content},
    }


@contextlib.contextmanager
def serving_to(page: Any, db: Path, *args: str) -> Iterator[str]:
    """``reconcile serve`` for ``page``, which leaves before the server stops (its open
    watches would hold the server's graceful stop)."""
    with served(db, *args) as url:
        try:
            yield url
        finally:
            page.goto("about:blank")


def aside(coroutine: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result, run in a thread of its own (Playwright's sync API holds an
    event loop in the test's thread)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def cli(db: Path, root: Path, *args: str) -> str:
    """``reconcile --db DB --root ROOT ARGS``, asserted successful."""
    environment = {**os.environ, "PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}"}
    result = subprocess.run(
        reconcile_command("--db", str(db), "--root", str(root), *args),
        capture_output=True,
        text=True,
        env=environment,
        cwd=CHECKOUT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"reconcile {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result.stdout


def apply(db: Path, root: Path, *manifests: dict[str, Any]) -> None:
    """``reconcile apply -f`` of the manifests (written into ``root``)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    cli(db, root, "apply", "-f", str(path))


def converge(db: Path, root: Path) -> None:
    """One runner pass (``reconcile run --once``)."""
    cli(db, root, "run", "--once", "--timeout", "60")


async def _store_counts(db: Path) -> dict[str, int]:
    async with connect(f"sqlite:///{db}") as client:
        listed = await client.list("File")
    counts = {"total": 0, "ready": 0, "notReady": 0, "deleting": 0, "paused": 0}
    for item in listed.items:
        counts["total"] += 1
        ready = next((c for c in item.status.conditions if c.type == "Ready"), None)
        current = item.status.observed_generation == item.metadata.generation
        if item.metadata.deletion_timestamp is not None:
            counts["deleting"] += 1
        elif ready is not None and ready.status == ConditionStatus.TRUE and current:
            counts["ready"] += 1
        else:
            counts["notReady"] += 1
        if item.metadata.annotations.get("reconcile.dev/paused") == "true":
            counts["paused"] += 1
    return counts


UNLABELLED = """() => [...document.querySelectorAll("input, select, textarea, button")]
  .filter((e) => e.getClientRects().length)
  .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim())
  .map((e) => e.outerHTML)"""


def unlabelled(page: Any) -> list[str]:
    """The visible controls without a label (nor a text or an aria-label)."""
    found: list[str] = page.evaluate(UNLABELLED)
    return found


def page_counts(page: Any, kind: str) -> dict[str, int]:
    """The overview's counts of ``kind``."""
    row = page.locator(f'#counts tr[data-kind="{kind}"]')
    return {
        key: int(row.locator(f'td[data-count="{key}"]').inner_text())
        for key in ("total", "ready", "notReady", "deleting", "paused")
    }


def test_the_overviews_counts_match_the_store(tmp_path: Path, page: Any) -> None:
    """Ready, not Ready (never reconciled), deleting (a finalizer holds it) and paused
    Files: the overview's counts are the store's, and its health names the store's head."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, *(file_manifest(f"page-{i}", f"page {i}\n") for i in range(6)))
    converge(db, root)
    apply(db, root, *(file_manifest(f"draft-{i}", f"draft {i}\n") for i in range(2)))
    with serving_to(page, db) as url:
        with httpx.Client(base_url=url) as http:
            paused = http.patch(
                f"{FILES}/page-0",
                json={"metadata": {"annotations": {"reconcile.dev/paused": "true"}}},
                headers=MERGE,
            )
            assert paused.status_code == 200, paused.text
            assert http.delete(f"{FILES}/page-1").status_code in {200, 202}
        expected = aside(_store_counts(db))
        # The paused File is still Ready; the deleted one is held by its finalizer.
        assert expected == {"total": 8, "ready": 5, "notReady": 2, "deleting": 1, "paused": 1}
        page.goto(f"{url}/ui/")
        expect(page.locator("#counts tr[data-kind=File] td[data-count=total]")).to_have_text("8")
        assert page_counts(page, "File") == expected
        page.wait_for_selector("#health dd")
        health = page.inner_text("#health")
        assert "reachable" in health
        assert "Head revision" in health
        screenshot(page, "overview")


def test_the_overview_shows_the_runners_health(tmp_path: Path, page: Any) -> None:
    """An app serving beside a runner (``serve --run``): its controllers' queues, the shards
    it holds, and a problem in words."""
    controller = ControllerHealth(
        name="File",
        synced=True,
        watching=False,
        running=True,
        crashes=0,
        watch_failures=2,
        cached=3,
        depth=4,
        processing=1,
        waiting=0,
        longest_running=0.5,
    )
    sharding = ShardingHealth(
        runner="runner-a", shards=8, held=(0, 2, 5), draining=(), runners=2, since_renewal=0.1
    )

    @contextlib.asynccontextmanager
    async def build() -> AsyncIterator[Starlette]:
        async with connect(f"sqlite:///{tmp_path / 'api.db'}") as client:
            app = create_app(client)
            app.state.reconcile.runtime_health = lambda: Health.of(
                (controller,), started=True, sharding=sharding
            )
            yield app

    with serving(build) as url:
        page.goto(f"{url}/ui/")
        health = page.locator("#health")
        expect(health).to_contain_text("Shards held0, 2, 5 of 8 (runner runner-a, 2 runners)")
        expect(health).to_contain_text("Controller File")
        expect(health).to_contain_text(
            "watch restarting; 4 queued, 1 in progress, 0 waiting, 0 crashes, 2 watch failures"
        )
        expect(health).to_contain_text("File: watch broken, restarting (2 failures so far)")
        screenshot(page, "overview-runner")
        page.goto("about:blank")


def test_the_objects_table_filters_and_sorts(tmp_path: Path, page: Any) -> None:
    """By label selector, free text and a column's sort; at a phone's width too."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(
        db,
        root,
        file_manifest("alpha", "a\n", app="site"),
        file_manifest("beta", "b\n", app="blog"),
        file_manifest("gamma", "c\n", app="site"),
    )
    converge(db, root)
    with serving_to(page, db) as url:
        page.goto(f"{url}/ui/#/objects/files.reconcile.dev%2Ffiles")
        names = page.locator("#objects tbody th a")
        expect(page.locator("#objects tbody tr")).to_have_count(3)
        assert names.all_inner_texts() == ["alpha", "beta", "gamma"]
        page.get_by_role("button", name="Name").focus()
        page.keyboard.press("Enter")  # sorted by the keyboard; the focus stays on the header
        expect(page.get_by_role("button", name="Name ▼")).to_be_focused()
        assert names.all_inner_texts() == ["gamma", "beta", "alpha"]
        page.get_by_label("Label selector").fill("app=site")
        expect(page.locator("#objects tbody tr")).to_have_count(2)
        assert names.all_inner_texts() == ["gamma", "alpha"]
        page.get_by_label("Search").fill("alp")
        expect(page.locator("#objects tbody tr")).to_have_count(1)
        assert page.inner_text("#summary").startswith("1 of 3")
        page.get_by_label("Label selector").fill("")
        page.get_by_label("Search").fill("")
        expect(page.locator("#objects tbody tr")).to_have_count(3)
        assert unlabelled(page) == []
        cells = page.locator('#objects tbody tr td[data-column="ready"]').all_inner_texts()
        assert cells == ["True", "True", "True"]
        screenshot(page, "objects")
        page.set_viewport_size(PHONE)
        page.reload()
        expect(page.locator("#objects tbody tr")).to_have_count(3)
        page.keyboard.press("Tab")  # the skip link first
        expect(page.get_by_role("link", name="Skip to the content")).to_be_focused()
        screenshot(page, "objects-phone")
        page.emulate_media(color_scheme="dark")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
        screenshot(page, "objects-dark")


def test_the_timeline_shows_a_repaired_drift(tmp_path: Path, page: Any) -> None:
    """A File edited by hand and repaired by the runner: DriftDetected in the timeline,
    with who did it."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, file_manifest("notes", "as declared\n"))
    converge(db, root)
    written = next(root.rglob("notes.txt"))
    written.write_text("edited by hand\n")
    converge(db, root)
    assert written.read_text() == "as declared\n"
    with serving_to(page, db) as url:
        page.goto(f"{url}/ui/#/object/files.reconcile.dev/v1/files/default/notes")
        drift = page.locator('#timeline li[data-type="DriftDetected"]')
        drift.first.wait_for()
        expect(drift.first.locator(".who")).to_have_text("reconcile-engine")
        expect(drift.first.locator(".message")).to_contain_text("edited by hand")
        assert page.locator('#timeline li[data-type="Created"]').count() == 1
        page.locator("#timeline").scroll_into_view_if_needed()
        screenshot(page, "timeline")


def test_the_diff_between_two_revisions_names_the_changed_field(tmp_path: Path, page: Any) -> None:
    """Two applies of different content: the diff names spec.content, old and new, and the
    document at the first revision holds the old content."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, file_manifest("motd", "hello\n"))
    apply(db, root, file_manifest("motd", "goodbye\n"))
    with serving_to(page, db) as url:
        page.goto(f"{url}/ui/#/object/files.reconcile.dev/v1/files/default/motd")
        paths = page.locator("#diff-paths")
        paths.wait_for()
        assert "spec.content" in paths.inner_text()
        assert "goodbye" in page.locator("#diff pre").inner_text()
        first = page.locator("#at option").first.get_attribute("value")
        page.select_option("#at", first)
        assert '"content": "hello\\n"' in page.inner_text("#document-at")
        assert "managedFields" not in page.locator("#diff pre").inner_text()
        page.locator("#diff").scroll_into_view_if_needed()
        screenshot(page, "diff")


def test_an_objects_owner_and_children_link_both_ways(tmp_path: Path, page: Any) -> None:
    """A File owned by another: the child's page links its owner, the owner's its child,
    and the keyboard follows the links."""
    db = tmp_path / "api.db"

    @contextlib.asynccontextmanager
    async def build() -> AsyncIterator[Starlette]:
        async with connect(f"sqlite:///{db}") as client:
            parent = await client.apply(file_manifest("parent", "p\n"), origin=tmp_path / "site.yaml")
            child = file_manifest("child", "c\n")
            reference = {"apiVersion": "files.reconcile.dev/v1", "kind": "File", "name": "parent"}
            child["metadata"]["ownerReferences"] = [{**reference, "uid": parent.metadata.uid}]
            await client.apply(child, origin=tmp_path / "site.yaml")
            yield create_app(client)

    with serving(build) as url:
        page.goto(f"{url}/ui/#/object/files.reconcile.dev/v1/files/default/child")
        owner = page.locator("#owners a")
        expect(owner).to_have_text("File parent")
        # (the locator's own press: focused and pressed on the link as it is then, the
        # relations panel being drawn again when the watch reports a change)
        owner.press("Enter")
        expect(page.locator("h2 .name")).to_have_text("parent")
        expect(page.locator("main h2")).to_be_focused()
        expect(page.locator("#children a")).to_have_text("File child")
        page.locator("#timeline").wait_for()
        assert unlabelled(page) == []
        screenshot(page, "object")
        page.goto("about:blank")


def test_the_view_of_an_app_a_host_mounted(tmp_path: Path, page: Any) -> None:
    """``host.mount("/k8s", create_app(client))``: the view at /k8s/ui/ reads the API under
    /k8s, live, and the page's pause passes the forgery guard."""

    @contextlib.asynccontextmanager
    async def build() -> AsyncIterator[Starlette]:
        async with connect(f"sqlite:///{tmp_path / 'api.db'}") as client:
            await client.apply(file_manifest("hosted", "h\n"), origin=tmp_path / "site.yaml")
            yield Starlette(routes=[Mount("/k8s", create_app(client))])

    with serving(build) as url:
        page.goto(f"{url}/k8s/ui")
        page.get_by_role("link", name="Objects").click()
        expect(page.locator('#objects tr[data-key="File/default/hosted"]')).to_have_count(1)
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
        page.get_by_role("link", name="hosted").click()
        page.locator("#pause").click()
        page.locator('#confirm button[value="confirm"]').click()
        expect(page.locator("#paused")).to_have_text("yes")
        page.goto("about:blank")


class Bearer:
    """A stand-in for the server's authentication (two fixed tokens), as a host mounting the
    app behind its own would do: 401 for the API without a token, the page itself public."""

    USERS: ClassVar[dict[str, User]] = {
        "reader-token": User("reader", ("readers",)),
        "editor-token": User("editor", ("editors",)),
    }

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The token's user, or 401 outside the page's assets."""
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            given = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            user = self.USERS.get(given)
            if user is None and not scope["path"].startswith("/ui/") and scope["path"] != "/ui":
                await error_response(ApiError(401, "Unauthorized"))(scope, receive, send)
                return
            if user is not None:
                scope[USER_SCOPE_KEY] = user
        await self.app(scope, receive, send)


class EditorsChange:
    """Reads for everybody signed in, changes for the editors."""

    def allowed(self, user: User, attributes: Attributes) -> bool:
        """Get, list and watch; anything for an editor."""
        return attributes.verb in {"get", "list", "watch"} or "editors" in user.groups


def _sign_in(page: Any, url: str, token: str) -> None:
    page.goto(f"{url}/ui/#/object/files.reconcile.dev/v1/files/default/index")
    dialog = page.locator("#token-dialog")
    dialog.wait_for()
    page.get_by_role("textbox", name="Token").fill(token)
    page.get_by_role("button", name="Use this token").click()
    # The token is kept when the dialog's close event comes (a task after the click):
    # a reload before it would lose it (a newer chromium reloaded that soon).
    page.locator("#signout").wait_for()
    page.reload()
    page.locator("#ready").wait_for()
    page.locator("#timeline").wait_for()


def test_a_reader_sees_no_actions_and_an_editors_pause_is_theirs(
    tmp_path: Path, browser: Any, page: Any
) -> None:
    """The token asked once (kept for the tab); a reader's page has no action buttons; an
    editor pauses after confirming, and the history records the editor's name."""
    db = tmp_path / "api.db"

    @contextlib.asynccontextmanager
    async def build() -> AsyncIterator[Starlette]:
        async with connect(f"sqlite:///{db}") as client:
            await client.apply(file_manifest("index", "hi\n"), origin=tmp_path / "site.yaml")
            yield create_app(client, authorizer=EditorsChange(), middleware=[Middleware(Bearer)])

    with serving(build) as url:
        _sign_in(page, url, "reader-token")
        assert page.inner_text("#who") == "reader"
        assert page.locator("#pause, #resume, #delete").count() == 0
        screenshot(page, "reader")

        editor = browser.new_context(viewport=DESKTOP).new_page()
        editor.set_default_timeout(TIMEOUT_MS)
        _sign_in(editor, url, "editor-token")
        assert editor.inner_text("#who") == "editor"
        editor.locator("#pause").click()
        dialog = editor.locator("#confirm")
        assert "Pause File index?" in dialog.inner_text()
        editor.get_by_role("button", name="Cancel").click()
        editor.locator("#pause").click()
        editor.locator('#confirm button[value="confirm"]').click()
        editor.locator("#notice.ok").wait_for()
        expect(editor.locator("#paused")).to_have_text("yes")
        latest = editor.locator("#timeline li").first
        expect(latest).to_have_attribute("data-type", "MetadataChanged")
        expect(latest.locator(".who")).to_contain_text("editor")
        screenshot(editor, "editor-pause")
        editor.select_option("#propagation", "Orphan")
        editor.locator("#delete").click()
        expect(editor.locator("#confirm")).to_contain_text("Its children: kept (orphaned).")
        editor.locator('#confirm button[value="confirm"]').click()
        expect(editor.locator("#notice")).to_have_text("Deletion requested.")
        expect(editor.locator("#reason")).to_have_text("Deleting")
        expect(editor.locator("#delete")).to_have_count(0)
        editor.goto("about:blank")
        editor.context.close()

    async def recorded() -> list[tuple[str, str | None]]:
        async with connect(f"sqlite:///{db}") as client:
            return [(e.type, e.user) for e in await client.history("File", "index")]

    events = aside(recorded())
    assert ("MetadataChanged", "editor") in events
    assert events[-1] == ("DeletionRequested", "editor"), events  # its finalizer holds it


RULES = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: viewer}
rules:
  - {apiGroups: [files.reconcile.dev], resources: [files, files/history], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: admin}
rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: readers-view}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: viewer}
subjects: [{kind: Group, name: readers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ops-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: Group, name: ops}]
"""


def test_through_serves_tokens_and_rules_a_reader_has_no_actions_and_an_editors_pause_is_theirs(
    tmp_path: Path, browser: Any, page: Any
) -> None:
    """``reconcile serve --token-file --authorization-config``: the page itself loads
    without a token, then asks for one; a reader (viewer rules) sees no action; an
    editor (admin rules) pauses, recorded under the editor's name; the tokens never reach
    the store."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, file_manifest("index", "hi\n"))
    reader, editor = "reader-" + "r" * 30, "editor-" + "e" * 30
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        yaml.safe_dump(
            {
                "tokens": [
                    {"hash": hash_token(reader), "user": "rita", "groups": ["readers"]},
                    {"hash": hash_token(editor), "user": "erin", "groups": ["ops"]},
                ]
            }
        )
    )
    rules = tmp_path / "rbac.yaml"
    rules.write_text(RULES)
    with serving_to(page, db, "--token-file", str(tokens), "--authorization-config", str(rules)) as url:
        with httpx.Client(base_url=url) as http:
            assert http.get("/ui/").status_code == 200
            assert http.get("/ui/static/main.js").status_code == 200
            assert http.get("/ui/api/kinds").status_code == 401
            assert http.get(FILES).status_code == 401
        _sign_in(page, url, reader)
        assert page.inner_text("#who") == "rita"
        assert page.locator("#pause, #resume, #delete").count() == 0
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
        page.get_by_role("link", name="Overview").click()
        expect(page.locator("#counts tr[data-kind=File] td[data-count=total]")).to_have_text("1")
        expect(page.locator("#counts tr[data-kind=Bucket]")).to_contain_text("no access")
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
        page.go_back()
        page.locator("#ready").wait_for()

        other = browser.new_context(viewport=DESKTOP).new_page()
        other.set_default_timeout(TIMEOUT_MS)
        _sign_in(other, url, editor)
        assert other.inner_text("#who") == "erin"
        other.locator("#pause").click()
        other.locator('#confirm button[value="confirm"]').click()
        expect(other.locator("#paused")).to_have_text("yes")
        expect(other.locator("#timeline li").first.locator(".who")).to_contain_text("erin")
        expect(page.locator("#paused")).to_have_text("yes")  # the reader's page, through its watch
        other.goto("about:blank")
        other.context.close()

    async def recorded() -> list[tuple[str, str | None]]:
        async with connect(f"sqlite:///{db}") as client:
            return [(e.type, e.user) for e in await client.history("File", "index")]

    assert ("MetadataChanged", "erin") in aside(recorded())
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("state.db*"))
    assert reader.encode() not in stored
    assert editor.encode() not in stored


@pytest.mark.xfail(not SERVE_RUNS, strict=True, reason="needs serve --run (helper E, branch wt-e2e)")
def test_a_file_applied_while_the_page_is_open_appears_and_turns_ready(tmp_path: Path, page: Any) -> None:
    """No reload: the watch brings the new File, then the runner's status turning Ready."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, file_manifest("first", "one\n"))
    with serving_to(page, db, "--run") as url:
        page.goto(f"{url}/ui/#/objects/files.reconcile.dev%2Ffiles")
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
        apply(db, root, file_manifest("second", "two\n"))
        row = page.locator('#objects tr[data-key="File/default/second"]')
        row.wait_for()
        row.locator('td[data-column="ready"]').get_by_text("True").wait_for()
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        screenshot(page, "live")


@pytest.mark.slow
def test_the_streams_loss_is_shown_and_recovers(tmp_path: Path, page: Any) -> None:
    """The server stops: the indicator says the stream is lost; started again on the same
    port, the page reconnects from where it was and shows a change made meanwhile."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, file_manifest("steady", "one\n"))
    port = str(free_port())
    with served(db, "--port", port) as url:
        page.goto(f"{url}/ui/#/objects")
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
    expect(page.locator("#live")).to_have_attribute("data-state", "lost")
    assert "lost" in page.inner_text("#live").lower()
    screenshot(page, "stream-lost")
    apply(db, root, file_manifest("meanwhile", "two\n"))
    with served(db, "--port", port):
        expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=30_000)
        assert page.inner_text("#live") == "Live (reconnected)"
        page.locator('#objects tr[data-key="File/default/meanwhile"]').wait_for()
        screenshot(page, "stream-recovered")
        page.goto("about:blank")


def lists_version(url: str) -> str:
    """The resourceVersion of a list of Files now."""
    with httpx.Client(base_url=url) as http:
        return str(http.get("/apis/files.reconcile.dev/v1/files").json()["metadata"]["resourceVersion"])


def test_a_410_from_the_watch_makes_the_page_list_again(tmp_path: Path, page: Any) -> None:
    """The log compacted past the page's resourceVersion (the watch's ERROR event with a
    410 Status, here made by intercepting the first watch): the page lists again, then
    watches from the new list, and stays live."""
    db, root = tmp_path / "state.db", tmp_path / "site"
    apply(db, root, file_manifest("kept", "one\n"))
    lists: list[str] = []
    watches: list[str] = []

    def note(request: Any) -> None:
        if "/apis/files.reconcile.dev/v1/files?" in request.url:
            (watches if "watch=true" in request.url else lists).append(request.url)

    def expired(route: Any) -> None:
        if len(watches) > 1:
            route.continue_()
            return
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"}
        body = json.dumps({"type": "ERROR", "object": status}) + "\n"
        route.fulfill(status=200, content_type="application/json", body=body)

    page.on("request", note)
    page.route(lambda url: "/apis/files.reconcile.dev/v1/files?" in url and "watch=true" in url, expired)
    with serving_to(page, db) as url:
        page.goto(f"{url}/ui/#/objects/files.reconcile.dev%2Ffiles")
        expect(page.locator('#objects tr[data-key="File/default/kept"]')).to_have_count(1)
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while len(watches) < 2:  # the watch from the new list (Playwright's events come while it waits)
            assert time.monotonic() < deadline, f"no second watch: {watches}"
            page.wait_for_timeout(50)
        expect(page.locator("#live")).to_have_text("Live")
        assert len(lists) == 2, lists
        assert watches[1].endswith(f"resourceVersion={lists_version(url)}"), watches


@pytest.mark.slow
def test_the_objects_page_with_ten_thousand_objects_is_measured(capsys: Any) -> None:
    """benchmarks/ui.py in the test run: 10,000 Files, 100 changes a second for 5 s. The
    figures are printed beside the API's own list times (timings are not asserted: the
    machine is shared); asserted: every object listed, the last change shown, the heap
    after the changes within a few MB of the heap before (nothing kept per change)."""
    spec = importlib.util.spec_from_file_location("ui_benchmark", CHECKOUT / "benchmarks" / "ui.py")
    assert spec is not None
    assert spec.loader is not None
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    require_chromium()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own Playwright and event loop
        result = pool.submit(benchmark.measure, 10_000, 100, 5.0).result()
    with capsys.disabled():
        print(  # noqa: T201 - the measurement is this test's report
            "\nweb view, 10,000 Files:", json.dumps(result, sort_keys=True)
        )
    assert result["last_change_shown"]
    assert result["changes_sent"] >= 100
    assert result["heap_after_mb"] < result["heap_before_mb"] + 4
