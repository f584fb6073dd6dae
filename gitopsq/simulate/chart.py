"""Usage over time per ClusterQueue, drawn as a self-contained SVG or HTML page (no scripts, no external assets).

One panel per (ClusterQueue, resource), in name order; in each panel one stepped line per flavor, in the
resource's own unit (printed the way Kubernetes prints quantities). When ``nominal`` quotas are given (see
`nominal_quotas`), each flavor's nominal quota is drawn as a dashed line of the same colour, so borrowing shows
as the line climbing over its dash. Pure and deterministic: the same result gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from gitopsq.admission.messages import amount
from gitopsq.api import model as m

if TYPE_CHECKING:
    from gitopsq.admission.quota import FlavorResource
    from gitopsq.simulate.result import Result

WIDTH = 860
PANEL_HEIGHT = 150
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 28, 26
# Colour-blind-safe palette (Okabe–Ito), one colour per flavor in order of first appearance in a panel.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_STYLE = ("font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:12px")

Nominal = Mapping[str, Mapping["FlavorResource", int]]


@dataclass(frozen=True, slots=True)
class Series:
    flavor: str
    points: tuple[tuple[float, int], ...]  # (time, milli-units), first point at the start of the run
    nominal: int | None


@dataclass(frozen=True, slots=True)
class Panel:
    cluster_queue: str
    resource: str
    series: tuple[Series, ...]


def nominal_quotas(objects: Iterable[object]) -> dict[str, dict[tuple[str, str], int]]:
    """Nominal quota of every ClusterQueue per (flavor, resource), in milli-units, from decoded objects."""
    out: dict[str, dict[tuple[str, str], int]] = {}
    for obj in objects:
        if isinstance(obj, m.ClusterQueue):
            out[obj.meta.name] = {(fq.name, rq.name): rq.nominal_quota.milli
                                  for rg in obj.resource_groups for fq in rg.flavors for rq in fq.resources}
    return out


def panels(result: Result, nominal: Nominal | None = None) -> tuple[Panel, ...]:
    """The panels to draw: every (ClusterQueue, resource) that had usage or a nominal quota."""
    start = result.timeline[0][0] if result.timeline else 0.0
    keys: set[tuple[str, str, str]] = set()
    for _, usage in result.timeline:
        keys.update((cq, flavor, res) for cq, per_fr in usage.items() for (flavor, res) in per_fr)
    for cq, per_fr in (nominal or {}).items():
        if cq in result.queues:
            keys.update((cq, flavor, res) for (flavor, res), val in per_fr.items() if val > 0)
    # One pass over the timeline; a key missing from a snapshot means zero usage.
    points: dict[tuple[str, str, str], list[tuple[float, int]]] = {k: [(start, 0)] for k in keys}
    by_queue: dict[str, list[tuple[tuple[str, str], list[tuple[float, int]]]]] = {}
    for (cq, flavor, res), series in points.items():
        by_queue.setdefault(cq, []).append(((flavor, res), series))
    empty: Mapping[FlavorResource, int] = {}
    for time, usage in result.timeline:
        for cq, entries in by_queue.items():
            per_fr = usage.get(cq, empty)
            for fr, series in entries:
                val = per_fr.get(fr, 0)
                if series[-1][1] == val:
                    continue
                if series[-1][0] == time:
                    series[-1] = (time, val)
                else:
                    series.append((time, val))
    out = []
    for cq, res in sorted({(cq, res) for cq, _, res in keys}):
        flavors = sorted(f for c, f, r in keys if c == cq and r == res)
        out.append(Panel(cq, res, tuple(
            Series(f, tuple(points[(cq, f, res)]), (nominal or {}).get(cq, {}).get((f, res))) for f in flavors)))
    return tuple(out)


def downsample(points: tuple[tuple[float, int], ...], start: float, end: float,
               columns: int) -> list[tuple[float, int]]:
    """At most four points per pixel column (first, highest, lowest, last), so peaks survive and size is bounded."""
    if len(points) <= 4 * columns:
        return list(points)
    span = max(end - start, 1e-9)
    out: list[tuple[float, int]] = []
    bucket: list[tuple[float, int]] = []
    current = None
    for point in points:
        column = int((point[0] - start) / span * columns)
        if column != current and bucket:
            out.extend(_summary(bucket))
            bucket = []
        current = column
        bucket.append(point)
    out.extend(_summary(bucket))
    return out


def _summary(bucket: list[tuple[float, int]]) -> list[tuple[float, int]]:
    first, last = bucket[0], bucket[-1]
    high = max(bucket, key=lambda p: p[1])
    low = min(bucket, key=lambda p: p[1])
    return sorted({first, high, low, last})


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _tick_label(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h".replace(".0h", "h")
    if seconds >= 60:
        return f"{seconds / 60:.1f}m".replace(".0m", "m")
    return f"{_num(seconds)}s"


def _panel_svg(panel: Panel, index: int, start: float, end: float) -> list[str]:
    top = index * PANEL_HEIGHT
    plot_w, plot_h = WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM
    peak = max([1, *(v for s in panel.series for _, v in s.points), *(s.nominal or 0 for s in panel.series)])
    span = max(end - start, 1e-9)

    def x(t: float) -> str:
        return _num(LEFT + (min(max(t, start), end) - start) / span * plot_w)

    def y(v: float) -> str:
        return _num(top + TOP + plot_h - v / peak * plot_h)

    title = f"{panel.cluster_queue} · {panel.resource}"
    out = [f'<g class="panel"><text x="{LEFT}" y="{top + 16}" font-weight="600">{escape(title)}</text>',
           f'<rect x="{LEFT}" y="{top + TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>',
           f'<text x="{LEFT - 6}" y="{y(peak)}" text-anchor="end" dominant-baseline="middle">'
           f"{escape(amount(panel.resource, peak))}</text>",
           f'<text x="{LEFT - 6}" y="{y(0)}" text-anchor="end" dominant-baseline="middle">0</text>']
    for frac in (0.0, 0.5, 1.0):
        t = start + frac * span
        out.append(f'<text x="{x(t)}" y="{top + PANEL_HEIGHT - 8}" text-anchor="middle" fill="#555">'
                   f"{escape(_tick_label(t))}</text>")
    for i, s in enumerate(panel.series):
        colour = PALETTE[i % len(PALETTE)]
        drawn = downsample(s.points, start, end, plot_w)
        path = [f"M{x(drawn[0][0])} {y(drawn[0][1])}"]
        for t, v in drawn[1:]:
            path.append(f"H{x(t)} V{y(v)}")
        path.append(f"H{x(end)}")
        out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if s.nominal:
            out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(s.nominal)}" y2="{y(s.nominal)}" '
                       f'stroke="{colour}" stroke-dasharray="5 4" stroke-width="1"/>')
        label = s.flavor + (f" (nominal {amount(panel.resource, s.nominal)})" if s.nominal else "")
        ly = top + TOP + 12 + i * 16
        out.append(f'<rect x="{LEFT + plot_w + 12}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{LEFT + plot_w + 27}" y="{ly + 1}">{escape(label)}</text>')
    out.append("</g>")
    return out


def render_svg(result: Result, nominal: Nominal | None = None) -> str:
    """The chart as a standalone SVG document."""
    drawn = panels(result, nominal)
    start = result.timeline[0][0] if result.timeline else 0.0
    end = max(result.end, start)
    height = max(1, len(drawn)) * PANEL_HEIGHT
    body: list[str] = []
    for i, panel in enumerate(drawn):
        body.extend(_panel_svg(panel, i, start, end))
    if not drawn:
        body.append(f'<text x="{LEFT}" y="{PANEL_HEIGHT // 2}">No ClusterQueue used any quota.</text>')
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" style="{_STYLE}" role="img">',
        f"<title>Usage over time per ClusterQueue: {escape(result.scenario)}</title>",
        *body, "</svg>"])


def render_html(result: Result, nominal: Nominal | None = None) -> str:
    """A standalone HTML page: the SVG chart and a per-ClusterQueue summary table."""
    rows = "\n".join(
        f"<tr><td>{escape(name)}</td><td>{result.queues[name].admitted}</td><td>{result.queues[name].pending}</td>"
        f"<td>{result.mean_wait(name):.1f}</td><td>{result.utilisation.get(name, 0.0):.0%}</td></tr>"
        for name in sorted(result.queues))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>gitopsq simulation: {escape(result.scenario)}</title>",
        f"<style>body{{{_STYLE};margin:24px;color:#222}}table{{border-collapse:collapse;margin-top:16px}}"
        "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}td:first-child,th:first-child"
        "{text-align:left}</style></head><body>",
        f"<h1>Simulation {escape(result.scenario)}</h1>",
        f"<p>Usage over time per ClusterQueue, until t={result.end:g}s. Dashed lines: nominal quota.</p>",
        render_svg(result, nominal),
        "<table><thead><tr><th>ClusterQueue</th><th>admitted (end)</th><th>pending (end)</th>"
        "<th>mean wait (s)</th><th>utilisation</th></tr></thead><tbody>",
        rows, "</tbody></table></body></html>"])


def render_chart(result: Result, suffix: str, nominal: Nominal | None = None) -> str:
    """The chart for a file ending in ``suffix`` (``.svg`` or ``.html``/``.htm``); ValueError otherwise."""
    kind = suffix.lower()
    if kind == ".svg":
        return render_svg(result, nominal)
    if kind in (".html", ".htm"):
        return render_html(result, nominal)
    raise ValueError(f"unsupported chart format {suffix!r}: use .svg or .html")
