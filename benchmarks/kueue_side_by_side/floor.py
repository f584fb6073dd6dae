"""The write floor of a run: what no controller can beat when every admission costs one rate-limited write.

A controller admits a Workload by writing its status once; its client may send at most ``qps`` requests per second
after an initial ``burst``. So N admissions need at least about N ÷ qps seconds (the wall-time floor), and a
Workload cannot be admitted before it exists nor before a token is free. Spending the tokens in creation order
(earliest release first, which minimises the summed waits when every admission costs the same one token) gives
the earliest admission time of every Workload, hence a lower bound of the mean time to admission over all of
them. The bound ignores quota (a Workload that must wait for quota waits longer), so it is a floor, not a goal.
Pure functions of the run's own creation times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Floor:
    workloads: int
    wall_s: float  # N ÷ qps: the write floor of the wall time
    last_admission_s: float  # when the token schedule admits the last Workload (from the controller's start)
    mean_admission_s: float  # lower bound of the mean time to admission over all Workloads


def write_floor(created_s: Sequence[float], qps: float, burst: int) -> Floor:
    """The floor for Workloads created at ``created_s`` (seconds since the controller started, any order)."""
    if qps <= 0 or burst < 1:
        raise ValueError("qps must be positive and burst at least 1")
    times = sorted(max(0.0, t) for t in created_s)
    tokens, clock, waited, last = float(burst), 0.0, 0.0, 0.0
    for created in times:
        at = max(created, last)
        tokens = min(float(burst), tokens + (at - clock) * qps)
        clock = at
        if tokens < 1.0:  # wait for the next token
            clock += (1.0 - tokens) / qps
            tokens = 1.0
        tokens -= 1.0
        last = clock
        waited += clock - created
    n = len(times)
    return Floor(workloads=n, wall_s=n / qps, last_admission_s=last, mean_admission_s=waited / n if n else 0.0)
