"""The embedding example: an aiohttp service runs the Runtime in its own loop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from reconcile import ReconcileError
from reconcile.testing import MemoryCloud, MemoryProvider

sys.path.insert(0, str(Path(__file__).parents[1] / "examples" / "service"))

from app import RUNTIME, create_app


class TestEmbeddedService:
    """Startup opens the Runtime, a request applies and waits for Ready, shutdown drains."""

    async def test_put_waits_until_ready(self, tmp_path: Path) -> None:
        """PUT answers with Ready=True once the bucket exists in the cloud."""
        cloud = MemoryCloud()
        app = create_app(f"sqlite:///{tmp_path}/service.db", [MemoryProvider(cloud)])
        async with TestClient(TestServer(app)) as http:
            response = await http.put("/buckets/photos", json={"value": "v1"})
            assert response.status == 200
            body = await response.json()
            assert body["conditions"]["Ready"] == {"status": "True", "reason": "Available"}
            assert cloud.items["photos"].value == "v1"
            response = await http.get("/buckets/photos")
            assert (await response.json())["generation"] == 1
            assert (await http.get("/buckets/nope")).status == 404
            bad = await http.put("/buckets/Bad_Name", json={"value": "x"})
            assert bad.status == 422
            assert "metadata.name" in (await bad.json())["error"]
            runtime = app[RUNTIME]
            await runtime.wait_synced()
            for probe in ("/readyz", "/healthz"):
                answer = await http.get(probe)
                assert answer.status == 200
                report = await answer.json()
                assert report["ready"] is True
                assert report["problems"] == []
        with pytest.raises(ReconcileError, match="not started"):
            _ = runtime.client  # shutdown drained and closed the runtime

    async def test_timeout_is_a_504(self, tmp_path: Path) -> None:
        """A bucket that cannot become Ready in time answers 504 with the reason."""
        cloud = MemoryCloud()
        cloud.break_item("stuck", RuntimeError("backend down"))
        app = create_app(f"sqlite:///{tmp_path}/service.db", [MemoryProvider(cloud)])
        async with TestClient(TestServer(app)) as http:
            response = await http.put("/buckets/stuck?timeout=0", json={"value": "v"})
            assert response.status == 504
            assert "was not Ready in time" in (await response.json())["error"]


async def test_bad_bodies_are_400s(tmp_path: Path) -> None:
    """A body that is not JSON, JSON that is not an object, a timeout that is not a
    number: 400 with a one-line reason (not JSON answered 500 with a traceback)."""
    app = create_app(f"sqlite:///{tmp_path}/service.db", [MemoryProvider(MemoryCloud())])
    async with TestClient(TestServer(app)) as http:
        for body, query, reason in (
            ("not json", "", "the body is not JSON"),
            ("[1, 2]", "", "must be a JSON object"),
            ('{"value": "v"}', "?timeout=soon", "timeout: must be a number"),
        ):
            response = await http.put(
                f"/buckets/photos{query}", data=body, headers={"Content-Type": "application/json"}
            )
            assert response.status == 400, await response.text()
            answer = await response.json()
            assert reason in answer["error"]
            assert "\n" not in answer["error"]
