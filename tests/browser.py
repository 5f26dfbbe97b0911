"""Helpers of the web view's browser tests: Debian's chromium driven by Playwright's Python
package (no browser download: ``executable_path`` names the system's), the app served by
uvicorn in a thread of the test process (for an app a test builds itself), and the
screenshots the docs use.

Under ``CI=true`` a missing chromium or Playwright fails the run; elsewhere the browser
tests are skipped loudly (:func:`servers.unavailable`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from servers import unavailable
from starlette.applications import Starlette

CHROMIUM = Path("/usr/bin/chromium")
#: Where the screenshots go: a scratch folder, so that a test run leaves the checkout as
#: it was; ``make screenshots`` sets ``RECONCILE_SCREENSHOTS=docs/how-to/img`` to renew
#: the ones the docs show.
SCREENSHOTS = Path(
    os.environ.get("RECONCILE_SCREENSHOTS") or Path(tempfile.gettempdir()) / "reconcile-screenshots"
)
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def require_chromium() -> None:
    """Debian's chromium and Playwright's package are here (or the test is skipped loudly,
    failed under ``CI=true``)."""
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} is missing (make test installs it)"
        unavailable("chromium", "the web view's browser tests", missing)
    try:
        import playwright.sync_api  # noqa: F401, PLC0415 - a dev dependency, checked here
    except ImportError as exc:
        unavailable("playwright", "the web view's browser tests", str(exc))


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium (Playwright's ``Browser``)."""
    require_chromium()
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - a dev dependency, checked there

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def expect(target: Any) -> Any:
    """Playwright's ``expect`` (its assertions wait; no script is evaluated in the page,
    whose Content-Security-Policy forbids ``eval``)."""
    from playwright.sync_api import expect as playwright_expect  # noqa: PLC0415 - checked by chromium()

    return playwright_expect(target)


def screenshot(page: Any, name: str) -> Path:
    """The page as it shows now: ``ui-NAME.png`` in :data:`SCREENSHOTS` (the docs' own
    folder under ``make screenshots``)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"ui-{name}.png"
    page.screenshot(path=str(path), scale="css", animations="disabled")
    return path


@contextlib.contextmanager
def serving(build: Callable[[], contextlib.AbstractAsyncContextManager[Starlette]]) -> Iterator[str]:
    """The app that ``build()`` opens, served by uvicorn on a free loopback port in a thread
    of its own (with its own event loop); yields the URL, stops the server afterwards."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)  # noqa: FBT003 - socket's own signature
    port = sock.getsockname()[1]
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def run() -> None:
        async with build() as app:
            config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
            server = uvicorn.Server(config)
            holder["server"] = server

            async def announce() -> None:
                while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
                    await asyncio.sleep(0.01)
                started.set()

            announcing = asyncio.ensure_future(announce())
            try:
                await server.serve(sockets=[sock])
            finally:
                announcing.cancel()

    def main() -> None:
        try:
            asyncio.run(run())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            holder["error"] = exc
            started.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert started.wait(30), "the in-process server did not start"
    if "error" in holder:
        raise holder["error"]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        holder["server"].should_exit = True
        thread.join(30)
        sock.close()
