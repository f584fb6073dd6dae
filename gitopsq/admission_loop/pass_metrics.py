"""What the admission pass measures for Kueue's wait-time metrics (gitopsq/metrics.py), apart from its writes."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from gitopsq.admission.topology import Topology
from gitopsq.admission_loop.decisions import Decisions
from gitopsq.admission_loop.live_workload import ADMITTED, LiveWorkload
from gitopsq.admission_loop.ports import AdmissionMetrics
from gitopsq.admission_loop.workload_index import GroupKey
from gitopsq.admission_loop.workload_status import condition, parse_time


def queued_at(w: LiveWorkload) -> float:
    """When the Workload last joined its queue: its ``Requeued`` condition's transition, else its creation (Kueue's
    queued wait time counts from there)."""
    requeued = condition(w.raw, "Requeued")
    return parse_time(requeued.get("lastTransitionTime")) if requeued is not None else w.created


class ReadyWatch:
    """Kueue's ready wait times, observed once per admission whose ``PodsReady`` turned True while this loop ran
    (the condition is kept with waitForPodsReady on); transitions from before ``started`` are not counted."""

    def __init__(self, metrics: AdmissionMetrics, started: float) -> None:
        self.metrics, self.started = metrics, started
        self._seen: set[tuple[str, float]] = set()

    def observe(self, live: Mapping[str, LiveWorkload]) -> None:
        for key, w in live.items():
            ready = condition(w.raw, "PodsReady")
            if w.state != ADMITTED or ready is None or ready.get("status") != "True":
                continue
            at = parse_time(ready.get("lastTransitionTime"))
            # lastTransitionTime has whole seconds: a transition stamped S happened in [S, S + 1), so only one
            # stamped a full second before the start is certainly older than this loop
            if (key, at) in self._seen or at + 1 <= self.started:
                continue
            self._seen.add((key, at))
            admitted = condition(w.raw, "Admitted") or {}
            self.metrics.ready(w, max(0.0, at - queued_at(w)),
                               max(0.0, at - parse_time(admitted.get("lastTransitionTime"))))
        self._seen = {(k, t) for k, t in self._seen if k in live}


def pending_gauges(decisions: Decisions, live: Mapping[str, LiveWorkload], beyond: Mapping[GroupKey, int],
                   topology: Topology) -> tuple[list[tuple[str, str]], dict[str, int], dict[str, int]]:
    """Kueue's pending-workload gauges from one pass: (ClusterQueue, reason) of every waiting Workload, and how
    many are still in the admission queue per ClusterQueue and per ``namespace/LocalQueue``. The Workloads the
    index kept beyond the window (``beyond``: count per group, keyed namespace, queue, …) are counted as decide
    counts the ones it leaves out: active, under their ClusterQueue's head reason."""
    reasons = [(decisions.order[key].cluster_queue, p.reason) for key, p in decisions.pending.items()]
    reasons += [(decisions.order[key].cluster_queue, reason) for key, reason in decisions.behind.items()]
    active: dict[str, int] = {}
    lq_active: dict[str, int] = {}
    for key in decisions.active:
        cq, lq = decisions.order[key].cluster_queue, f"{live[key].namespace}/{live[key].queue}"
        active[cq] = active.get(cq, 0) + 1
        lq_active[lq] = lq_active.get(lq, 0) + 1
    for (namespace, queue, *_), n in beyond.items():
        local = topology.local_queues.get((namespace, queue))
        cq = local.cluster_queue if local is not None else ""
        reasons.extend(itertools.repeat((cq, decisions.head_reasons.get(cq, "Pending")), n))
        active[cq] = active.get(cq, 0) + n
        lq = f"{namespace}/{queue}"
        lq_active[lq] = lq_active.get(lq, 0) + n
    return reasons, active, lq_active
