"""The probes (``/livez``, ``/readyz``, ``/healthz``) and ``/health``."""

from __future__ import annotations

from pathlib import Path

import pytest
from http_helpers import api

from reconcile.errors import StoreUnavailableError
from reconcile.runtime.health import ControllerHealth, Health


async def test_probes_pass_on_a_store_that_answers(tmp_path: Path) -> None:
    """ok on each probe; verbose lists each check; /health has the head revision."""
    async with api(tmp_path) as (_, http):
        for probe in ("/livez", "/readyz", "/healthz"):
            response = await http.get(probe)
            assert (response.status_code, response.text) == (200, "ok")
        verbose = await http.get("/readyz", params={"verbose": ""})
        health = (await http.get("/health")).json()
    assert "[+]store ok" in verbose.text
    assert "[+]store-writes ok" in verbose.text
    assert health["store"] == {"reachable": True, "problem": None, "revision": "0", "writeRefusal": None}
    assert health["sharding"] is None


async def test_a_store_refusing_writes_is_not_ready_yet_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only server: live (reads still served), not ready, the reason said."""
    async with api(tmp_path) as (client, http):

        async def refusing() -> str:
            return "the server is read-only (a standby)"

        monkeypatch.setattr(client.store, "write_refusal", refusing)
        live = await http.get("/livez")
        ready = await http.get("/readyz")
    assert live.status_code == 200
    assert ready.status_code == 500
    assert "[-]store-writes failed: the server is read-only (a standby)" in ready.text


async def test_an_unreachable_store_fails_every_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's message in the probe, 503 from /health."""
    async with api(tmp_path) as (client, http):

        async def down() -> int:
            raise StoreUnavailableError("the database server is unreachable")

        monkeypatch.setattr(client.store, "revision", down)
        live = await http.get("/livez")
        health = await http.get("/health")
    assert live.status_code == 500
    assert "[-]store failed: the database server is unreachable" in live.text
    assert health.status_code == 503
    assert health.json()["store"]["reachable"] is False


async def test_a_runtime_beside_the_api_is_in_the_probes(tmp_path: Path) -> None:
    """With serve --run: readyz waits for the controllers; /health lists them."""
    waiting = ControllerHealth(
        name="file",
        synced=False,
        watching=True,
        running=True,
        crashes=0,
        watch_failures=0,
        cached=0,
        depth=0,
        processing=0,
        waiting=0,
        longest_running=0.0,
    )
    async with api(tmp_path) as (_, http):
        http_state = http._transport.app.state.reconcile  # type: ignore[attr-defined]
        http_state.runtime_health = lambda: Health.of((waiting,), started=True)
        ready = await http.get("/readyz")
        live = await http.get("/livez")
        health = (await http.get("/health")).json()
    assert ready.status_code == 500
    assert "[-]runtime failed" in ready.text
    assert live.status_code == 200
    assert health["runtime"]["controllers"][0]["name"] == "file"
