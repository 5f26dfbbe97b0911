"""A provider config that cannot work is said at once: ``Runtime.start`` raises the
config error, and ``reconcile run`` (with or without ``--once``) exits 2 with it, no
traceback, before anything is reconciled (``plan`` refuses it the same way)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import checkout_path
from test_s3 import s3, s3_url  # noqa: F401 - s3, s3_url: fixtures

from reconcile import InvalidError, Runtime, connect
from reconcile_providers.dns import DnsProvider
from reconcile_providers.files import FilesProvider
from reconcile_providers.s3 import S3Provider

ROOT = Path(__file__).parents[1]
#: Seconds a refused config may take to be said (a start, not a --timeout).
PROMPTLY = 20.0


def _reconcile(
    db: Path, config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "reconcile", "--db", str(db), "--provider-config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": checkout_path(), **(env or {})},
    )


def _finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a process that must end by itself, promptly."""
    try:
        out, err = process.communicate(timeout=PROMPTLY)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"still running after {PROMPTLY} s; stdout {out[-500:]!r}, stderr {err[-500:]!r}")
    return process.returncode, out, err


@pytest.fixture
def declared(s3: str, tmp_path: Path) -> Path:  # noqa: F811
    """A store holding one Bucket, applied with a good config (moto_server's)."""
    db = tmp_path / "state.db"
    good = tmp_path / "good.yaml"
    good.write_text(f"s3: {{endpoint_url: '{s3}', addressing_style: path}}\n")
    manifest = tmp_path / "bucket.yaml"
    manifest.write_text("apiVersion: s3.reconcile.dev/v1\nkind: Bucket\nmetadata: {name: cfg-bucket}\n")
    code, _, err = _finished(_reconcile(db, good, "apply", "-f", str(manifest)))
    assert code == 0, err
    return db


BAD = [
    pytest.param("addressing_style: sideways", {}, "s3.addressing_style: must be one of", id="bad-key"),
    pytest.param("profile: nosuch", {}, "s3.profile: no profile 'nosuch'", id="missing-profile"),
    pytest.param(
        "addressing_style: path",
        {"AWS_SHARED_CREDENTIALS_FILE": "CREDENTIALS"},
        "s3: the AWS chain's file",
        id="unparseable-credentials-file",
    ),
]


class TestRun:
    """``reconcile run`` refuses a bad provider config at once, exit 2."""

    @pytest.mark.parametrize("once", [True, False], ids=["once", "serving"])
    @pytest.mark.parametrize(("setting", "env", "said"), BAD)
    async def test_exits_2_with_the_config_error(  # noqa: PLR0917 - the parameters and fixtures
        self,
        s3: str,  # noqa: F811
        declared: Path,
        tmp_path: Path,
        once: bool,
        setting: str,
        env: dict[str, str],
        said: str,
    ) -> None:
        """run and run --once: exit 2 within seconds, the reason on stderr, no traceback,
        and the Bucket neither created nor touched by the engine."""
        credentials = tmp_path / "credentials"
        credentials.write_text("[default\naws_access_key_id = nope\n")
        env = {name: str(credentials) if value == "CREDENTIALS" else value for name, value in env.items()}
        config = tmp_path / "bad.yaml"
        config.write_text(f"s3: {{endpoint_url: '{s3}', {setting}}}\n")
        args = ["run", "--once", "--timeout", "60"] if once else ["run"]
        code, _, err = _finished(_reconcile(declared, config, *args, env=env))
        assert code == 2, err
        assert f"error: provider config: {said}" in err
        assert "Traceback" not in err
        async with connect(declared) as client:
            history = [e.type for e in await client.history("bucket", "cfg-bucket")]
        assert history == ["Created"]  # applied, and nothing since: not reconciled


class TestRuntime:
    """The embedded Runtime raises the config error from start()."""

    @pytest.mark.parametrize(
        ("provider", "config", "said"),
        [
            (S3Provider(), {"s3": {"addressing_style": "sideways"}}, "s3.addressing_style"),
            (S3Provider(), {"s3": {"profile": "nosuch"}}, "s3.profile: no profile 'nosuch'"),
            (S3Provider(), {"s3": {"endpoint_url": "localhost:9000"}}, "s3.endpoint_url: 'localhost:9000'"),
            (DnsProvider(), {"dns": {"timeout": "soon"}}, "dns.timeout: must be a number of seconds"),
            (FilesProvider(), {"files": {"roots": 5}}, "files.roots: expected a folder or a list"),
            (FilesProvider(), {"files": {"root": "/srv"}}, "files.root: unknown setting"),
        ],
    )
    async def test_start_raises_it(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        provider: Any,
        config: dict[str, Any],
        said: str,
    ) -> None:
        """start() raises InvalidError with the field path; the runtime is left closed."""
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
        runtime = Runtime(tmp_path / "state.db", providers=[provider], provider_config=config)
        with pytest.raises(InvalidError) as caught:
            await runtime.start()
        assert said in str(caught.value)
        assert runtime.controllers == {}
        async with Runtime(tmp_path / "state.db", providers=[provider]):  # the runner lock was let go
            pass
