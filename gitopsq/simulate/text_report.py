"""The text report of a simulation: a timeline, a per-ClusterQueue table, and why the rest still waits.

`render_text(result)` is pure and deterministic: the same `Result` gives the same text, byte for byte. Layout:

1. a headline (scenario, simulated span, admitted / preempted / finished counts);
2. the timeline, one line per event in order (time, workload, event, ClusterQueue, flavors, reason); a
   ``QuotaReserved`` immediately followed by the same workload's ``Admitted`` at the same instant (no admission
   checks) is shown as one ``Admitted`` line, and ``max_events`` keeps the first N lines of long runs;
3. per ClusterQueue: admissions and preemptions during the run, pending at the end, mean and p95 wait from
   (re)queueing to quota reservation, and utilisation (time-averaged usage over nominal quota);
4. the workloads still pending at the end, with Kueue's reason and message.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gitopsq.admission.state import Event, Flavors
    from gitopsq.simulate.result import Result

_TIMELINE_HEADER = ("TIME", "WORKLOAD", "EVENT", "CLUSTERQUEUE", "FLAVORS", "REASON")
_QUEUE_HEADER = ("CLUSTERQUEUE", "ADMITTED", "PREEMPTED", "PENDING", "MEAN WAIT", "P95 WAIT", "UTILISATION")


def format_time(seconds: float) -> str:
    """A point on the simulated clock as ``H:MM:SS`` (``.mmm`` when not a whole second; ``-`` before zero)."""
    sign = "-" if seconds < 0 else ""
    millis = round(abs(seconds) * 1000)
    whole, frac = divmod(millis, 1000)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours}:{minutes:02d}:{secs:02d}"
    return f"{text}.{frac:03d}" if frac else text


def format_duration(seconds: float) -> str:
    """A wait: ``12.5s`` under a minute, ``3m 20s`` under an hour, ``2h 05m`` beyond."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values): the smallest value with ``fraction`` of values at or below."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _flavor_names(flavors: Flavors) -> str:
    return ",".join(sorted({flavor for _, per_resource in flavors for flavor in per_resource.values()}))


def _merged(events: Iterable[Event]) -> list[Event]:
    """Drop a QuotaReserved that its own Admitted follows at once: without admission checks they are one step."""
    items = list(events)
    out = []
    for i, e in enumerate(items):
        nxt = items[i + 1] if i + 1 < len(items) else None
        if (e.type == "QuotaReserved" and nxt is not None and nxt.type == "Admitted"
                and nxt.workload == e.workload and nxt.time == e.time):
            continue
        out.append(e)
    return out


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _timeline(result: Result, max_events: int | None) -> list[str]:
    events = _merged(result.events)
    if not events:
        return ["Timeline: nothing happened (no admission, preemption or completion)."]
    shown = events if max_events is None else events[:max_events]
    rows = [(format_time(e.time), e.workload, e.type, e.cluster_queue or "-", _flavor_names(e.flavors) or "-",
             e.reason if e.reason and e.reason != e.type else "-") for e in shown]
    lines = ["Timeline:", *_table(_TIMELINE_HEADER, rows)]
    if len(shown) < len(events):
        lines.append(f"  … {len(events) - len(shown)} more events")
    return lines


def _queues(result: Result) -> list[str]:
    names = sorted(result.queues)
    if not names:
        return []
    admitted = dict.fromkeys(names, 0)
    preempted = dict.fromkeys(names, 0)
    for e in result.events:
        if e.cluster_queue in admitted:
            if e.type == "Admitted":
                admitted[e.cluster_queue] += 1
            elif e.type == "Preempted":
                preempted[e.cluster_queue] += 1
    rows = []
    for name in names:
        waits = result.waits.get(name, ())
        rows.append((name, str(admitted[name]), str(preempted[name]), str(result.queues[name].pending),
                     format_duration(result.mean_wait(name)), format_duration(percentile(waits, 0.95)),
                     f"{result.utilisation.get(name, 0.0):.0%}"))
    return ["ClusterQueues:", *_table(_QUEUE_HEADER, rows)]


def _pending(result: Result) -> list[str]:
    waiting = [(key, w) for key, w in sorted(result.workloads.items()) if w.state == "Pending"]
    if not waiting:
        return []
    lines = [f"Still pending ({len(waiting)}):"]
    for key, w in waiting:
        where = f" in {w.cluster_queue}" if w.cluster_queue else ""
        lines.append(f"  {key}{where}: {w.reason or 'Pending'}" + (f": {w.message}" if w.message else ""))
    return lines


def render_text(result: Result, *, max_events: int | None = None) -> str:
    """The whole report as text (no trailing newline: the caller prints it)."""
    admitted, preempted, finished = (result.count(t) for t in ("Admitted", "Preempted", "Finished"))
    headline = (f"Simulation {result.scenario}: simulated until {format_time(result.end)}; {admitted} admitted, "
                f"{preempted} preempted, {finished} finished")
    sections = [[headline], _timeline(result, max_events), _queues(result), _pending(result)]
    return "\n\n".join("\n".join(s) for s in sections if s)
