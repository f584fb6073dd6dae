"""The usage chart as a real browser draws it: headless Chromium lays out the SVG and HTML, and every legend
label (indeed every text and mark) lies inside the picture. Chromium comes from scripts/browser-prepare."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gitopsq.simulate import chart
from gitopsq.simulate.result import QueueFinal, Result

from .builders import result

WINDOW = (1280, 900)
MEASURE = """<script>
const pictures = [];
for (const svg of document.querySelectorAll('svg')) {
  const view = svg.viewBox.baseVal, box = svg.getBoundingClientRect();
  const marks = [];
  for (const el of svg.querySelectorAll('text, rect, path, line')) {
    const b = el.getBBox();
    marks.push({tag: el.tagName, cls: el.getAttribute('class'), text: el.textContent,
                x: b.x, y: b.y, right: b.x + b.width, bottom: b.y + b.height});
  }
  pictures.push({width: view.width, height: view.height, left: box.left, right: box.right, marks});
}
document.getElementById('measured').textContent = JSON.stringify({innerWidth: window.innerWidth, pictures});
</script>"""


def _browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.fail("no headless Chromium on PATH: run scripts/browser-prepare (scripts/test does)")
    return found


def _chromium(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / "chromium-profile"
    done = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def measure(page_html: str, tmp_path: Path, name: str) -> dict[str, object]:
    """Load ``page_html`` with the measuring script appended; return what the browser measured."""
    page = tmp_path / f"{name}.html"
    body_end = page_html.rfind("</body>")
    probe = '<pre id="measured"></pre>' + MEASURE
    page.write_text(page_html[:body_end] + probe + page_html[body_end:] if body_end >= 0
                    else f"<!DOCTYPE html><html><body style='margin:0'>{page_html}{probe}</body></html>",
                    encoding="utf-8")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found and found[1], dom[-2000:]
    measured: dict[str, object] = json.loads(found[1].replace("&quot;", '"').replace("&amp;", "&")
                                             .replace("&lt;", "<").replace("&gt;", ">"))
    return measured


def assert_inside(measured: dict[str, object], *, in_window: bool) -> None:
    """Every mark inside its SVG's viewBox; with ``in_window``, the SVG inside the browser window's width too."""
    pictures = measured["pictures"]
    assert isinstance(pictures, list) and pictures
    for picture in pictures:
        legends = [m for m in picture["marks"] if m["cls"] == "legend"]
        assert legends, "the chart has legend labels"
        for mark in picture["marks"]:
            assert mark["x"] >= -0.5 and mark["y"] >= -0.5, mark
            assert mark["right"] <= picture["width"] + 0.5, (mark, picture["width"])
            assert mark["bottom"] <= picture["height"] + 0.5, (mark, picture["height"])
        if in_window:
            assert picture["right"] <= measured["innerWidth"], picture["right"]  # type: ignore[operator]


def _stress() -> tuple[Result, dict[str, dict[tuple[str, str], int]]]:
    """Long flavor names with wide letters and big quantities, and a panel with more flavors than rows fit."""
    long = "mmmwww-reserved-capacity-in-zone-b-with-a-long-name-x"
    many = [f"flavor-{i}" for i in range(9)]
    usage = {"cq-wide": {(long, "memory"): 2_000_000_000_000_000, ("on-demand", "memory"): 1000},
             "cq-many": {(f, "cpu"): 1000 * (i + 1) for i, f in enumerate(many)}}
    nominal = {"cq-wide": {(long, "memory"): 1536 * 2**30 * 1000, ("on-demand", "memory"): 384 * 2**30 * 1000},
               "cq-many": {(f, "cpu"): 38_000 for f in many}}
    timeline = ((0.0, {"cq-wide": {}, "cq-many": {}}), (10.0, usage))
    return result(timeline=timeline, queues={"cq-wide": QueueFinal({}, 1, 0), "cq-many": QueueFinal({}, 9, 0)},
                  end=60.0, name="stress"), nominal


@pytest.mark.parametrize("kind", ["svg", "html"])
def test_stress_chart_legend_fits_in_a_real_browser(kind: str, tmp_path: Path) -> None:
    """With very long labels and a nine-flavor panel, Chromium draws every legend label inside the picture."""
    drawn, nominal = _stress()
    page = chart.render_svg(drawn, nominal) if kind == "svg" else chart.render_html(drawn, nominal)
    assert_inside(measure(page, tmp_path, kind), in_window=False)


def test_demo_charts_fit_and_screenshot(tmp_path: Path) -> None:
    """The demo's usage.svg and usage.html (whose legend was cut at "on-demand (nominal 38…") fit in Chromium,
    and Chromium renders the SVG to a PNG screenshot."""
    from gitopsq.demo import run_demo

    outcome = run_demo(tmp_path / "demo")
    charts = {p.suffix: p for p in outcome.charts}
    assert set(charts) == {".svg", ".html"}
    for suffix, path in charts.items():
        measured = measure(path.read_text(encoding="utf-8"), tmp_path, f"demo{suffix.replace('.', '-')}")
        assert_inside(measured, in_window=True)
        labels = [m["text"] for p in measured["pictures"] for m in p["marks"] if m["cls"] == "legend"]
        assert "on-demand (nominal 384Gi)" in labels
    shot = tmp_path / "usage.png"
    _chromium(tmp_path, f"--screenshot={shot}", charts[".svg"].as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
