"""A run's first minutes by the Workloads' own timestamps: how many were created, holding quota, finished, over time.

Kueue's runner creates every Workload of a config as fast as its client allows (large scale: 50,000 in about a
minute at 1,000 requests/s) while its controller, five reconcile workers, writes each admitted Workload's
``Finished`` once its runtime is over. While the creations saturate the API server those writes take as long as
any other request, so quota comes back slowly; once the highest-priority Workloads fill the quota, admissions wait
for those ``Finished`` writes, whatever the controller. The timeline shows when that happened in a run and how
much was admitted and finished by the end of the creations (`ramp`). Pure functions of the objects' own
timestamps (observe.Stamps: whole seconds; the watch itself can lag far behind on a saturated machine).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Protocol


class WatchedTimes(Protocol):
    """Seconds since the controller started, per Workload (observe.Stamps)."""

    created: dict[str, float]
    admitted: dict[str, float]
    finished: dict[str, float]


@dataclass(frozen=True, slots=True)
class Point:
    at_s: float
    created: int
    admitted: int  # holding quota (at least once) by ``at_s``
    finished: int


@dataclass(frozen=True, slots=True)
class Ramp:
    creations_end_s: float  # when the last Workload was created
    admitted: int  # by then
    finished: int  # by then
    quota_stall_s: float  # longest stretch before then with Workloads waiting and no new admission


def _count_by(ordered: list[float], at: float) -> int:
    return bisect_right(ordered, at)


def timeline(times: WatchedTimes, step: float, until: float) -> list[Point]:
    """Counts at every ``step`` seconds up to ``until`` (inclusive when it falls on a step)."""
    if step <= 0:
        raise ValueError("step must be positive")
    created, admitted, finished = (sorted(d.values()) for d in (times.created, times.admitted, times.finished))
    points, k = [], 1
    while k * step <= until + 1e-9:
        at = k * step
        points.append(Point(at, _count_by(created, at), _count_by(admitted, at), _count_by(finished, at)))
        k += 1
    return points


def ramp(times: WatchedTimes) -> Ramp | None:
    """The run's state when the creations ended, and its longest admission stall before then (a stall counts only
    while some created Workload was not yet admitted). None before any Workload was seen."""
    if not times.created:
        return None
    created = sorted(times.created.values())
    end = created[-1]
    admissions = sorted(t for t in times.admitted.values() if t <= end)
    longest, since = 0.0, created[0]
    for t in [*admissions, end]:
        if _count_by(created, since) > _count_by(admissions, since):  # something waited meanwhile
            longest = max(longest, t - since)
        since = t
    return Ramp(creations_end_s=end, admitted=len(admissions),
                finished=_count_by(sorted(times.finished.values()), end), quota_stall_s=longest)


def describe(times: WatchedTimes, after: float = 60.0, rows: int = 15) -> str:
    """The timeline from the start to ``after`` seconds past the end of the creations, in about ``rows`` steps of
    a multiple of 10 s, and the ramp's line."""
    r = ramp(times)
    if r is None:
        return "no Workload timestamps seen by the harness's watch"
    step = 10.0 * max(1, math.ceil((r.creations_end_s + after) / (10.0 * rows)))
    lines = ["s | created | admitted (ever) | finished", "---:|---:|---:|---:"]
    lines += [f"{p.at_s:.0f} | {p.created} | {p.admitted} | {p.finished}"
              for p in timeline(times, step, r.creations_end_s + after)]
    return "\n".join([*lines, f"creations ended at {r.creations_end_s:.0f} s: {r.admitted} admitted and {r.finished} "
                             f"finished by then; longest stretch without an admission while Workloads waited "
                             f"before then: {r.quota_stall_s:.1f} s"])
