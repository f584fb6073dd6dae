"""The /metrics endpoint: Prometheus's text format, with each series' label text built once, not per scrape.

prometheus_client's `generate_latest` validates, escapes, sorts and joins every sample's labels on every scrape.
With Kueue's per-queue histograms that is most of the work: a thousand ClusterQueues give about 80,000 sample
lines, 0.6 s of CPU per scrape (`benchmarks/kueue_side_by_side`: scraped once a second). The label text of a
series never changes, so `render` keeps it by the labels' values and formats only the numbers; its output is
`generate_latest`'s byte for byte (tests/test_exposition.py). `metrics_page` gives it gzip-compressed when the
scraper accepts that; gitopsq.metrics serves it.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Mapping
from typing import cast

from prometheus_client import CollectorRegistry
from prometheus_client.utils import floatToGoString

_number = cast(Callable[[float], str], floatToGoString)  # Go's float format, as the Go client writes values

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_OPENMETRICS_ONLY = ("_created", "_gsum", "_gcount")  # rendered as gauges after their family, as generate_latest
_TYPES = {"counter": "counter", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram",
          "unknown": "untyped"}
_MAX_KEPT = 1_000_000  # label texts kept; past it the memo starts again (a label churning without end)


class _LabelText:
    """``{a="1",b="2"}`` per label set, sorted by name and escaped as `generate_latest` does."""

    def __init__(self) -> None:
        self._kept: dict[tuple[tuple[str, str], ...], str] = {}

    def __call__(self, labels: Mapping[str, str]) -> str:
        if not labels:
            return ""
        key = tuple(labels.items())
        text = self._kept.get(key)
        if text is None:
            if len(self._kept) >= _MAX_KEPT:
                self._kept = {}
            text = label_text(labels)
            self._kept[key] = text
        return text


def label_text(labels: Mapping[str, str]) -> str:
    """``{a="1",b="2"}``: sorted by name and escaped as `generate_latest` does; empty without labels."""
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in sorted(labels.items())) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def render(registry: CollectorRegistry, labels: Callable[[Mapping[str, str]], str] | None = None) -> bytes:
    """The registry in the text format (0.0.4), as `prometheus_client.generate_latest` writes it. Metric and label
    names are taken as they are: every one gitopsq registers is a valid legacy name."""
    text = labels or _LabelText()
    out: list[str] = []
    append = out.append
    for metric in registry.collect():
        name, kind = metric.name, metric.type
        if kind == "counter":
            name += "_total"
        elif kind == "info":
            name += "_info"
        kind = _TYPES.get(kind, kind)
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
        kept = getattr(metric, "text", None)
        if kept is not None:  # a family that keeps its own lines (kept_series.py)
            append(kept())
            continue
        later: dict[str, list[str]] = {}
        for s in metric.samples:
            line = f"{s.name}{text(s.labels)} {_number(s.value)}"
            if s.timestamp is not None:
                line += f" {int(float(s.timestamp) * 1000):d}"
            suffix = s.name[len(metric.name):] if s.name.startswith(metric.name) else ""
            if suffix in _OPENMETRICS_ONLY:
                later.setdefault(suffix, []).append(line + "\n")
            else:
                append(line + "\n")
        for suffix, lines in later.items():
            append(f"# HELP {metric.name}{suffix} {doc}\n# TYPE {metric.name}{suffix} gauge\n")
            out.extend(lines)
    return "".join(out).encode()


def metrics_page(registry: CollectorRegistry) -> Callable[[str], tuple[bytes, bool]]:
    """The page for a scrape that accepts ``accept_encoding``: `render`'s text, gzip-compressed (fast level) when
    accepted; the bool says whether it is. Served by `gitopsq.metrics.serve`."""
    labels = _LabelText()  # one memo for the life of the endpoint

    def page(accept_encoding: str) -> tuple[bytes, bool]:
        body = render(registry, labels)
        if "gzip" in accept_encoding:
            return gzip.compress(body, compresslevel=1), True
        return body, False

    return page
