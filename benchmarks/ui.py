"""The web view with many objects: how soon the objects page shows its first screen, and
whether it stays responsive, with bounded memory, while changes stream in.

A store of --size Files (one kind), served by ``reconcile serve``; Debian's chromium
(driven by Playwright) opens the objects page of that kind. Measured in the same run:

* the API's own list time (one unpaged ``GET`` of every File, and the first page of 500
  that the page asks first), the floor under the page's time;
* the page's first screen (navigation start to the first rows drawn) and the full load
  (every object listed), against the target of 1 s for the first screen;
* then --rate changes per second (merge patches of a File's labels through the API)
  for --seconds: the page's frame delay (the gap of ``requestAnimationFrame`` sampled
  every 100 ms: how long an input would wait), its long tasks, and its JavaScript heap
  (after a garbage collection) before and after, and whether the last change arrived.

    python benchmarks/ui.py [--size N] [--rate R] [--seconds S] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "providers")]
TARGET_FIRST_SCREEN_S = 1.0
CHROMIUM = "/usr/bin/chromium"  # Debian's (make test installs it); never a downloaded browser
FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"

from reconcile.api import connect  # noqa: E402 - after the checkout is on the path


def _manifest(i: int, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": f"file-{i:05d}", "labels": {"app": "bench", "shard": str(i % 10), **labels}},
        "spec": {"path": f"site/file-{i:05d}.txt", "content": f"file {i}\n"},
    }


async def _fill(db: Path, size: int) -> None:
    manifests = [_manifest(i) for i in range(size)]
    async with connect(f"sqlite:///{db}") as client:
        applied = await client.apply_many(manifests, batch=1000, origins=[db.parent / "files.yaml"] * size)
    refused = [a for a in applied if a.error is not None]
    assert not refused, refused[0].error


def _serve(db: Path) -> tuple[subprocess.Popen[str], str]:
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'providers'}"}
    process = subprocess.Popen(  # noqa: S603 - our own command
        [sys.executable, "-m", "reconcile", "--db", str(db), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("serving on "), line
    return process, line.removeprefix("serving on ").strip()


def _list_times(url: str) -> dict[str, float]:
    with httpx.Client(base_url=url, timeout=120) as http:
        times = {}
        for name, params in (("api_list_all_s", {}), ("api_first_page_s", {"limit": "500"})):
            samples = []
            for _ in range(3):
                start = time.perf_counter()
                response = http.get("/apis/files.reconcile.dev/v1/files", params=params)
                response.raise_for_status()
                samples.append(time.perf_counter() - start)
            times[name] = statistics.median(samples)
    return times


def _changes(db: Path, size: int, rate: int, seconds: float, done: dict[str, Any]) -> None:
    """``rate`` changes a second for ``seconds``, written to the store by a client of this
    process (ten at a time, as a busy runner's batches come), the server's watch sends them."""

    async def write() -> None:
        per_tick = max(1, rate // 10)
        sent = 0
        async with connect(f"sqlite:///{db}") as client:
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                batch = []
                for _ in range(per_tick):
                    i = (sent * 7919) % size
                    batch.append(_manifest(i, tick=str(sent)))
                    done["last"] = (f"file-{i:05d}", str(sent))
                    sent += 1
                await client.apply_many(batch, origins=[db.parent / "files.yaml"] * len(batch))
                delay = start + sent / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            done["sent"] = sent
            done["elapsed_s"] = time.perf_counter() - start

    asyncio.run(write())


FRAME_PROBE = """() => new Promise((resolve) => {
  const asked = performance.now();
  requestAnimationFrame(() => resolve(performance.now() - asked));
})"""
LONG_TASKS = """() => {
  window.__longTasks = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
  }).observe({ type: "longtask", buffered: true });
}"""


def _heap(cdp: Any) -> int:
    cdp.send("HeapProfiler.collectGarbage")
    return int(cdp.send("Runtime.getHeapUsage")["usedSize"])


def measure(size: int, rate: int, seconds: float) -> dict[str, Any]:  # noqa: PLR0915 - one run, in order
    """One run's figures."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - a dev dependency

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "state.db"
        start = time.perf_counter()
        asyncio.run(_fill(db, size))
        result: dict[str, Any] = {"size": size, "rate": rate, "seconds": seconds}
        result["fill_s"] = time.perf_counter() - start
        process, url = _serve(db)
        try:
            result.update(_list_times(url))
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                cdp = page.context.new_cdp_session(page)
                page.on("pageerror", lambda e: print("pageerror:", e, file=sys.stderr))
                page.goto(f"{url}/ui/#/objects/files.reconcile.dev%2Ffiles", wait_until="commit")
                page.locator("#objects tbody tr").first.wait_for(timeout=60_000)
                for mark in ("kinds", "first-page", "first-rows"):
                    found = page.evaluate(f"performance.getEntriesByName('reconcile:{mark}')[0].startTime")
                    result[f"page_{mark.replace('-', '_')}_s"] = found / 1000
                result["page_dom_content_loaded_s"] = (
                    page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")
                    / 1000
                )
                result["first_screen_s"] = result["page_first_rows_s"]
                page.get_by_text(f"{size} of {size} objects").wait_for(timeout=120_000)
                result["full_load_s"] = page.evaluate("performance.now()") / 1000
                page.locator('#live[data-state="live"]').wait_for(timeout=60_000)
                page.evaluate(LONG_TASKS)
                result["heap_before_mb"] = _heap(cdp) / 2**20
                done: dict[str, Any] = {}
                writer = threading.Thread(target=_changes, args=(db, size, rate, seconds, done))
                writer.start()
                delays = []
                while writer.is_alive():
                    delays.append(page.evaluate(FRAME_PROBE))
                    page.wait_for_timeout(100)
                writer.join()
                name, tick = done["last"]
                page.get_by_label("Label selector").fill(f"tick={tick}")
                page.locator(f'#objects tbody tr[data-key="File/default/{name}"]').wait_for(timeout=30_000)
                result["changes_sent"] = done["sent"]
                result["changes_per_s"] = done["sent"] / done["elapsed_s"]
                result["frame_delay_ms_p50"] = statistics.median(delays)
                result["frame_delay_ms_max"] = max(delays)
                tasks = page.evaluate("window.__longTasks")
                result["long_tasks"] = len(tasks)
                result["long_task_ms_max"] = max(tasks, default=0.0)
                result["heap_after_mb"] = _heap(cdp) / 2**20
                result["last_change_shown"] = True
                browser.close()
        finally:
            process.terminate()
            process.wait(30)
            if process.stdout is not None:
                process.stdout.close()
    result["target_first_screen_s"] = TARGET_FIRST_SCREEN_S
    return result


def main() -> None:
    """Measure and print (and save with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    result = measure(options.size, options.rate, options.seconds)
    for key, value in result.items():
        print(f"{key:24} {value:.3f}" if isinstance(value, float) else f"{key:24} {value}")
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
