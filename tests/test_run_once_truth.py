"""``run --once`` says "converged" only about what it saw: every object observed in this
run, Synced and Ready for its generation; a failed observe leaves Ready Unknown, not a
stale True a reader would trust."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from test_cli import SITE, Cli
from test_files_provider import until_async

from reconcile import Runtime, TransientError
from reconcile.model.conditions import ConditionStatus
from reconcile.testing import FakeClock
from reconcile.testing.memory import MemoryCloud, MemoryProvider

SOURCED = """\
apiVersion: files.reconcile.dev/v1
kind: File
metadata: {name: copy}
spec: {path: out/a.html, source: pages/a.html}
"""


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a fresh database."""
    return Cli(tmp_path, capsys)


def converged_once(cli: Cli) -> None:
    """Apply the site and converge it, as a first good run."""
    cli.write("site.yaml", SITE)
    assert cli("apply", "-f", str(cli.manifests))[0] == 0
    code, _, err = cli("run", "--once", "--timeout", "30", "-q")
    assert code == 0, err


class TestRunOnce:
    """What a second ``run --once`` says when it cannot see what the first one made."""

    def test_a_failing_observe_is_not_converged(self, cli: Cli) -> None:
        """A folder on the way swapped for a symlink after a good run: every File's
        observe fails, so run --once exits 1 naming each (it printed the Ready table and
        exited 0: the statuses from the first run said Ready)."""
        converged_once(cli)
        out = cli.manifests / "out"
        elsewhere = cli.tmp / "elsewhere"
        out.rename(elsewhere)
        out.symlink_to(elsewhere)
        code, _, err = cli("run", "--once", "--timeout", "4", "-q")
        assert code == 1, err
        assert "File default/index: Ready=Unknown Synced=False" in err
        assert "leads through the symlink" in err

    def test_another_root_is_not_converged(self, cli: Cli) -> None:
        """The second run pointed at another ``--root``: nothing it declares can be
        observed there, so it exits 1 naming each (it printed ``ready N/N``, exit 0)."""
        converged_once(cli)
        other = cli.tmp / "other-root"
        other.mkdir()
        code, _, err = cli("--root", str(other), "run", "--once", "--timeout", "4", "-q")
        assert code == 1, err
        assert "File default/index: Ready=Unknown Synced=False" in err
        assert "outside the roots this runner may write" in err

    def test_status_already_false_is_counted(self, cli: Cli) -> None:
        """A file that stays unwritable across two runs: the second says how many are not
        converged and names them (it said the contradictory "0 not Ready")."""
        cli.write("site.yaml", SITE)
        cli("apply", "-f", str(cli.manifests))
        (cli.manifests / "out").mkdir()
        (cli.manifests / "out" / "index.html").mkdir()
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 1
        code, _, err = cli("run", "--once", "--timeout", "30", "-q")
        assert code == 1
        assert "1 not Synced and Ready" in err or "2 not Synced and Ready" in err, err
        assert "0 not" not in err
        assert "File default/index:" in err

    def test_a_good_second_run_still_exits_0(self, cli: Cli) -> None:
        """Nothing changed outside: the second run observes everything again and exits 0."""
        converged_once(cli)
        code, out, err = cli("run", "--once", "--timeout", "30", "-q")
        assert code == 0, err
        assert "index" in out

    def test_a_copy_that_cannot_be_repaired_is_named(self, cli: Cli) -> None:
        """A published copy defaced after a good run, its source swapped meanwhile (so it
        cannot be published again until applied): exit 1 naming it (it exited 0)."""
        (cli.manifests / "pages").mkdir()
        (cli.manifests / "pages" / "a.html").write_text("<p>a</p>\n")
        cli.write("copy.yaml", SOURCED)
        assert cli("apply", "-f", str(cli.manifests))[0] == 0
        assert cli("run", "--once", "--timeout", "30", "-q")[0] == 0
        (cli.manifests / "out" / "a.html").write_text("defaced\n")
        (cli.manifests / "pages" / "a.html").write_text("<p>swapped</p>\n")
        code, _, err = cli("run", "--once", "--timeout", "30", "-q")
        assert code == 1, err
        assert "File default/copy:" in err
        assert "changed since it was applied" in err


class TestReadyUnknown:
    """A failed observe turns Ready Unknown, keeping since when it was last known Ready."""

    async def test_ready_turns_unknown_and_back(self, tmp_path: Path, clock: FakeClock) -> None:
        """Ready=True, then the cloud stops answering: Ready=Unknown ObserveFailed naming
        the error and the time it had been Ready since; answering again: Ready=True."""
        cloud = MemoryCloud()
        cloud.clock = clock
        runtime = Runtime(
            tmp_path / "s.db",
            providers=[MemoryProvider(cloud)],
            clock=clock,
            wall_clock=clock,
            poll_interval=10,
            resync_period=None,
        )
        manifest = {
            "apiVersion": "memory.reconcile.dev/v1",
            "kind": "Bucket",
            "metadata": {"name": "b"},
            "spec": {"name": "b", "value": "v"},
        }
        async with runtime:
            await runtime.apply(manifest)
            await until_async(clock, ready_is(runtime, ConditionStatus.TRUE))
            cloud.fail_next("observe", *[TransientError("the cloud is down")] * 1000)
            await until_async(clock, ready_is(runtime, ConditionStatus.UNKNOWN))
            ready = (await runtime.client.get("bucket", "b")).status.condition("Ready")
            assert ready is not None
            assert ready.reason == "ObserveFailed"
            assert "the cloud is down" in ready.message
            assert "last known Ready (since " in ready.message
            assert not runtime.convergence().converged
            cloud._faults.clear()
            await until_async(clock, ready_is(runtime, ConditionStatus.TRUE))

            async def converged() -> bool:
                return runtime.convergence().waiting == ()

            await until_async(clock, converged)  # (once the reconcile that wrote it has finished)


def ready_is(runtime: Runtime, wanted: ConditionStatus) -> Callable[[], Awaitable[bool]]:
    """A predicate: the bucket's Ready condition has status ``wanted``."""

    async def holds() -> bool:
        ready = (await runtime.client.get("bucket", "b")).status.condition("Ready")
        return ready is not None and ready.status is wanted

    return holds
