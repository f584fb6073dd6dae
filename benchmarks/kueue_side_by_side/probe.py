"""How fast this machine's CPU is right now, printed with every table so that runs on different days compare.

The same two cores have run the same code 2.5 to 4 times slower on one day than on another (session 12,
docs/benchmarks.md: `admission_bench` at 3,500–5,600 decisions per CPU-second against 14,000–15,000), which
moves every absolute figure of the side-by-side — the wall time against its floor most of all, since the runner's
creation ramp saturates the machine. The probe is a fixed piece of the controller's own kind of work (a
Workload's JSON decoded, walked and encoded again), timed in CPU seconds: the best of a few rounds, because
contention only ever slows a round down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

ROUND_TRIPS = 4_000  # one round: 0.12–0.2 s on session 12's slowed machine


def _workload(i: int) -> dict[str, object]:
    containers = [{"name": f"c{j}", "image": "registry.example/train:1",
                   "resources": {"requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}}} for j in range(3)]
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": f"job-{i}", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "resourceVersion": str(1000 + i), "uid": f"{i:032x}"},
            "spec": {"queueName": "lq", "priority": i % 7,
                     "podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": containers}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                       "message": "waiting for quota", "lastTransitionTime": "2026-11-27T00:00:00Z"}]}}


def round_trips(n: int = ROUND_TRIPS) -> int:
    """``n`` Workloads encoded, decoded and walked (their requests summed): the probe's unit of work."""
    total = 0
    for i in range(n):
        decoded = json.loads(json.dumps(_workload(i)))
        for pod_set in decoded["spec"]["podSets"]:
            for container in pod_set["template"]["spec"]["containers"]:
                total += len(container["resources"]["requests"]) * pod_set["count"]
    return total


def rate(work: Callable[[], object] = round_trips, units: int = ROUND_TRIPS, rounds: int = 3,
         cpu: Callable[[], float] = time.process_time) -> float:
    """Units of ``work`` per CPU-second: the fastest of ``rounds`` rounds (contention only slows a round)."""
    best = float("inf")
    for _ in range(rounds):
        started = cpu()
        work()
        best = min(best, cpu() - started)
    return units / best if best > 0 else float("inf")


def describe(before: float, after: float) -> str:
    """The probe's reading before the first run and after the last, for the table's header."""
    return (f"CPU probe (probe.py, Workload JSON round trips per CPU-second): {before:,.0f} before the runs, "
            f"{after:,.0f} after")
