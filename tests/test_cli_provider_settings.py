"""Provider config by one generic path: ``-P PROVIDER.KEY=VALUE`` over
``RECONCILE_<PROVIDER>__<KEY>`` over ``--provider-config`` over what the store
remembers; ``--root`` is ``-P files.roots=`` (made absolute); bad settings are usage
errors (exit 2, one line, no traceback, nothing written, no value echoed)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from reconcile.cli import main
from reconcile.cli.configuring import command_line_settings, environment_settings, provider_config, typed

FILE = (
    "apiVersion: files.reconcile.dev/v1\nkind: File\nmetadata: {name: index}\n"
    "spec: {path: index.html, content: hi}\n"
)
#: What stands for a secret given where it does not belong.
SECRET = "c2VjcmV0LXRzaWcta2V5LXZhbHVl"  # noqa: S105 - a made-up value, searched for in the output
#: What every malformed setting is told.
FORM = "expected PROVIDER.KEY=VALUE (files.roots=/srv/site)"
#: The files provider's keys, as its check names them.
KNOWN = "(known: roots, source_roots, special_modes)"


class Run:
    """``reconcile`` in this process, on a database under a temporary folder."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp = tmp_path
        self.db = tmp_path / "state.db"
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """Exit code, stdout, stderr."""
        self.capsys.readouterr()
        code = main(["--db", str(self.db), *args])
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def remembered(self, provider: str) -> Any:
        """The config the store remembers for ``provider`` (None: none)."""
        with contextlib.closing(sqlite3.connect(self.db)) as conn:
            row = conn.execute(
                "SELECT value FROM meta WHERE key = ?", (f"setting:provider:{provider}",)
            ).fetchone()
        return None if row is None else json.loads(row[0])


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    """The command line on a fresh database."""
    return Run(tmp_path, capsys)


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    """One File manifest."""
    path = tmp_path / "manifests" / "site.yaml"
    path.parent.mkdir()
    path.write_text(FILE)
    return path


class TestValues:
    """How a value given on the command line or in the environment is typed."""

    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("5", 5),
            ("-3", -3),
            ("2.5", 2.5),
            ("1e3", 1000.0),
            ("true", True),
            ("False", False),
            ("null", None),
            ("/srv/site", "/srv/site"),
            ("eu-west-1", "eu-west-1"),
            ("no", "no"),  # not YAML 1.1's boolean
            ("on", "on"),
            ("0644", "0644"),  # not an octal number, not 644
            ("1:20", "1:20"),  # not YAML 1.1's sexagesimal 80
            ("2024-01-01", "2024-01-01"),  # not a date
            ('"5"', "5"),  # quotes keep a string
            ("'true'", "true"),
            ("[a, b]", ["a", "b"]),
            ("[1, '2']", [1, "2"]),
            ("[]", []),
            ("a=b", "a=b"),
        ],
    )
    def test_values_are_typed_as_helms_set(self, text: str, value: object) -> None:
        """Booleans, decimal numbers, flow lists and null are typed; all else is the string."""
        assert typed(text) == value
        assert type(typed(text)) is type(value)

    def test_the_value_is_everything_after_the_first_equals(self) -> None:
        """``-P s3.endpoint_url=http://h/?a=b`` keeps the ``=`` of the value."""
        (setting,) = command_line_settings(["s3.endpoint_url=http://h/?a=b"])
        assert (setting.provider, setting.key, setting.value) == ("s3", "endpoint_url", "http://h/?a=b")

    def test_the_environment_names_provider_and_key(self) -> None:
        """``RECONCILE_<PROVIDER>__<KEY>``, case-insensitive; other RECONCILE_ variables
        are not settings."""
        environ = {"RECONCILE_S3__MAX_POOL_CONNECTIONS": "5", "RECONCILE_DB": "x.db", "RECONCILE_IMPORT": "m"}
        settings = environment_settings(environ)
        assert [(s.provider, s.key, s.value, s.origin) for s in settings] == [
            ("s3", "max_pool_connections", 5, "RECONCILE_S3__MAX_POOL_CONNECTIONS")
        ]

    def test_precedence(self, tmp_path: Path) -> None:
        """-P over the environment over the file; null removes a key; --root is
        files.roots, made absolute; a later -P of a key wins."""
        config = tmp_path / "providers.yaml"
        config.write_text("s3: {region: from-file, profile: p, addressing_style: virtual}\n")
        environ = {"RECONCILE_S3__REGION": "from-env", "RECONCILE_S3__ADDRESSING_STYLE": "path"}
        merged, given = provider_config(
            config,
            command_line_settings(["s3.region=first", "s3.region=from-P", "s3.profile=null"]),
            environ=environ,
            roots=["site"],
        )
        assert merged == {
            "s3": {"region": "from-P", "addressing_style": "path"},
            "files": {"roots": [str(Path("site").absolute())]},
        }
        assert [s.origin for s in given] == [
            "RECONCILE_S3__ADDRESSING_STYLE",
            "RECONCILE_S3__REGION",
            "--root",
            "-P s3.region",
            "-P s3.region",
            "-P s3.profile",
        ]

    def test_root_is_the_short_form_of_files_roots(self) -> None:
        """``--root DIR`` and ``-P files.roots=[DIR]`` build the same config."""
        folder = str(Path("site").absolute())
        by_root, _ = provider_config(None, roots=["site"])
        by_setting, _ = provider_config(None, command_line_settings([f"files.roots=[{folder}]"]))
        assert by_root == by_setting == {"files": {"roots": [folder]}}


class TestCommandLine:
    """``-P`` on the command line, end to end."""

    def test_a_setting_reaches_the_provider_and_is_remembered(
        self, run: Run, manifest: Path, tmp_path: Path
    ) -> None:
        """``-P files.roots=DIR`` confines the files as --root does, and the store
        remembers it; the next command is told it uses it."""
        site = tmp_path / "site"
        code, out, err = run(
            "-P", f"files.roots={site}", "-P", "files.special_modes=true", "apply", "-f", str(manifest)
        )
        assert code == 0, err
        assert "file.files.reconcile.dev/index created" in out
        assert run.remembered("files") == {"roots": str(site), "special_modes": True}
        code, out, err = run("get", "file", "index", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["spec"]["root"] == str(site)
        code, _, err = run("diff", "-f", str(manifest), "--exit-code")
        assert code == 0, err
        assert "using files.special_modes true, which the stored objects were applied with" in err
        assert f"using --root {site}, which the stored objects were applied with" in err
        # --root DIR is the same setting: no warning that it differs.
        code, _, err = run("--root", str(site), "diff", "-f", str(manifest), "--exit-code")
        assert code == 0, err
        assert "another" not in err

    def test_command_line_over_environment_over_file_over_remembered(
        self, run: Run, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """For one key: -P wins over RECONCILE_FILES__ROOTS, which wins over the file, which
        wins over what the store remembers (which fills only keys none of them gives)."""
        remembered, by_file, by_env, by_option = (tmp_path / name for name in ("r", "f", "e", "o"))
        assert (
            run("--root", str(remembered), "-P", "files.special_modes=true", "apply", "-f", str(manifest))[0]
            == 0
        )
        config = tmp_path / "providers.yaml"
        config.write_text(f"files: {{roots: [{by_file}]}}\n")
        plan = ("plan", "-f", str(manifest), "-o", "json")

        def planned_root(*options: str) -> tuple[str, str]:
            code, out, err = run(*options, *plan)
            assert code in {0, 2}, err
            return out, err

        _, err = planned_root("--provider-config", str(config))
        assert f"applied with --root {remembered}; this applies with another root" in err
        assert "using files.special_modes true" in err  # not given: remembered
        monkeypatch.setenv("RECONCILE_FILES__ROOTS", str(by_env))
        _, err = planned_root("--provider-config", str(config))
        assert "this applies with another root" in err
        merged, _ = provider_config(config, environ={"RECONCILE_FILES__ROOTS": str(by_env)})
        assert merged["files"]["roots"] == str(by_env)
        merged, _ = provider_config(
            config,
            command_line_settings([f"files.roots={by_option}"]),
            environ={"RECONCILE_FILES__ROOTS": str(by_env)},
        )
        assert merged["files"]["roots"] == str(by_option)

    def test_the_environment_sets_a_key(
        self, run: Run, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``RECONCILE_FILES__ROOTS`` is files.roots for every command."""
        site = tmp_path / "site"
        monkeypatch.setenv("RECONCILE_FILES__ROOTS", str(site))
        code, _, err = run("apply", "-f", str(manifest))
        assert code == 0, err
        assert run.remembered("files") == {"roots": str(site)}

    def test_the_config_file_comes_from_the_environment_too(
        self, run: Run, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``RECONCILE_PROVIDER_CONFIG`` names the --provider-config file."""
        site = tmp_path / "site"
        config = tmp_path / "providers.yaml"
        config.write_text(f"files: {{roots: [{site}]}}\n")
        monkeypatch.setenv("RECONCILE_PROVIDER_CONFIG", str(config))
        assert run("apply", "-f", str(manifest))[0] == 0
        assert run.remembered("files") == {"roots": [str(site)]}


class TestBadSettings:
    """Each bad setting: exit 2, one clear line, no traceback, nothing written."""

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            (
                ["-P", "files"],
                f"error: -P files: {FORM}, no '=' given",
            ),
            (
                ["-P", "=x"],
                f"error: -P: {FORM}, nothing before '='",
            ),
            (
                ["-P", "root=x"],
                f"error: -P root: {FORM}: no provider before the key",
            ),
            (
                ["-P", "files.=x"],
                f"error: -P files.: {FORM}: no key after the provider",
            ),
            (
                ["-P", "nosuch.key=1"],
                "error: -P nosuch.key: unknown provider 'nosuch' (known: dns, files, s3)",
            ),
            (
                ["-P", "files.nosuchkey=1"],
                f"error: provider config: files.nosuchkey: unknown setting {KNOWN}",
            ),
            (
                ["-P", "files.root=/srv"],
                f"error: provider config: files.root: unknown setting (did you mean 'roots'?) {KNOWN}",
            ),
            (
                ["-P", "files.roots="],
                "error: -P files.roots: no value after '=' (give one; null removes the key)",
            ),
            (
                ["-P", "files.special_modes=maybe"],
                "error: provider config: files.special_modes: expected true or false",
            ),
            (
                ["-P", "s3.max_pool_connections=many"],
                "error: provider config: s3.max_pool_connections: expected an integer >= 1",
            ),
            (
                ["--root", "/a", "-P", "files.roots=/b"],
                "error: --root is files.roots: give it or -P files.roots, not both",
            ),
        ],
    )
    def test_refused(self, run: Run, manifest: Path, options: list[str], message: str) -> None:
        """The setting is named, the reason given; the apply stores nothing."""
        code, out, err = run(*options, "apply", "-f", str(manifest))
        assert (code, out) == (2, ""), err
        assert err.splitlines() == [message]
        assert "Traceback" not in err
        assert not run.db.exists()
        assert not (manifest.parent / "index.html").exists()

    def test_an_empty_environment_variable_is_refused(
        self, run: Run, manifest: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``RECONCILE_FILES__ROOTS=`` is a usage error naming the variable."""
        monkeypatch.setenv("RECONCILE_FILES__ROOTS", "")
        code, _, err = run("apply", "-f", str(manifest))
        assert code == 2
        assert err.splitlines() == [
            "error: RECONCILE_FILES__ROOTS: empty (unset it, or give null to remove the key)"
        ]
        assert not run.db.exists()

    def test_an_unknown_provider_in_the_environment_is_refused(
        self, run: Run, manifest: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``RECONCILE_NOSUCH__KEY`` names the variable and the known providers."""
        monkeypatch.setenv("RECONCILE_NOSUCH__KEY", "1")
        code, _, err = run("apply", "-f", str(manifest))
        assert code == 2
        assert err.splitlines() == [
            "error: RECONCILE_NOSUCH__KEY: unknown provider 'nosuch' (known: dns, files, s3)"
        ]

    @pytest.mark.parametrize(
        "setting",
        [
            f"dns.tsig_secret={SECRET}",
            f"s3.aws_secret_access_key={SECRET}",
            f"s3.secret_access_key={SECRET}",
            f"nosuch.secret={SECRET}",
            f"dns.zones=[{SECRET}]",
        ],
    )
    def test_a_secret_is_never_echoed(
        self, run: Run, manifest: Path, setting: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A secret given where it does not belong is refused without being repeated, in
        the error or in a log, and is not remembered."""
        code, out, err = run("--debug", "-P", setting, "apply", "-f", str(manifest))
        assert code == 2
        assert SECRET not in out + err + caplog.text
        assert not run.db.exists()
