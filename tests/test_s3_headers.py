"""An Object's header fields (``contentType``, ``cacheControl``, user ``metadata``)
that can never be sent: refused at admission with the field path, and, for an object
stored before that check, a permanent failure at run time (one CreateFailed, no endless
retry) with the whole reason, against moto_server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_files_provider import until_async
from test_s3 import DEADLINE, bucket, s3, s3_object, s3_url  # noqa: F401 - s3, s3_url: fixtures

from reconcile import InvalidError, Kind, KindRegistry, PermanentError, Runtime, connect
from reconcile.cli import running
from reconcile.testing import FakeClock
from reconcile_providers.s3 import BUCKET, OBJECT, S3Provider
from reconcile_providers.s3.failing import s3_errors

UNSENDABLE = [
    ({"contentType": "text/plain\r\nX-Evil: 1"}, "spec.contentType: holds a control character, '\\r'"),
    ({"contentType": "text/plain\n"}, "spec.contentType: holds a control character, '\\n'"),
    ({"cacheControl": "max-age=\x00"}, "spec.cacheControl: holds a control character, '\\x00'"),
    ({"cacheControl": "max-age=é"}, "spec.cacheControl: holds a character outside ASCII, 'é' (U+00E9)"),
    ({"cacheControl": "no-cache "}, "spec.cacheControl: begins or ends with a blank, which HTTP trims"),
    ({"metadata": {"k": "v\r\nx-amz-acl: public-read"}}, "spec.metadata['k']: the value holds a control"),
    ({"metadata": {"k": "grüße"}}, "spec.metadata['k']: the value holds a character outside ASCII"),
    ({"metadata": {"k": " padded"}}, "spec.metadata['k']: the value begins or ends with a blank"),
    ({"metadata": {"a b": "x"}}, "spec.metadata['a b']: holds ' ' (U+0020): a metadata key is part of"),
    ({"metadata": {"k:": "x"}}, "spec.metadata['k:']: holds ':' (U+003A)"),
    ({"metadata": {"k\n": "x"}}, "spec.metadata['k\\n']: holds '\\n' (U+000A)"),
]


class TestAdmission:
    """What cannot travel in an HTTP header is refused when applied (no server needed)."""

    @pytest.mark.parametrize(("spec", "message"), UNSENDABLE)
    async def test_refused(self, tmp_path: Path, spec: dict[str, Any], message: str) -> None:
        """Each unsendable value: InvalidError with the field path and why, nothing stored."""
        manifest = s3_object("o", "site", "index.html", content="a", **spec)
        async with connect(tmp_path / "o.db", kinds=KindRegistry([OBJECT])) as client:
            with pytest.raises(InvalidError) as caught:
                await client.apply(manifest)
            assert message in str(caught.value)
            assert await client.revision() == 0

    async def test_ordinary_headers_pass(self, tmp_path: Path) -> None:
        """Parameters, commas, inner blanks and token keys are what headers are made of."""
        manifest = s3_object(
            "o",
            "site",
            "index.html",
            content="a",
            contentType='text/html; charset="utf-8"',
            cacheControl="public, max-age=60",
            metadata={"x-owner_team.1": "web team (eu)", "empty": ""},
        )
        async with connect(tmp_path / "o.db", kinds=KindRegistry([OBJECT])) as client:
            stored = await client.apply(manifest)
        assert stored.spec.metadata["x-owner_team.1"] == "web team (eu)"


class _Unchecked(S3Provider):
    """The s3 provider as an older release admitted Objects: no header checks, as for an
    object stored before this one."""

    @property
    def kinds(self) -> Sequence[Kind]:
        return (BUCKET, attrs.evolve(OBJECT, validate=None))


@pytest.fixture
async def unchecked(s3: str, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Runtime]:  # noqa: F811
    """A Runtime on moto_server whose Objects skipped the header checks at admission."""
    runtime = Runtime(
        tmp_path / "state.db",
        providers=[_Unchecked()],
        provider_config={"s3": {"endpoint_url": s3, "addressing_style": "path"}},
        clock=clock,
        wall_clock=clock,
        poll_interval=60,
        resync_period=None,
        provider_timeout=None,  # real requests on a fake clock (see test_s3's running fixture)
    )
    async with runtime:
        await asyncio.wait_for(runtime.wait_synced(), DEADLINE)
        yield runtime


class TestSendTime:
    """What botocore or the HTTP client refuses to send is a permanent error."""

    @pytest.mark.parametrize(
        ("arguments", "said"),
        [
            ({"ContentType": "text/plain\r\nX-Evil: 1"}, "Forbidden control character"),
            ({"Metadata": {"k": "ü"}}, "Non ascii characters found in S3 metadata"),
        ],
    )
    async def test_refused_requests_are_permanent(
        self,
        s3: str,  # noqa: F811
        arguments: dict[str, Any],
        said: str,
    ) -> None:
        """A PutObject botocore or aiohttp will not send: PermanentError, the whole reason
        on one line."""
        from aiobotocore.session import get_session  # noqa: PLC0415

        session = get_session()
        async with session.create_client("s3", region_name="eu-west-1", endpoint_url=s3) as raw:
            await raw.create_bucket(
                Bucket="headers", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
            )
            with pytest.raises(PermanentError) as caught, s3_errors("PutObject", "headers"):
                await raw.put_object(Bucket="headers", Key="k", Body=b"x", **arguments)
        message = str(caught.value)
        assert message.startswith("S3 PutObject of bucket 'headers': cannot be sent: ")
        assert said in message
        assert "\n" not in message

    async def test_a_stored_unsendable_object_fails_once(self, unchecked: Runtime, clock: FakeClock) -> None:
        """An object stored with a CR/LF in its Content-Type: Synced=False saying why, one
        CreateFailed, and no retry as time passes."""
        runtime = unchecked
        await runtime.apply(bucket("headers"))
        await runtime.apply(s3_object("evil", "headers", "a.txt", content="a", contentType="a\r\nX-Evil: 1"))

        async def failed() -> bool:
            obj = await runtime.client.get("object", "evil")
            synced = obj.status.condition("Synced")
            return synced is not None and "cannot be sent" in synced.message

        await until_async(clock, failed)
        for _ in range(30):
            clock.advance(10)
            await asyncio.sleep(0)
        history = [e.type for e in await runtime.client.history("object", "evil")]
        assert history.count("CreateFailed") == 1


class TestWholeMessage:
    """The command line shows a condition's whole message, not its first line."""

    async def test_describe_get_and_the_once_report(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A two-line Synced message: describe and run --once's report show its second line."""
        from reconcile.cli import main  # noqa: PLC0415
        from reconcile.model.conditions import Condition, ConditionStatus, set_condition  # noqa: PLC0415

        message = "S3 PutObject: Parameter validation failed:\nNon ascii characters found in S3 metadata"
        db = tmp_path / "state.db"
        async with connect(db, kinds=KindRegistry([OBJECT])) as client:
            obj = await client.apply(s3_object("o", "site", "a.txt", content="a"))
            synced = Condition("Synced", ConditionStatus.FALSE, "ReconcileError", message)
            status = attrs.evolve(obj.status, conditions=set_condition(obj.status.conditions, synced))
            obj = await client.update_status(attrs.evolve(obj, status=status))
        assert "Non ascii characters" in running._why(obj)  # run --once's report line
        capsys.readouterr()
        assert await asyncio.to_thread(main, ["--db", str(db), "describe", "object", "o"]) == 0
        assert "failed: Non ascii characters found in S3 metadata" in capsys.readouterr().out
