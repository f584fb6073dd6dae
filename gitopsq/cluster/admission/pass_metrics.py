"""What the admission pass measures for Kueue's wait-time metrics (gitopsq/metrics.py), apart from its writes."""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.cluster.admission.live_workload import ADMITTED, LiveWorkload
from gitopsq.cluster.admission.ports import AdmissionMetrics
from gitopsq.cluster.admission.workload_status import condition, parse_time


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
            if (key, at) in self._seen or at < self.started:
                continue
            self._seen.add((key, at))
            admitted = condition(w.raw, "Admitted") or {}
            self.metrics.ready(w, max(0.0, at - queued_at(w)),
                               max(0.0, at - parse_time(admitted.get("lastTransitionTime"))))
        self._seen = {(k, t) for k, t in self._seen if k in live}
