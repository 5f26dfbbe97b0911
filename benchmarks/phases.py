"""What the provider benchmarks (``s3.py``, ``dns.py``) share: each phase's time and
calls beside the plain program's, printed as a table and written as JSON."""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["arguments", "best_of", "report"]


def arguments(doc: str, size: int, what: str, *, rounds: int = 1) -> argparse.Namespace:
    """The command line both take: ``--size`` (``what``, ``size`` by default),
    ``--workers`` (the concurrency of both sides), ``--rounds`` (each side run that many
    times, the sides taking turns) and ``--json``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--size", type=int, default=size, help=what)
    parser.add_argument("--workers", type=int, default=16, help="concurrency of both sides")
    parser.add_argument(
        "--rounds",
        type=int,
        default=rounds,
        help=f"runs of each side, taking turns; each phase's best is compared (default {rounds})",
    )
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def best_of(runs: Sequence[Mapping[str, Any]], phases: Sequence[str]) -> dict[str, Any]:
    """Each phase's best (shortest) time of ``runs`` with that run's calls, and every
    run's time under ``{phase}_runs``: a sub-second phase is at the mercy of whatever else
    the machine does, and both sides, taking turns, get the same chances."""
    best: dict[str, Any] = {}
    for phase in phases:
        fastest = min(runs, key=lambda run: float(run[f"{phase}_s"]))
        best[f"{phase}_s"] = fastest[f"{phase}_s"]
        best[f"{phase}_calls"] = fastest[f"{phase}_calls"]
        best[f"{phase}_runs"] = [run[f"{phase}_s"] for run in runs]
    return best


def report(
    benchmark: str,
    limit: Mapping[str, Any],
    engine: Mapping[str, Any],
    phases: Sequence[str],
    *,
    columns: Sequence[str],
    cells: Callable[[Mapping[str, Any]], Sequence[str]],
    extra: Callable[[Mapping[str, Any]], Mapping[str, Any]] = lambda _calls: {},
    others: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any],
    json_path: Path | None,
) -> list[dict[str, Any]]:
    """One row per phase (``{phase}_s`` and ``{phase}_calls`` of both sides, the ratio, and
    ``extra(our_calls)``); the table has the fixed columns, each of the ``others``
    (further references, by name: their time and our ratio to it), then ``columns``
    filled by ``cells(row)``; the JSON adds ``settings``. Returns the rows."""
    others = others or {}
    named = [c for name in others for c in (f"{name} s", f"x {name}")]
    header = ("phase", "plain s", "ours s", "x plain", *named, *columns)
    width = max(11, *(len(h) + 1 for h in header))
    print(" ".join(f"{h:>{width}}" for h in header))
    rows = []
    for phase in phases:
        plain_s, ours_s = limit[f"{phase}_s"], engine[f"{phase}_s"]
        our_calls = engine[f"{phase}_calls"]
        row = {
            "phase": phase,
            "plain_s": plain_s,
            "ours_s": ours_s,
            "ratio": ours_s / plain_s if plain_s else None,
            "plain_calls": limit[f"{phase}_calls"],
            "our_calls": our_calls,
            "plain_runs": limit[f"{phase}_runs"],
            "our_runs": engine[f"{phase}_runs"],
            **extra(our_calls),
        }
        compared = []
        for name, other in others.items():
            other_s = other[f"{phase}_s"]
            row[f"{name}_s"], row[f"ratio_{name}"] = other_s, ours_s / other_s if other_s else None
            compared += [f"{other_s:.2f}", f"{ours_s / other_s:.2f}" if other_s else "-"]
        rows.append(row)
        ratio = f"{ours_s / plain_s:.2f}" if plain_s else "-"
        printed = (phase, f"{plain_s:.2f}", f"{ours_s:.2f}", ratio, *compared, *cells(row))
        print(" ".join(f"{c:>{width}}" for c in printed))
    if json_path is not None:
        result = {"benchmark": benchmark, **settings, "python": platform.python_version(), "rows": rows}
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n")
    return rows
