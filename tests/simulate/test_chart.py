"""The usage chart: panels per ClusterQueue and resource, self-contained SVG and HTML, deterministic."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from gitopsq.api import model as m
from gitopsq.api.quantity import quantity
from gitopsq.simulate import chart
from gitopsq.simulate.result import QueueFinal, Result

from .builders import result

SVG = "{http://www.w3.org/2000/svg}"

TIMELINE = (
    (0.0, {"cq-a": {}, "cq-b": {}}),
    (10.0, {"cq-a": {("on-demand", "cpu"): 4000}, "cq-b": {}}),
    (20.0, {"cq-a": {("on-demand", "cpu"): 4000, ("spot", "cpu"): 2000}, "cq-b": {("a100", "nvidia.com/gpu"): 1000}}),
    (50.0, {"cq-a": {("spot", "cpu"): 2000}, "cq-b": {}}),
)
QUEUES = {"cq-a": QueueFinal({}, 0, 1), "cq-b": QueueFinal({}, 0, 0)}


def _result(name: str = "two-queues") -> Result:
    return result(timeline=TIMELINE, queues=QUEUES, end=60.0, name=name)


def test_one_panel_per_queue_and_resource_with_one_series_per_flavor() -> None:
    """Panels are (ClusterQueue, resource) in name order; each flavor is a step series starting at zero."""
    drawn = chart.panels(_result())
    assert [(p.cluster_queue, p.resource) for p in drawn] == [("cq-a", "cpu"), ("cq-b", "nvidia.com/gpu")]
    on_demand, spot = drawn[0].series
    assert on_demand.flavor == "on-demand" and on_demand.points == ((0.0, 0), (10.0, 4000), (50.0, 0))
    assert spot.flavor == "spot" and spot.points == ((0.0, 0), (20.0, 2000))


def test_nominal_quotas_come_from_cluster_queue_objects() -> None:
    """nominal_quotas reads every ClusterQueue's nominal quota per flavor and resource, in milli-units."""
    cq = m.ClusterQueue(meta=m.ObjectMeta(name="cq-a"), resource_groups=(m.ResourceGroup(
        covered_resources=("cpu",), flavors=(
            m.FlavorQuotas(name="on-demand", resources=(m.ResourceQuota(name="cpu", nominal_quota=quantity("4")),)),
            m.FlavorQuotas(name="spot", resources=(m.ResourceQuota(name="cpu", nominal_quota=quantity("500m")),)),
        )),))
    flavor = m.ResourceFlavor(meta=m.ObjectMeta(name="on-demand"))
    assert chart.nominal_quotas([flavor, cq]) == {"cq-a": {("on-demand", "cpu"): 4000, ("spot", "cpu"): 500}}


def test_nominal_quota_adds_an_idle_flavor_and_a_dashed_line() -> None:
    """A flavor with quota but no usage still gets a panel series, and its nominal quota a dashed line."""
    nominal = {"cq-b": {("a100", "nvidia.com/gpu"): 2000, ("h100", "nvidia.com/gpu"): 1000}}
    drawn = chart.panels(_result(), nominal)
    gpu = next(p for p in drawn if p.cluster_queue == "cq-b")
    assert [(s.flavor, s.nominal) for s in gpu.series] == [("a100", 2000), ("h100", 1000)]
    svg = chart.render_svg(_result(), nominal)
    assert svg.count('stroke-dasharray="5 4"') == 2
    assert "a100 (nominal 2)" in svg


def test_svg_is_well_formed_and_self_contained() -> None:
    """The SVG parses as XML, draws one path per series, and has no scripts or external references."""
    svg = chart.render_svg(_result())
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f".//{SVG}path")) == 3
    assert "<script" not in svg and "href" not in svg
    assert re.findall(r"https?://[^\"' ]+", svg) == ["http://www.w3.org/2000/svg"]


def test_html_embeds_the_svg_and_a_summary_without_scripts() -> None:
    """The HTML page inlines the SVG and a per-ClusterQueue table, with no script and no remote asset."""
    page = chart.render_html(_result("<odd & name>"))
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page and "<table>" in page and "<td>cq-b</td>" in page
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert "&lt;odd &amp; name&gt;" in page and "<odd & name>" not in page


@pytest.mark.parametrize(("suffix", "start"), [(".svg", "<svg"), (".html", "<!DOCTYPE html>"), (".HTM", "<!DOCTYPE")],
                         ids=["svg", "html", "htm-any-case"])
def test_chart_format_follows_the_file_suffix(suffix: str, start: str) -> None:
    """render_chart picks SVG or HTML from the output file's suffix."""
    assert chart.render_chart(_result(), suffix).startswith(start)


def test_other_chart_formats_are_refused() -> None:
    """A suffix other than .svg/.html is a ValueError naming the supported formats."""
    with pytest.raises(ValueError, match=r"use \.svg or \.html"):
        chart.render_chart(_result(), ".png")


def test_chart_is_deterministic_and_handles_an_idle_run() -> None:
    """Same result, same bytes; a run where nothing used quota says so."""
    assert chart.render_svg(_result()) == chart.render_svg(_result())
    assert "No ClusterQueue used any quota." in chart.render_svg(result(end=0.0))


def test_long_series_are_bounded_per_pixel_column_and_keep_their_peaks() -> None:
    """A series with far more steps than pixels keeps at most four points per column, including its peak."""
    points = (*((t * 0.01, (t * 7919) % 1000) for t in range(100_000)), (1000.0, 5000))
    drawn = chart.downsample(points, 0.0, 1000.0, 100)
    assert len(drawn) <= 4 * 101
    assert max(v for _, v in drawn) == 5000 and (0.0, 0) in drawn
    assert [t for t, _ in drawn] == sorted(t for t, _ in drawn)
    assert chart.downsample(points[:50], 0.0, 1000.0, 100) == list(points[:50])
