"""``reconcile serve`` stops gracefully on a signal and says how with its exit code:
0 after SIGTERM (a service manager's stop), 130 after SIGINT (Ctrl-C), as the other
commands do; never killed by the signal it handled (uvicorn raises it again)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from http_helpers import serve_process


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_stopped_server_exits_with_the_signals_code(
    tmp_path: Path, sent: signal.Signals, code: int
) -> None:
    """The server announces itself, gets the signal, stops, and exits with ``code``."""
    with serve_process(tmp_path / "state.db") as (process, _):
        process.send_signal(sent)
        _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "Traceback" not in err
