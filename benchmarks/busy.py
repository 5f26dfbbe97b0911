"""The second core kept busy beside a benchmark (``--busy``): a CPU-bound process of its
own, pinned nowhere, for the whole run (the figures and the limits measured beside them).

    with burning(args.busy) as burner:
        ...  # measure
    result.update(burner.record())

The burner is stopped on leaving the block, on SIGINT (KeyboardInterrupt) and on SIGTERM
(turned into SystemExit while the block runs); if the benchmark dies without running its
``finally`` (SIGKILL), the burner sees its parent change and exits by itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

#: Spins; between spins, exits once its parent (the pid it is given: a parent that died
#: before the burner started would otherwise go unnoticed) is gone and it is re-parented.
#: A Ctrl-C reaches it too (the terminal's process group): it exits quietly.
SPIN = (
    "import os, sys\n"
    "parent = int(sys.argv[1])\n"
    "try:\n"
    "    while os.getppid() == parent:\n"
    "        for _ in range(200_000):\n"
    "            pass\n"
    "except KeyboardInterrupt:\n"
    "    pass\n"
)

TITLE = " (second core busy)"


class Burner:
    """A CPU-bound process beside this one, or none (``busy`` false)."""

    def __init__(self, busy: bool) -> None:
        self.busy = busy
        self.pid: int | None = None
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._started = 0.0

    @property
    def title(self) -> str:
        """What a table's title says of the run: ``" (second core busy)"`` or nothing."""
        return TITLE if self.busy else ""

    def start(self) -> None:
        """Start spinning."""
        if not self.busy:
            return
        self._process = subprocess.Popen([sys.executable, "-c", SPIN, str(os.getpid())])  # noqa: S603
        self.pid = self._process.pid
        self._started = time.perf_counter()

    def stop(self) -> None:
        """Stop it and reap it, keeping the CPU it had (idempotent)."""
        process, self._process = self._process, None
        if process is None:
            return
        self.wall_s = time.perf_counter() - self._started
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime

    def record(self) -> dict[str, Any]:
        """For the JSON: ``busy``, and the burner's pid, seconds and share of a core."""
        if not self.busy:
            return {"busy": False}
        share = self.cpu_s / self.wall_s if self.wall_s else 0.0
        return {
            "busy": True,
            "burner": {"pid": self.pid, "cpu_s": self.cpu_s, "wall_s": self.wall_s, "core_share": share},
        }

    def summary(self) -> str:
        """One line for the output (empty when not busy)."""
        if not self.busy:
            return ""
        record = self.record()["burner"]
        return (
            f"second core busy: the burner had {record['cpu_s']:.1f} s of CPU over {record['wall_s']:.1f} s "
            f"({100 * record['core_share']:.0f}% of a core)"
        )


def _terminated(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
    """SIGTERM while burning: unwind (the burner is stopped on the way out)."""
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def burning(busy: bool) -> Iterator[Burner]:
    """A :class:`Burner` running for the block when ``busy``; stopped however it ends."""
    burner = Burner(busy)
    if not busy:
        yield burner
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        burner.start()
        yield burner
    finally:
        burner.stop()
        signal.signal(signal.SIGTERM, previous)
