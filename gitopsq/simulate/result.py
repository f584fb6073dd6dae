"""The result of one simulation, and its JSON form (shared/interfaces.md §4, a contract).

`Result` is what the text report and the chart read (gitopsq.simulate.text_report / chart):

- ``events``: every `Event` in order (time, workload, type, clusterQueue, flavors, reason, message);
- ``final``: per workload a `WorkloadFinal` (state Admitted | QuotaReserved | Pending | Finished, ClusterQueue,
  flavors, reason, message), per ClusterQueue a `QueueFinal` (usage by flavor and resource in milli-units,
  pending and admitted counts);
- ``waits``: per ClusterQueue, the wait of every quota reservation, in seconds, from when the workload was
  (re)queued — ``meanWaitSeconds`` is their mean, a report takes its p95 from here;
- ``utilisation``: per ClusterQueue, the time-average of usage over nominal quota, averaged over the
  flavor-resources that have a nominal quota, from time 0 to ``end`` (above 1.0 when borrowing);
- ``timeline``: ``(time, {clusterQueue: {(flavor, resource): milli}})`` at every instant where usage changed,
  for usage-over-time charts; ``end``: the time the run stopped (the horizon, or the last event);
- ``summary``: counts of Admitted, Preempted and Finished events.

`to_json` prints the contract's object, byte-for-byte deterministic (keys in a fixed order, times as floats,
quantities in Kubernetes' canonical form).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitopsq.admission import messages as msg
from gitopsq.admission.quota import FlavorResource
from gitopsq.admission.state import Event, Flavors


@dataclass(frozen=True, slots=True)
class WorkloadFinal:
    state: str
    cluster_queue: str = ""
    flavors: Flavors = ()
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class QueueFinal:
    usage: Mapping[FlavorResource, int]
    pending: int
    admitted: int


@dataclass(frozen=True, slots=True)
class Result:
    scenario: str
    events: tuple[Event, ...]
    workloads: Mapping[str, WorkloadFinal]
    queues: Mapping[str, QueueFinal]
    waits: Mapping[str, tuple[float, ...]]
    utilisation: Mapping[str, float]
    end: float
    timeline: tuple[tuple[float, Mapping[str, Mapping[FlavorResource, int]]], ...] = field(default=())

    def count(self, event_type: str) -> int:
        return sum(1 for e in self.events if e.type == event_type)

    def mean_wait(self, cq: str) -> float:
        waits = self.waits.get(cq, ())
        return sum(waits) / len(waits) if waits else 0.0


def _flavors(flavors: Flavors) -> dict[str, dict[str, str]]:
    return {ps: dict(per_res) for ps, per_res in flavors}


def _event(e: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"time": float(e.time), "workload": e.workload, "type": e.type}
    if e.cluster_queue:
        out["clusterQueue"] = e.cluster_queue
    if e.flavors:
        out["flavors"] = _flavors(e.flavors)
    if e.reason:
        out["reason"] = e.reason
    if e.message:
        out["message"] = e.message
    return out


def _workload(w: WorkloadFinal) -> dict[str, Any]:
    out: dict[str, Any] = {"state": w.state}
    if w.cluster_queue:
        out["clusterQueue"] = w.cluster_queue
    if w.flavors:
        out["flavors"] = _flavors(w.flavors)
    if w.reason:
        out["reason"] = w.reason
    if w.message:
        out["message"] = w.message
    return out


def usage_json(usage: Mapping[FlavorResource, int]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for (flavor, res), val in sorted(usage.items()):
        if val:
            out.setdefault(flavor, {})[res] = msg.amount(res, val)
    return out


def to_dict(result: Result) -> dict[str, Any]:
    return {
        "events": [_event(e) for e in result.events],
        "final": {
            "workloads": {k: _workload(result.workloads[k]) for k in sorted(result.workloads)},
            "clusterQueues": {n: {"usage": usage_json(q.usage), "pending": q.pending, "admitted": q.admitted}
                              for n, q in sorted(result.queues.items())},
        },
        "summary": {
            "admitted": result.count("Admitted"),
            "preempted": result.count("Preempted"),
            "finished": result.count("Finished"),
            "meanWaitSeconds": {n: round(result.mean_wait(n), 6) for n in sorted(result.queues)},
            "utilisation": {n: round(result.utilisation.get(n, 0.0), 6) for n in sorted(result.queues)},
        },
    }


def to_json(result: Result) -> str:
    """The contract's JSON object, one line per top-level key for readable diffs."""
    return json.dumps(to_dict(result), indent=None, separators=(", ", ": "), ensure_ascii=False)
