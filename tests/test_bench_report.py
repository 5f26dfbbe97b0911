"""benchmarks/report.py: one self-contained page with every benchmark's figures beside
their limits, stamped with commit, date and machine, its charts' labels never cut.

Built from small JSON files the benchmarks wrote at tiny sizes (``benchmark_results/``;
the smoke tests in test_examples.py build it from fresh ones too)."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
RESULTS = Path(__file__).parent / "benchmark_results"
BENCHMARKS = ("reconcile", "store", "files", "growth", "s3", "dns", "startup", "http")
# Last, not first: benchmarks/reconcile.py would shadow the package for every test
# collected after this one.
sys.path.append(str(ROOT / "benchmarks"))

from charts import text_width  # noqa: E402


def build(tmp_path: Path, *paths: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the report on ``paths``; what it printed and the page."""
    page = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "report.py"), *map(str, paths), "--out", str(page)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return result, page.read_text() if page.exists() else ""


def charts(page: str) -> list[xml.dom.minidom.Element]:
    """Every inline SVG of the page, parsed."""
    found = re.findall(r"<svg.*?</svg>", page, re.DOTALL)
    return [xml.dom.minidom.parseString(svg).documentElement for svg in found]  # noqa: S318 - our own


def overflow(svg: xml.dom.minidom.Element) -> list[str]:
    """The texts of ``svg`` that do not fit in it, or run into its bars."""
    width = float(svg.getAttribute("width"))
    bars = [
        (float(r.getAttribute("x")), float(r.getAttribute("y")), float(r.getAttribute("height")))
        for r in svg.getElementsByTagName("rect")
    ]
    cut = []
    for text in svg.getElementsByTagName("text"):
        if text.getAttribute("transform"):
            continue  # the rotated axis title, along the plot's height
        label = text.firstChild.data if text.firstChild else ""
        x, size = float(text.getAttribute("x")), float(text.getAttribute("font-size"))
        span = text_width(label, size)
        anchor = text.getAttribute("text-anchor") or "start"
        low, high = {"start": (x, x + span), "end": (x - span, x), "middle": (x - span / 2, x + span / 2)}[
            anchor
        ]
        # A name left of the bars of its row must end before they start.
        y = float(text.getAttribute("y"))
        beside = [bx for bx, by, height in bars if bx > x and by < y and y - size < by + height]
        if low < 0 or high > width or (anchor == "start" and beside and high > min(beside)):
            cut.append(label)
    return cut


class TestReport:
    """The one page a user opens to see every figure beside its limit."""

    def test_every_benchmark_is_on_the_page(self, tmp_path: Path) -> None:
        """Each benchmark make bench runs has its section, named in the summary."""
        result, page = build(tmp_path, *(RESULTS / f"{name}.json" for name in BENCHMARKS))
        assert result.returncode == 0, result.stderr
        for name in BENCHMARKS:
            assert f'<h2 id="{name}">' in page
            assert f'<td><a href="#{name}">{name}</a></td>' in page, f"{name} missing from the summary"
        assert "Every figure beside its limit" in page
        assert "Cold convergence (seconds, log-log)" in page  # two sizes: the scaling chart
        assert "lean plain program" in page  # dns's second reference
        assert len(charts(page)) >= len(BENCHMARKS)

    def test_stamped_with_commit_date_and_machine(self, tmp_path: Path) -> None:
        """The commit (with "dirty" when tracked files differ), today's date, the CPU
        model, its cores and the Python version."""
        _, page = build(tmp_path, RESULTS / "growth.json")
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],  # noqa: S607 - git from PATH
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],  # noqa: S607
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert f"<b>commit</b>: {head}{' (dirty)' if dirty else ''}<br>" in page
        assert f"<b>date</b>: {dt.datetime.now(dt.UTC):%Y-%m-%d}" in page
        machine = re.search(r"<b>machine</b>: ([^<]+), (\d+) cores", page)
        assert machine is not None
        assert machine.group(1).strip()
        assert f"Python {sys.version_info.major}.{sys.version_info.minor}." in page

    def test_tables_and_charts_have_legends(self, tmp_path: Path) -> None:
        """Every table is followed by a legend saying what its columns mean, every chart
        by one saying which bar is the figure and which the limit."""
        _, page = build(tmp_path, *(RESULTS / f"{name}.json" for name in BENCHMARKS))
        tables = re.findall(r"</table>\s*(<[^>]+>)", page)
        assert tables
        assert all('class="legend"' in after for after in tables)
        drawn = re.findall(r"(<svg.*?</svg>)(?=\s*(<[^>]+>))", page, re.DOTALL)
        assert len(drawn) == len(charts(page))
        for svg, after in drawn:
            if "<polyline" in svg:  # a line chart names its series inside, under the plot
                assert "minimal loop" in svg
            else:
                assert 'class="legend"' in after
        assert 'class="swatch measured"' in page
        assert 'class="swatch limit"' in page

    def test_labels_have_room(self, tmp_path: Path) -> None:
        """Every text of every chart fits in its drawing and clears the bars, long names
        included: the drawing is as wide as its longest label."""
        data = json.loads((RESULTS / "store.json").read_text())
        long_name = "store.write, 100 writers, with a name far longer than any column would hold"
        for row in data["rows"]:
            if row["case"] == "store.write, 100 writers":
                row["case"] = long_name
        store = tmp_path / "store.json"
        store.write_text(json.dumps(data))
        others = (RESULTS / f"{name}.json" for name in BENCHMARKS if name != "store")
        _, page = build(tmp_path, store, *others)
        assert long_name in page
        for svg in charts(page):
            assert overflow(svg) == [], svg.getAttribute("aria-label")

    def test_text_width_grows_with_wide_letters(self) -> None:
        """The room of a label is computed from its letters: "WWW" needs more than "iii"."""
        assert text_width("WWW", 12) > 2 * text_width("iii", 12)
        assert text_width("store.write", 12) == pytest.approx(text_width("store.write", 24) / 2)

    def test_self_contained(self, tmp_path: Path) -> None:
        """No script, no stylesheet or image fetched: nothing but inline SVG and CSS."""
        _, page = build(tmp_path, *(RESULTS / f"{name}.json" for name in BENCHMARKS))
        assert "<script" not in page
        assert "<link" not in page
        assert "<img" not in page
        assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * len(charts(page))

    def test_another_benchmark_is_shown_plainly(self, tmp_path: Path) -> None:
        """A JSON of a benchmark the report has no view for: its figures, and a word that
        no limit is drawn."""
        other = tmp_path / "atomic.json"
        other.write_text(json.dumps({"benchmark": "atomic", "size": 50, "median_s": 0.25}))
        result, page = build(tmp_path, other)
        assert result.returncode == 0, result.stderr
        assert "draws no limit for this benchmark" in page
        assert "<td>median_s</td><td>0.25</td>" in page

    def test_a_busy_run_says_so(self, tmp_path: Path) -> None:
        """A run made with ``--busy``: its section's title says the second core was busy."""
        data = json.loads((RESULTS / "files.json").read_text())
        busy = tmp_path / "files.json"
        busy.write_text(json.dumps({**data, "busy": True}))
        result, page = build(tmp_path, busy)
        assert result.returncode == 0, result.stderr
        assert re.search(r"<h2 id=\"files\">[^<]*\(second core busy\)</h2>", page)
        _, quiet = build(tmp_path, RESULTS / "files.json")
        assert "second core busy" not in quiet

    def test_files_readings_of_the_no_change_pass(self, tmp_path: Path) -> None:
        """The files section draws the run pass beside both its limits and the resync beside
        the plain read; a files.json written before those readings is drawn without them."""
        result, page = build(tmp_path, RESULTS / "files.json")
        assert result.returncode == 0, result.stderr
        assert "no change: a run pass, vs load" in page
        assert "no change: a resync" in page
        older = tmp_path / "files.json"
        data = json.loads((RESULTS / "files.json").read_text())
        new = ("plain_check_cpu_s", "plain_load_check_s", "plain_load_check_cpu_s", "noop_pass_cpu_s")
        new += ("resync_pass_s", "resync_pass_cpu_s", "resync_events_appended")
        older.write_text(json.dumps({k: v for k, v in data.items() if k not in new}))
        result, page = build(tmp_path, older)
        assert result.returncode == 0, result.stderr
        assert "no change: a run pass" in page
        assert "a resync" not in page

    def test_a_missing_file_is_refused(self, tmp_path: Path) -> None:
        """A JSON file that is not there: exit 2 naming it, no page, no traceback."""
        result, page = build(tmp_path, tmp_path / "nothing.json")
        assert result.returncode == 2
        assert "no such file" in result.stderr
        assert "nothing.json" in result.stderr
        assert "Traceback" not in result.stderr
        assert page == ""

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("{not json", "not a benchmark's JSON"),
            ("[1, 2]", "a list, not an object"),
            ('{"benchmark": "files", "size": 3}', "not what benchmarks/files.py writes (KeyError"),
        ],
    )
    def test_a_file_of_another_shape_is_refused(self, tmp_path: Path, text: str, reason: str) -> None:
        """A file that is not a benchmark's JSON, or not of its benchmark's shape: exit 2
        naming the file and why, no page, no traceback."""
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        result, page = build(tmp_path, RESULTS / "growth.json", bad)
        assert result.returncode == 2
        assert f"{bad}: " in result.stderr
        assert reason in result.stderr
        assert "Traceback" not in result.stderr
        assert page == ""
