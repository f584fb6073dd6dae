"""Usage over time per ClusterQueue, drawn as a self-contained SVG or HTML page (no scripts, no external assets).

One panel per (ClusterQueue, resource), in name order; in each panel one stepped line per flavor, in the
resource's own unit (printed the way Kubernetes prints quantities). When ``nominal`` quotas are given (see
`nominal_quotas`), each flavor's nominal quota is drawn as a dashed line of the same colour, so borrowing shows
as the line climbing over its dash. Pure and deterministic: the same result gives the same bytes.

The legend sits right of the plots. Its column is as wide as its longest label measured conservatively (every
character counted as wide as a wide glyph of a common sans-serif font), and a panel is as tall as its legend, so
the legend never runs past the picture's right edge or into the next panel whatever font the viewer has.
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

PLOT_WIDTH = 620
PANEL_HEIGHT = 150  # at least; taller when a panel's legend needs more rows
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 28, 26  # RIGHT: the legend column, at least
FONT_SIZE = 12
LEGEND_ROW = 16
LEGEND_TEXT_X = 27   # from the plot's right edge to the legend text (swatch at 12, 10 wide)
LEGEND_PAD = 12      # after the longest legend label
# Width of one character in ems, on the generous side: DejaVu Sans (what system-ui falls back to on many Linux
# systems) averages under 0.62 em for these; capitals and m/w reach 0.9-1.0 em.
_WIDE = set("MWmw@%")
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


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """A conservative (never too small) width of ``text`` in pixels at ``size``, for layout without a font."""
    return size * sum(1.0 if c in _WIDE or c.isupper() else 0.5 if c in " .,:;'|!il()[]" else 0.68 for c in text)


def _label(panel: Panel, series: Series) -> str:
    return series.flavor + (f" (nominal {amount(panel.resource, series.nominal)})" if series.nominal else "")


def legend_width(drawn: tuple[Panel, ...]) -> int:
    """Width of the legend column: the longest label's conservative width plus swatch and padding."""
    widest = max((text_width(_label(p, s)) for p in drawn for s in p.series), default=0.0)
    return max(RIGHT, int(LEGEND_TEXT_X + widest + LEGEND_PAD + 0.999))


def panel_height(panel: Panel) -> int:
    """A panel's height: the plot's, or more when its legend has more rows than the plot is tall."""
    return max(PANEL_HEIGHT, TOP + 12 + len(panel.series) * LEGEND_ROW + 4)


def _peak(panel: Panel) -> int:
    return max([1, *(v for s in panel.series for _, v in s.points), *(s.nominal or 0 for s in panel.series)])


def left_margin(drawn: tuple[Panel, ...]) -> int:
    """Room left of the plots for the widest y-axis label (the peak of a panel), at least LEFT."""
    widest = max((text_width(amount(p.resource, _peak(p))) for p in drawn), default=0.0)
    return max(LEFT, int(widest + 10.999))


def _panel_svg(panel: Panel, top: int, start: float, end: float, left: int = LEFT) -> list[str]:
    plot_w, plot_h = PLOT_WIDTH, panel_height(panel) - TOP - BOTTOM
    bottom = top + panel_height(panel)
    peak = _peak(panel)
    span = max(end - start, 1e-9)

    def x(t: float) -> str:
        return _num(left + (min(max(t, start), end) - start) / span * plot_w)

    def y(v: float) -> str:
        return _num(top + TOP + plot_h - v / peak * plot_h)

    title = f"{panel.cluster_queue} · {panel.resource}"
    out = [f'<g class="panel"><text x="{left}" y="{top + 16}" font-weight="600">{escape(title)}</text>',
           f'<rect x="{left}" y="{top + TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>',
           f'<text x="{left - 6}" y="{y(peak)}" text-anchor="end" dominant-baseline="middle">'
           f"{escape(amount(panel.resource, peak))}</text>",
           f'<text x="{left - 6}" y="{y(0)}" text-anchor="end" dominant-baseline="middle">0</text>']
    for frac in (0.0, 0.5, 1.0):
        t = start + frac * span
        out.append(f'<text x="{x(t)}" y="{bottom - 8}" text-anchor="middle" fill="#555">'
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
            out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(s.nominal)}" y2="{y(s.nominal)}" '
                       f'stroke="{colour}" stroke-dasharray="5 4" stroke-width="1"/>')
        ly = top + TOP + 12 + i * LEGEND_ROW
        out.append(f'<rect x="{left + plot_w + 12}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>'
                   f'<text class="legend" x="{left + plot_w + LEGEND_TEXT_X}" y="{ly + 1}">'
                   f"{escape(_label(panel, s))}</text>")
    out.append("</g>")
    return out


def render_svg(result: Result, nominal: Nominal | None = None) -> str:
    """The chart as a standalone SVG document."""
    drawn = panels(result, nominal)
    start = result.timeline[0][0] if result.timeline else 0.0
    end = max(result.end, start)
    left = left_margin(drawn)
    width = left + PLOT_WIDTH + legend_width(drawn)
    body: list[str] = []
    top = 0
    for panel in drawn:
        body.extend(_panel_svg(panel, top, start, end, left))
        top += panel_height(panel)
    height = max(top, PANEL_HEIGHT)
    if not drawn:
        body.append(f'<text x="{LEFT}" y="{PANEL_HEIGHT // 2}">No ClusterQueue used any quota.</text>')
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" style="{_STYLE}" role="img">',
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
