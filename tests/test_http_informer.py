"""A reflector's view of the HTTP API, against ``reconcile serve`` through the official
kubernetes Python client: list, then watch from the list's resourceVersion (restarted
from the last version seen, as client-go's reflector restarts it, and relisting now and
then) while another thread writes. The informer's cache built from nothing but what the
list and the watches said must converge to the store's state, every event must be new
to it (no event missed between a list and its watch, none sent twice), and
resourceVersions must rise within each stream."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from http_helpers import served

GROUP, VERSION, PLURAL, NAMESPACE = "files.reconcile.dev", "v1", "files", "default"
FILES = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"


def _manifest(root: Path, name: str, content: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "File",
        "metadata": {"name": name, "labels": {"app": "site"}},
        "spec": {"path": f"{name}.html", "root": str(root), "content": content},
    }


def _write(
    url: str, root: Path, seed: int, *, done: threading.Event, written: list[int], midway: threading.Event
) -> None:
    """150 random creates, patches and deletes of a few names; the resourceVersion
    of each object a write answered with appended to ``written``. Halfway, the writer
    waits for ``midway`` (the informer relisted): the writes are fast enough to end
    before the informer's first relist otherwise."""
    rng = random.Random(seed)
    names = [f"f{i}" for i in range(6)]
    merge = {"content-type": "application/merge-patch+json"}
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            for step in range(150):
                if step == 75:
                    assert midway.wait(60), "the informer did not relist while the writers wrote"
                name = rng.choice(names)
                choice = rng.random()
                if choice < 0.4:
                    response = http.post(FILES, json=_manifest(root, name, f"{step}\n"))
                elif choice < 0.8:
                    label = rng.choice(["site", "other"])
                    patch = {"spec": {"content": f"{step}\n"}, "metadata": {"labels": {"app": label}}}
                    response = http.patch(f"{FILES}/{name}", json=patch, headers=merge)
                else:
                    response = http.delete(f"{FILES}/{name}")
                answer = response.json()
                if response.is_success and answer.get("kind") == "File":
                    written.append(int(answer["metadata"]["resourceVersion"]))
    finally:
        done.set()


class Informer:
    """A reflector and its cache (name -> resourceVersion), from list and watch alone."""

    def __init__(self, api: kubernetes.client.CustomObjectsApi, selector: str = "") -> None:
        self.api = api
        self.selector = selector
        self.cache: dict[str, int] = {}
        self.version = 0
        self.events = 0
        #: The revisions each watch delivered, and the stretches each relist covered.
        self.seen: list[int] = []
        self.relisted: list[tuple[int, int]] = []

    def covered(self, revision: int) -> bool:
        """Whether the informer learnt of ``revision``: an event of it, or a list after it."""
        return revision in self.seen or any(start < revision <= end for start, end in self.relisted)

    def relist(self) -> None:
        """List and replace the cache (the reflector's ``Replace``)."""
        listed = self.api.list_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, label_selector=self.selector
        )
        self.cache = {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"]) for i in listed["items"]}
        version = int(listed["metadata"]["resourceVersion"])
        self.relisted.append((self.version, version))
        self.version = version

    def watch_once(self, seconds: int) -> None:
        """One watch from the last version seen, until its timeout ends it."""
        stream = kubernetes.watch.Watch().stream(
            self.api.list_namespaced_custom_object,
            GROUP,
            VERSION,
            NAMESPACE,
            PLURAL,
            resource_version=str(self.version),
            label_selector=self.selector,
            allow_watch_bookmarks=True,
            timeout_seconds=seconds,
        )
        last = self.version
        for event in stream:
            kind, obj = event["type"], event["raw_object"]
            assert kind != "ERROR", obj
            revision = int(obj["metadata"]["resourceVersion"])
            assert revision >= last, (kind, revision, last)
            if kind == "BOOKMARK":
                last = self.version = revision
                continue
            assert revision > last, f"{kind} at {revision}: not after {last} (sent twice?)"
            name = obj["metadata"]["name"]
            if kind == "ADDED":
                assert name not in self.cache, f"ADDED {name} at {revision}, cached at {self.cache.get(name)}"
                self.cache[name] = revision
            elif kind == "MODIFIED":
                assert name in self.cache, f"MODIFIED {name} at {revision}: never added (missed?)"
                assert self.cache[name] < revision
                self.cache[name] = revision
            else:
                assert kind == "DELETED", kind
                assert self.cache.pop(name, None) is not None, f"DELETED {name}: never added (missed?)"
            last = self.version = revision
            self.events += 1
            self.seen.append(revision)


def _store_state(url: str, selector: str = "") -> tuple[dict[str, int], int]:
    with httpx.Client(base_url=url, timeout=30) as http:
        listed = http.get(FILES, params={"labelSelector": selector} if selector else {}).json()
    items = {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"]) for i in listed["items"]}
    return items, int(listed["metadata"]["resourceVersion"])


@pytest.mark.parametrize("selector", ["", "app=site"])
def test_an_informer_converges_to_the_store_under_concurrent_writes(tmp_path: Path, selector: str) -> None:
    """Two writers, a reflector that lists, watches in short stretches from where it got
    to, and relists now and then: no event out of order, missed or repeated, and its
    cache ends equal to a fresh list's. With a label selector (the writers move objects
    in and out of it): an object that comes to match is ADDED, one that stops is
    DELETED, never a MODIFIED of one the informer does not hold."""
    with served(tmp_path / "state.db") as url:
        configuration = kubernetes.client.Configuration()
        configuration.host = url
        with kubernetes.client.ApiClient(configuration) as client:
            informer = Informer(kubernetes.client.CustomObjectsApi(client), selector)
            done = [threading.Event(), threading.Event()]
            midway = threading.Event()
            written: list[int] = []
            writers = [
                threading.Thread(
                    target=_write,
                    args=(url, tmp_path, seed),
                    kwargs={"done": done[seed], "written": written, "midway": midway},
                )
                for seed in (0, 1)
            ]
            informer.relist()
            for writer in writers:
                writer.start()
            rounds = after = 0
            deadline = time.monotonic() + 120
            while after < 10:  # (after the writes: until converged, at most ten watches)
                assert time.monotonic() < deadline, "the writers did not finish"
                rounds += 1
                writing = not all(d.is_set() for d in done)
                if rounds % 4 == 0 and writing:
                    informer.relist()
                    midway.set()
                informer.watch_once(1)
                if not writing:
                    after += 1
                    state, head = _store_state(url, selector)
                    if informer.cache == state and informer.version >= head:
                        break
            for writer in writers:
                writer.join()
            assert informer.events > 0
            assert informer.relisted[1:], "no relist while the writers wrote"
            assert len(set(informer.seen)) == len(informer.seen), "an event sent twice"
            if not selector:
                missed = sorted(r for r in set(written) if not informer.covered(r))
                assert not missed, f"writes the informer never learnt of: {missed}"
            assert informer.cache == _store_state(url, selector)[0]
