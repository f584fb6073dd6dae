"""Prometheus metrics: Kueue's names and labels for what the admission loop implements, and gitopsq's own sync
metrics (docs/metrics.md). Each set lives in a `CollectorRegistry` passed in or created, so several loops in
one process (tests) do not collide; `serve` exposes one registry over HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Kueue's generateExponentialBuckets(14): 1, 2.5, 5, 10, ... seconds
BUCKETS = tuple(round(v, 3) for i in range(14) for v in ((1.0, 2.5, 5.0)[i % 3] * 10 ** (i // 3),))
_CQ_RES = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]


class KueueMetrics:
    """The ``kueue_*`` series the admission loop maintains."""

    def __init__(self, registry: CollectorRegistry | None = None, *, replica_role: str = "standalone") -> None:
        self.registry = registry or CollectorRegistry()
        self.role = replica_role
        r = self.registry

        def counter(name: str, doc: str, labels: list[str]) -> Counter:
            return Counter(name, doc, [*labels, "replica_role"], registry=r)

        def gauge(name: str, doc: str, labels: list[str]) -> Gauge:
            return Gauge(name, doc, [*labels, "replica_role"], registry=r)

        def histogram(name: str, doc: str, labels: list[str]) -> Histogram:
            return Histogram(name, doc, [*labels, "replica_role"], buckets=BUCKETS, registry=r)

        pc = ["cluster_queue", "priority_class"]
        self.attempts = counter("kueue_admission_attempts_total", "Admission attempts by result", ["result"])
        self.attempt_seconds = Histogram("kueue_admission_attempt_duration_seconds", "Duration of an admission pass",
                                         ["result", "replica_role"], registry=r,
                                         buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10))
        self.quota_reserved = counter("kueue_quota_reserved_workloads_total", "Workloads that reserved quota", pc)
        self.admitted_total = counter("kueue_admitted_workloads_total", "Workloads admitted", pc)
        self.finished_total = counter("kueue_finished_workloads_total", "Workloads finished", pc)
        self.evicted_total = counter("kueue_evicted_workloads_total", "Workloads evicted",
                                     ["cluster_queue", "reason", "underlying_cause", "priority_class"])
        self.preempted_total = counter("kueue_preempted_workloads_total", "Workloads preempted",
                                       ["preempting_cluster_queue", "reason"])
        self.reserved_wait = histogram("kueue_quota_reserved_wait_time_seconds", "Creation to quota reservation", pc)
        self.admission_wait = histogram("kueue_admission_wait_time_seconds", "Creation to admission", pc)
        self.pending = gauge("kueue_pending_workloads", "Pending workloads", ["cluster_queue", "status"])
        self.finished = _FinishedGauge(self.registry, self.role)
        self.reserving = gauge("kueue_reserving_active_workloads", "Workloads holding quota", ["cluster_queue"])
        self.admitted_active = gauge("kueue_admitted_active_workloads", "Admitted, unfinished workloads",
                                     ["cluster_queue"])
        self.cq_status = gauge("kueue_cluster_queue_status", "ClusterQueue status (1 = current)",
                               ["cluster_queue", "status"])
        self.unadmitted = gauge("kueue_unadmitted_workloads", "Pending workloads by reason",
                                ["cluster_queue", "reason", "underlying_cause"])
        self.cq_info = gauge("kueue_cluster_queue_info", "ClusterQueue placement in the cohort tree",
                             ["cluster_queue", "parent_cohort", "root_cohort"])
        self.reservation = Gauge("kueue_cluster_queue_resource_reservation", "Reserved quota", _CQ_RES, registry=r)
        self.usage = Gauge("kueue_cluster_queue_resource_usage", "Quota used by admitted workloads", _CQ_RES,
                           registry=r)
        self.nominal = Gauge("kueue_cluster_queue_nominal_quota", "Nominal quota", _CQ_RES, registry=r)
        self.borrowing = Gauge("kueue_cluster_queue_borrowing_limit", "Borrowing limit", _CQ_RES, registry=r)
        self.lending = Gauge("kueue_cluster_queue_lending_limit", "Lending limit", _CQ_RES, registry=r)
        lq = ["name", "namespace"]
        self.lq_pending = gauge("kueue_local_queue_pending_workloads", "Pending workloads", [*lq, "status"])
        self.lq_reserving = gauge("kueue_local_queue_reserving_active_workloads", "Workloads holding quota", lq)
        self.lq_admitted = gauge("kueue_local_queue_admitted_active_workloads", "Admitted workloads", lq)
        self.lq_admitted_total = counter("kueue_local_queue_admitted_workloads_total", "Workloads admitted", lq)
        self.build = Gauge("kueue_build_info", "Build information", ["git_version", "replica_role"], registry=r)
        self.integrations = Gauge("gitopsq_integration_active", "1: an enabled integration's kind is served and "
                                  "watched; 0: skipped, its CRD not installed", ["framework"], registry=r)
        from gitopsq import __version__

        self.build.labels(__version__, self.role).set(1)

    def set_role(self, role: str) -> None:
        """``replica_role`` from now on (``leader`` / ``follower``). The state gauges are dropped: a follower runs
        no admission pass, so it must not keep serving the last state it saw as leader; a leader's next pass
        writes them again."""
        from gitopsq import __version__

        if role == self.role:
            return
        self.build.remove(__version__, self.role)
        self.role = self.finished.role = role
        self.build.labels(__version__, role).set(1)
        for g in self._state_gauges():
            g.clear()
        self.finished.values = {}

    def _state_gauges(self) -> tuple[Gauge, ...]:
        return (self.pending, self.reserving, self.admitted_active, self.cq_status, self.unadmitted, self.cq_info,
                self.reservation, self.usage, self.nominal, self.borrowing, self.lending, self.lq_pending,
                self.lq_reserving, self.lq_admitted)

    def integration_active(self, framework: str, active: bool) -> None:
        self.integrations.labels(framework).set(1 if active else 0)

    # --- events of one pass -------------------------------------------------------------------------------------

    def attempt(self, admitted: int, inadmissible: int, seconds: float) -> None:
        if admitted:
            self.attempts.labels("success", self.role).inc(admitted)
        if inadmissible:
            self.attempts.labels("inadmissible", self.role).inc(inadmissible)
        self.attempt_seconds.labels("success" if admitted else "inadmissible", self.role).observe(seconds)

    def admitted(self, w: Any, cq: str, waited: float, *, checks: bool, reserved: bool = True) -> None:
        """A reservation was written (``reserved``) and, unless admission checks remain, an admission."""
        pc = w.priority_class or ""
        if reserved:
            self.quota_reserved.labels(cq, pc, self.role).inc()
            self.reserved_wait.labels(cq, pc, self.role).observe(waited)
        if not checks:
            self.admitted_total.labels(cq, pc, self.role).inc()
            self.admission_wait.labels(cq, pc, self.role).observe(waited)
            self.lq_admitted_total.labels(w.queue, w.namespace, self.role).inc()

    def evicted(self, w: Any, kind: str, reason: str, message: str) -> None:
        cq = w.cluster_queue or ""
        if kind == "Preempted":
            self.evicted_total.labels(cq, "Preempted", reason, w.priority_class or "", self.role).inc()
            found = re.search(r"preemptor path: \S*/([^/;\s]+);", message)
            self.preempted_total.labels(found.group(1) if found else "", reason, self.role).inc()
        else:
            self.evicted_total.labels(cq, reason, "", w.priority_class or "", self.role).inc()

    def workload_finished(self, w: Any) -> None:
        self.finished_total.labels(w.cluster_queue or "", w.priority_class or "", self.role).inc()

    # --- state after a pass -------------------------------------------------------------------------------------

    def observe_queues(self, topology: Any, cq_tally: Mapping[str, Any], lq_tally: Mapping[str, Any],
                       reasons: Iterable[tuple[str, str]], finished: Mapping[str, int]) -> None:
        """Gauges from the tallies queue_status.py computed; ``reasons`` = (cluster queue, pending reason)."""
        for g in self._state_gauges():
            g.clear()
        self.finished.values = dict(finished)
        role = self.role
        for name, spec in topology.queues.items():
            t = cq_tally[name]
            self.pending.labels(name, "inadmissible", role).set(t.pending)
            self.pending.labels(name, "active", role).set(0)
            self.reserving.labels(name, role).set(t.reserving)
            self.admitted_active.labels(name, role).set(t.admitted)
            for status in ("pending", "active", "terminating"):
                self.cq_status.labels(name, status, role).set(int(status == ("active" if spec.active else "pending")))
            cohort = spec.cohort or ""
            root = cohort
            while root and topology.cohort_parents.get(root):
                root = topology.cohort_parents[root] or root
            self.cq_info.labels(name, cohort, root, role).set(1)
            for (flavor, res), lim in spec.limits.items():
                labels = (cohort, name, flavor, res, role)
                unit = 1000.0
                self.nominal.labels(*labels).set(lim.nominal / unit)
                if lim.borrowing is not None:
                    self.borrowing.labels(*labels).set(lim.borrowing / unit)
                if lim.lending is not None:
                    self.lending.labels(*labels).set(lim.lending / unit)
                self.reservation.labels(*labels).set(t.reserved.get((flavor, res), 0) / unit)
                self.usage.labels(*labels).set(t.used.get((flavor, res), 0) / unit)
        counts: dict[tuple[str, str], int] = {}
        for cq, reason in reasons:
            counts[(cq, reason)] = counts.get((cq, reason), 0) + 1
        for (cq, reason), n in counts.items():
            self.unadmitted.labels(cq, reason, "", role).set(n)
        for key, t in lq_tally.items():
            ns, _, name = key.partition("/")
            self.lq_pending.labels(name, ns, "inadmissible", role).set(t.pending)
            self.lq_reserving.labels(name, ns, role).set(t.reserving)
            self.lq_admitted.labels(name, ns, role).set(t.admitted)


class _FinishedGauge:
    """``kueue_finished_workloads{cluster_queue}``: a gauge sharing its name with the counter
    ``kueue_finished_workloads_total``, which prometheus_client's own Gauge refuses; served by a collector
    without ``describe`` so the registry does not check the name."""

    def __init__(self, registry: CollectorRegistry, role: str) -> None:
        self.values: dict[str, int] = {}
        self.role = role
        registry.register(self)

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily("kueue_finished_workloads", "Finished workloads still present",
                                   labels=["cluster_queue", "replica_role"])
        for cq, n in sorted(self.values.items()):
            family.add_metric([cq, self.role], n)
        yield family


class SyncMetrics:
    """gitopsq's own series: sync passes by outcome, last success, applied revision, drift corrections; and the
    audit trail's backlog and pushes (`observe_audit`, sampled from `AuditTrail.status()`)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, source: str = "") -> None:
        self.registry = r = registry or CollectorRegistry()
        self.source = source  # the GitSource (namespace/name) the revision label belongs to
        self.syncs = Counter("gitopsq_sync_total", "Sync passes by outcome", ["outcome"], registry=r)
        self.last = Gauge("gitopsq_sync_last_success_timestamp_seconds", "Wall time of the last good pass", registry=r)
        self.applied = Counter("gitopsq_sync_applied_objects_total", "Objects applied by syncs", registry=r)
        self.drift = Counter("gitopsq_sync_drift_corrections_total", "Objects whose drift a sync corrected, by kind",
                             ["kind"], registry=r)
        self.revision = Gauge("gitopsq_sync_applied_revision_info", "1 for the revision applied last, per source",
                              ["source", "revision"], registry=r)
        self.audit_pending = Gauge("gitopsq_audit_pending_records", "Audit records accepted but not yet pushed",
                                   registry=r)
        self.audit_last_push = Gauge("gitopsq_audit_last_push_timestamp_seconds",
                                     "Wall time of the last successful audit push", registry=r)
        self.audit_failures = Counter("gitopsq_audit_push_failures_total", "Failed audit commit or push rounds",
                                      registry=r)
        self._audit_seen: tuple[int, str | None] | None = None  # (pushed seq, last error) at the previous sample

    def observe(self, result: Any) -> None:
        outcome = result if isinstance(result, str) else getattr(result, "outcome", "failed")
        self.syncs.labels(outcome).inc()
        if outcome in ("applied", "unchanged"):
            self.last.set_to_current_time()
            revision = getattr(result, "revision", None)
            if revision:
                self.revision.clear()
                self.revision.labels(self.source, revision).set(1)
        execution = getattr(result, "execution", None)
        applied = getattr(execution, "applied", ())
        if applied:
            self.applied.inc(len(applied))
        drifted = set(getattr(getattr(result, "plan", None), "drifted", ())) & set(applied)
        for key in drifted:
            self.drift.labels(key.kind).inc()

    def observe_audit(self, status: Any, now: float) -> None:
        """One sample of the trail's status (gitopsq.audit.sink.TrailStatus): backlog, pushes, failures."""
        self.audit_pending.set(max(0, status.durable - status.pushed) + max(0, status.submitted - status.durable))
        previous = self._audit_seen
        if previous is None or status.pushed > previous[0]:  # the first sample is the baseline lag counts from
            self.audit_last_push.set(now)
        if status.last_error and (previous is None or previous[1] != status.last_error):
            self.audit_failures.inc()
        self._audit_seen = (status.pushed, status.last_error)


def serve(address: str, registry: CollectorRegistry) -> Any:
    """Serve ``registry`` on ``host:port`` (``:8080`` = all interfaces); returns the server (``.server_port``)."""
    host, _, port = address.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "0.0.0.0", registry=registry)
    return server
