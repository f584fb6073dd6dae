"""What one run measured: the runner's summary and CSVs, the controller's rusage, the API server's CPU."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kueue_side_by_side.floor import Floor
from kueue_side_by_side.observe import ScrapeFigures, WorkloadTimes

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass(slots=True)
class RunFigures:
    controller: str
    wall_s: float = 0.0  # controller start to its exit after SIGINT (what the runner reports as wallMs)
    runner_wall_s: float = 0.0  # controller start to the runner's summary
    user_s: float = 0.0
    sys_s: float = 0.0
    maxrss_mib: float = 0.0
    apiserver_cpu_s: float = 0.0
    usage_pct: float = 0.0
    admission_ms: dict[str, int] = field(default_factory=dict)
    evictions: int = 0
    workloads: int = 0
    admitted: int = 0
    finished: int = 0
    dropped_events: int = 0
    exit_code: int | None = None
    note: str = ""
    requests: str = ""  # gitopsq's request counts by verb and kind, from its log
    apiserver_requests: str = ""  # the API server's request counts (all clients) by verb and resource
    summary: bool = False  # the runner wrote its summary (else only the controller's and API server's figures)
    rate: int = 50  # the controller's client: requests/s (burst twice that)
    mean_admission_ms: float = 0.0  # the runner's time to admission, averaged over every Workload of the run
    floor: Floor | None = None
    times: WorkloadTimes | None = None  # the harness's own watch
    stopped_after_s: float | None = None  # ended early by --stop-after (no summary, not a failure)
    scrapes: ScrapeFigures | None = None
    by_reason: str = ""  # the controller's own eviction and preemption counters at the last scrape (`by_reason`)


def read_runner_output(out_dir: Path, figures: RunFigures) -> None:
    """Fill ``figures`` from the runner's summary.yaml (usage, class means, evictions) and wlStates.csv."""
    summary: dict[str, Any] = yaml.safe_load((out_dir / "summary.yaml").read_text()) or {}
    figures.summary = True
    used = nominal = span_ms = 0.0
    for group in (summary.get("clusterQueueClasses") or {}).values():
        used += group["cpuUsed"]
        nominal += group["nominalQuota"]
        first, last = _ms(group["firstEventTime"]), _ms(group["lastEventTime"])
        span_ms = max(span_ms, last - first)
    # The upstream checker's figure: ∫ flavorsUsage (mCPU·ms) × 100 / (Σ nominal mCPU × monitored ms).
    figures.usage_pct = used * 100 / (nominal * span_ms) if nominal and span_ms else 0.0
    for name, wc in (summary.get("workloadClasses") or {}).items():
        figures.admission_ms[name] = int(wc["averageTimeToAdmissionMs"])
        figures.evictions += int(wc.get("totalEvictions", 0))
    figures.dropped_events = int(summary.get("droppedWorkloadEvents", 0))
    total_ms = 0
    with (out_dir / "wlStates.csv").open() as f:
        for row in csv.DictReader(f):
            figures.workloads += 1
            total_ms += int(row["ms to admitted"])
            # admitted within the millisecond the runner saw it: 0 ms; a finished Workload was admitted
            figures.admitted += int(row["ms to admitted"]) > 0 or int(row["ms to finish"]) > 0
            figures.finished += int(row["ms to finish"]) > 0
    figures.mean_admission_ms = total_ms / figures.workloads if figures.workloads else 0.0


def _ms(stamp: Any) -> float:
    from datetime import datetime

    if isinstance(stamp, datetime):
        return stamp.timestamp() * 1000
    text = str(stamp).replace("Z", "+00:00")
    if "." in text:  # Go writes nanoseconds; Python parses at most microseconds
        head, tail = text.split(".", 1)
        digits = "".join(ch for ch in tail if ch.isdigit())
        text = f"{head}.{digits[:6]}{tail[len(digits):]}"
    return datetime.fromisoformat(text).timestamp() * 1000


def table(runs: list[RunFigures], classes: list[str]) -> str:
    """One Markdown table, a column per controller."""
    rows: list[tuple[str, list[str]]] = [
        ("wall time: start → runner's summary (s)",
         [f"{r.runner_wall_s:.0f}" if r.summary else f"none after {r.runner_wall_s:.0f}" for r in runs]),
        ("wall time: start → controller exit (s)", [f"{r.wall_s:.0f}" for r in runs]),
        ("controller CPU user / sys (s)", [f"{r.user_s:.0f} / {r.sys_s:.0f}" for r in runs]),
        ("controller peak memory (MiB)", [f"{r.maxrss_mib:.0f}" for r in runs]),
        ("ClusterQueue utilisation (%)", [f"{r.usage_pct:.1f}" if r.summary else "—" for r in runs]),
    ]
    for c in classes:
        rows.append((f"mean time to admission, {c} (s)",
                     [f"{r.admission_ms[c] / 1000:.1f}" if c in r.admission_ms else "—" for r in runs]))
    rows += [
        ("evictions", [str(r.evictions) if r.summary else "—" for r in runs]),
        ("the controller's evictions / preemptions by reason (last scrape)", [r.by_reason or "—" for r in runs]),
        ("workloads admitted / finished / created",
         [f"{r.admitted} / {r.finished} / {r.workloads}" if r.summary else "no summary" for r in runs]),
        ("Workload events the runner's recorder dropped (its means then miss them)",
         [str(r.dropped_events) if r.summary else "—" for r in runs]),
        ("API server CPU during the run (s)", [f"{r.apiserver_cpu_s:.0f}" for r in runs]),
        ("write floor of the wall time, N ÷ requests/s (s)",
         [f"{r.floor.wall_s:.0f}" if r.floor else "—" for r in runs]),
        ("wall time (summary) as a multiple of the floor",
         [f"{r.runner_wall_s / r.floor.wall_s:.2f}×" if r.floor and r.summary else "—" for r in runs]),
        ("mean time to admission, all workloads (s)",
         [f"{r.mean_admission_ms / 1000:.1f}" if r.summary else "—" for r in runs]),
        ("its lower bound from this run's creation times (s)",
         [f"{r.floor.mean_admission_s:.1f}" if r.floor else "—" for r in runs]),
        ("mean time to admission as a multiple of its bound",
         [f"{r.mean_admission_ms / 1000 / r.floor.mean_admission_s:.2f}×"
          if r.floor and r.summary and r.floor.mean_admission_s > 0 else "—" for r in runs]),
        ("harness watch: Workloads seen created / admitted (restarts)",
         [f"{len(r.times.created)} / {len(r.times.admitted)} ({r.times.watch_restarts})" if r.times else "—"
          for r in runs]),
        ("metrics scrapes (1/s): answered / failed, mean seconds",
         [f"{r.scrapes.scrapes} / {r.scrapes.failures}, "
          f"{r.scrapes.seconds / max(1, r.scrapes.scrapes + r.scrapes.failures):.3f}" if r.scrapes else "—"
          for r in runs]),
    ]
    head = "| figure | " + " | ".join(r.controller for r in runs) + " |"
    sep = "|---|" + "---:|" * len(runs)
    return "\n".join([head, sep] + [f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows])


def apiserver_requests(metrics: str, top: int = 12) -> str:
    """The API server's own count of requests during a run, by verb and resource (``apiserver_request_total``),
    and the watch events it sent, by kind (``apiserver_watch_events_total``): the busiest ``top`` of each."""
    import re

    line = re.compile(r'^(apiserver_request_total|apiserver_watch_events_total|apiserver_request_duration_seconds_sum)'
                      r'\{([^}]*)\} ([0-9.e+]+)$')
    label = re.compile(r'(\w+)="([^"]*)"')
    requests: dict[str, float] = {}
    seconds: dict[str, float] = {}  # summed latency: a proxy for where the API server's time goes
    watch: dict[str, float] = {}
    for row in metrics.splitlines():
        match = line.match(row)
        if match is None:
            continue
        labels = dict(label.findall(match.group(2)))
        value = float(match.group(3))
        if match.group(1) != "apiserver_watch_events_total":
            if labels.get("verb") == "WATCH":
                continue  # a watch is one long request; its cost shows in the events below
            sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
            key = f"{labels.get('verb')} {labels.get('resource')}{sub}"
            into = requests if match.group(1) == "apiserver_request_total" else seconds
            into[key] = into.get(key, 0) + value
        else:
            kind = labels.get("kind") or labels.get("resource") or "?"
            watch[kind] = watch.get(kind, 0) + value

    def busiest(counts: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:.0f}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:top])

    return (f"API server requests: {busiest(requests)}; summed latency (s): {busiest(seconds)}; "
            f"watch events sent: {busiest(watch)}")


def by_reason(metrics: str) -> str:
    """``kueue_evicted_workloads_total`` summed by ``reason`` and ``kueue_preempted_workloads_total`` by its
    ``reason`` (InClusterQueue, InCohortReclamation, ...), from one /metrics answer of either controller."""
    import re

    sums: dict[str, dict[str, float]] = {"kueue_evicted_workloads_total": {}, "kueue_preempted_workloads_total": {}}
    line = re.compile(r'^(kueue_evicted_workloads_total|kueue_preempted_workloads_total)\{([^}]*)\} (\S+)$')
    for row in metrics.splitlines():
        match = line.match(row)
        if match is None:
            continue
        reason = re.search(r'(?:^|,)reason="([^"]*)"', match[2])
        totals = sums[match[1]]
        key = reason[1] if reason else "?"
        totals[key] = totals.get(key, 0.0) + float(match[3])

    def joined(totals: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:.0f}" for k, v in sorted(totals.items()) if v) or "0"

    return (f"evicted: {joined(sums['kueue_evicted_workloads_total'])}; "
            f"preempted: {joined(sums['kueue_preempted_workloads_total'])}")
