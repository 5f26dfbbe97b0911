"""The benchmark report: one HTML page with every figure beside its limit.

    python benchmarks/report.py RESULT.json [RESULT.json ...] [--out PATH]

Reads the JSON each benchmark writes with ``--json`` (``make bench`` runs them all and
passes every file: ``store``, ``reconcile``, ``files``, ``growth``, ``s3``, ``dns``,
``startup``, ``http``) and writes one self-contained page: inline SVG and CSS, no script,
nothing fetched. It opens
with a summary, every benchmark's figures beside the limit measured in the same run,
then a section per benchmark (:mod:`sections`): what was measured, a chart of each
figure over its limit, and tables whose legends say what each column means.

The page is stamped with where and when it was built: the commit (``dirty`` when
tracked files differ from it), the date, and the machine (CPU model, cores, Python).
A report is only as current as its JSON files, so each is listed with the Python and
cores it recorded and when it was written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from charts import LIMIT, MEASURED, figure
from sections import SECTIONS, Section, section_of

ROOT = Path(__file__).resolve().parents[1]
STYLE = f"""
body {{ font-family: DejaVu Sans, Verdana, Arial, sans-serif; max-width: 1000px; margin: 2em auto;
       padding: 0 1em; color: #222; }}
svg {{ display: block; max-width: 100%; height: auto; margin: 1em 0 0.3em; }}
table {{ border-collapse: collapse; margin: 1em 0 0.3em; }}
td, th {{ padding: 2px 10px; text-align: right; border-bottom: 1px solid #eee; }}
td:first-child, th:first-child {{ text-align: left; }}
.stamp {{ color: #555; font-size: 0.9em; }}
.legend {{ color: #555; font-size: 0.85em; margin: 0 0 1.2em; }}
dl.legend {{ display: grid; grid-template-columns: max-content auto; gap: 0 1em; }}
dl.legend dt {{ font-weight: bold; }} dl.legend dd {{ margin: 0; }}
.swatch {{ display: inline-block; width: 1.2em; height: 0.8em; vertical-align: middle; }}
.swatch.measured {{ background: {MEASURED}; }} .swatch.limit {{ background: {LIMIT}; }}
"""


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(  # noqa: S603 - git, with arguments of our own
            ["git", "-C", str(ROOT), *args],  # noqa: S607 - git as the user's PATH finds it
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def stamp() -> dict[str, str]:
    """The commit, date and machine this report is built on."""
    commit = _git("rev-parse", "HEAD") or "unknown (not a git checkout)"
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += " (dirty)"
    return {
        "commit": commit,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{_cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "python": f"Python {platform.python_version()} ({platform.python_implementation()})",
    }


def _summary(sections: Sequence[Section]) -> str:
    """Every figure of every benchmark beside its limit, in one table."""
    rows = []
    for section in sections:
        for c in section.comparisons:
            better = "lower" if c.lower_is_better else "higher"
            rows.append(
                f'<tr><td><a href="#{section.benchmark}">{html.escape(section.benchmark)}</a></td>'
                f"<td>{html.escape(c.name)}</td><td>{figure(c.measured, c.unit)}</td>"
                f"<td>{figure(c.limit, c.unit)}</td><td>{html.escape(c.limit_name)}</td>"
                f"<td>{c.ratio:.2f}</td><td>{better}</td></tr>"
            )
    head = "".join(
        f"<th>{h}</th>" for h in ("benchmark", "figure", "measured", "limit", "limit is", "x limit", "better")
    )
    legend = (
        '<dl class="legend"><dt>measured</dt><dd>the engine\'s figure</dd>'
        "<dt>limit</dt><dd>the same work done with nothing in between, measured in the same run</dd>"
        "<dt>limit is</dt><dd>what the limit is</dd>"
        "<dt>x limit</dt><dd>measured / limit</dd>"
        "<dt>better</dt><dd>whether a lower or a higher figure is better (seconds, bytes: lower; "
        "rates: higher)</dd></dl>"
    )
    table = f"<table><tr>{head}</tr>{''.join(rows)}</table>"
    return f'<h2 id="summary">Every figure beside its limit</h2>\n{table}\n{legend}'


def _sources(paths: Sequence[Path], documents: Sequence[dict[str, Any]]) -> str:
    """Each JSON file read, with what it recorded of its run."""
    rows = []
    for path, data in zip(paths, documents, strict=True):
        written = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(cell))}</td>"
                for cell in (
                    data.get("benchmark", "?"),
                    path,
                    written,
                    data.get("python", ""),
                    data.get("cpus", ""),
                    data.get("size", ""),
                )
            )
            + "</tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("benchmark", "file", "written", "python", "cpus", "size"))
    legend = (
        '<dl class="legend"><dt>written</dt><dd>when the benchmark wrote the file (the figures are of '
        "that run)</dd><dt>python, cpus, size</dt><dd>as the benchmark recorded them</dd></dl>"
    )
    return f"<h2>Sources</h2>\n<table><tr>{head}</tr>{''.join(rows)}</table>\n{legend}"


class UnreadableError(ValueError):
    """A result file that is not a benchmark's JSON, or not of the shape its benchmark writes."""


def _read(path: Path) -> tuple[dict[str, Any], Section]:
    """A result file and its section; UnreadableError naming the file and what is wrong."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        message = f"{path}: not a benchmark's JSON ({exc})"
        raise UnreadableError(message) from None
    if not isinstance(data, dict):
        message = f"{path}: not a benchmark's JSON (a {type(data).__name__}, not an object)"
        raise UnreadableError(message)
    try:
        return data, section_of(data)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        message = (
            f"{path}: not what benchmarks/{data.get('benchmark')}.py writes ({type(exc).__name__}: {exc})"
        )
        raise UnreadableError(message) from None


def render(paths: Sequence[Path]) -> str:
    """The page for the benchmark JSON files at ``paths``."""
    read = [_read(path) for path in paths]
    documents = [data for data, _ in read]
    order = list(SECTIONS)
    sections = sorted(
        (section for _, section in read),
        key=lambda s: order.index(s.benchmark) if s.benchmark in order else len(order),
    )
    where = stamp()
    body = [
        "<h1>reconcile benchmarks</h1>",
        '<p class="stamp">'
        + "<br>".join(f"<b>{key}</b>: {html.escape(value)}" for key, value in where.items())
        + "</p>",
        (
            "<p>Each figure is measured beside its limit in the same run: compare the ratios, which "
            "are measured side by side, rather than seconds across runs or machines.</p>"
        ),
        "<p>" + " · ".join(f'<a href="#{s.benchmark}">{html.escape(s.title)}</a>' for s in sections) + "</p>",
        _summary(sections),
    ]
    for section in sections:
        body.append(f'<h2 id="{html.escape(section.benchmark)}">{html.escape(section.title)}</h2>')
        body += section.parts
    body.append(_sources(paths, documents))
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>reconcile benchmarks</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def main() -> None:
    """Read the JSON files given, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="JSON files the benchmarks wrote (--json)")
    parser.add_argument("--out", type=Path, default=Path("bench-output/report.html"))
    args = parser.parse_args()
    missing = [str(path) for path in args.results if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    try:
        page = render(args.results)
    except UnreadableError as exc:
        parser.error(str(exc))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
