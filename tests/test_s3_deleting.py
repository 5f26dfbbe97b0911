"""A bucket that cannot be deleted yet (not empty, no ``forceDestroy``), against
moto_server: the retries back off from the provider's ``retry_after``, doubling, and a
failure that repeats is recorded once, not twice per try."""

# ruff: noqa: F811 - the fixtures imported from test_s3 are requested by name
from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from test_files_provider import until_async
from test_s3 import (  # noqa: F401 - fixtures, used by name
    _ready,
    _synced_says,
    bucket,
    raw,
    running,
    s3,
    s3_url,
)

from reconcile import Runtime
from reconcile.testing import FakeClock

REGION = {"LocationConstraint": "eu-west-1"}


class TestNotEmpty:
    """``forceDestroy: false`` and objects in the bucket."""

    async def test_retries_double_and_the_failure_is_recorded_once(
        self, running: Runtime, raw: Any, clock: FakeClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The queue waits 5, 10, 20 s between tries (the provider's ``retry_after``,
        doubling; not 5 s ten times), and history has one DeleteRequested/DeleteFailed
        pair however many tries fail alike."""
        await running.apply(bucket("full-site"))
        await until_async(clock, _ready(running, "bucket", "full-site"))
        await raw.put_object(Bucket="full-site", Key="keep.txt", Body=b"keep")
        failures: list[str] = []
        controller = running.controllers["bucket.s3.reconcile.dev"]
        controller.add_listener(
            lambda _key, outcome: failures.append(outcome) if outcome == "error" else None
        )
        caplog.set_level(logging.INFO, logger="reconcile.controller")
        await running.client.delete("bucket", "full-site")

        async def three_tries() -> bool:
            return len(failures) >= 3

        await until_async(clock, three_tries)
        delays = [
            round(float(match))
            for record in caplog.records
            if "full-site failed" in record.getMessage()
            for match in re.findall(r"retry in ([0-9.]+)s", record.getMessage())
        ]
        assert delays[:3] == [5, 10, 20], delays
        history = [e.type for e in await running.client.history("bucket", "full-site")]
        assert history.count("DeleteFailed") == 1, history
        assert history.count("DeleteRequested") == 1, history
        assert await raw.head_object(Bucket="full-site", Key="keep.txt")
        await raw.delete_object(Bucket="full-site", Key="keep.txt")  # emptied: the next try deletes it

        async def gone() -> bool:
            return not (await running.client.list("bucket")).items

        await until_async(clock, gone)


class TestRescue:
    """An object stuck deleting is rescued by changing its spec, as Kubernetes allows."""

    async def test_force_destroy_set_while_deleting_lets_the_bucket_go(
        self, running: Runtime, raw: Any, clock: FakeClock
    ) -> None:
        """A bucket stuck "not empty" gets ``forceDestroy: true`` by apply while it is
        being deleted: the apply is taken, and the next try empties and deletes it."""
        await running.apply(bucket("stuck-site"))
        await until_async(clock, _ready(running, "bucket", "stuck-site"))
        await raw.put_object(Bucket="stuck-site", Key="keep.txt", Body=b"keep")
        await running.client.delete("bucket", "stuck-site")

        async def refused() -> bool:
            events = await running.client.history("bucket", "stuck-site")
            return any(e.type == "DeleteFailed" and "not empty" in str(e.data) for e in events)

        await until_async(clock, refused)
        rescued = await running.apply(bucket("stuck-site", forceDestroy=True))
        assert rescued.metadata.deletion_timestamp is not None
        assert rescued.spec.force_destroy is True

        async def gone() -> bool:
            return not (await running.client.list("bucket")).items

        await until_async(clock, gone)
        listed = await raw.list_buckets()
        assert "stuck-site" not in [b["Name"] for b in listed["Buckets"]]
