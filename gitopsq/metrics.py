"""Prometheus metrics: Kueue's names and labels for what the admission loop implements, and gitopsq's own sync
metrics (docs/metrics.md). Each set lives in a `CollectorRegistry` passed in or created, so several loops in
one process (tests) do not collide; `serve` exposes one registry over HTTP.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from gitopsq import __version__, exposition
from gitopsq.kept_series import KeptCounter, KeptHistogram
from gitopsq.queue_metrics import FamilyName, KeptRows, QueueState, Rows, Snapshot
from gitopsq.serving import HttpServer, Reply, Request, Route, ServerLimits


def exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets(count)``: 1, then 2.5 doubling (2.5, 5, 10, 20, ... seconds)."""
    return (1.0, *(2.5 * 2 ** i for i in range(count - 1)))


BUCKETS = exponential_buckets(14)  # Kueue's wait-time histograms
BUCKETS_16 = exponential_buckets(16)  # kueue_admission_wait_time_seconds


class KueueMetrics:
    """The ``kueue_*`` series the admission loop maintains."""

    def __init__(self, registry: CollectorRegistry | None = None, *, replica_role: str = "standalone") -> None:
        self.registry = registry or CollectorRegistry()
        self.role = replica_role
        r = self.registry

        def counter(name: str, doc: str, labels: list[str]) -> KeptCounter:
            return KeptCounter(name, doc, [*labels, "replica_role"], registry=r)

        def gauge(name: str, doc: str, labels: list[str]) -> Gauge:
            return Gauge(name, doc, [*labels, "replica_role"], registry=r)

        def histogram(name: str, doc: str, labels: list[str], buckets: tuple[float, ...] = BUCKETS) -> KeptHistogram:
            return KeptHistogram(name, doc, [*labels, "replica_role"], buckets=buckets, registry=r)

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
        self.evicted_once = counter("kueue_evicted_workloads_once_total", "Unique workload evictions",
                                    ["cluster_queue", "reason", "underlying_cause", "priority_class"])
        self._evicted_seen: set[tuple[str, str, str]] = set()  # (workload uid, reason, cause) counted once
        self.preempted_total = counter("kueue_preempted_workloads_total", "Workloads preempted",
                                       ["preempting_cluster_queue", "reason"])
        self.reserved_wait = histogram("kueue_quota_reserved_wait_time_seconds", "Creation to quota reservation", pc)
        self.admission_wait = histogram("kueue_admission_wait_time_seconds", "Created or requeued until admission",
                                        pc, BUCKETS_16)
        self.checks_wait = histogram("kueue_admission_checks_wait_time_seconds",
                                     "Quota reservation until admission", pc)
        self.ready_wait = histogram("kueue_ready_wait_time_seconds", "Created or requeued until ready", pc)
        self.admitted_ready_wait = histogram("kueue_admitted_until_ready_wait_time_seconds",
                                             "Admitted until ready", pc)
        self.finished = _FinishedGauge(self.registry, self.role)
        self.queue_state = QueueState(r, self.role)  # the per-queue state series, rendered when scraped
        lq = ["name", "namespace"]
        self.lq_admitted_total = counter("kueue_local_queue_admitted_workloads_total", "Workloads admitted", lq)
        lqpc = [*lq, "priority_class"]
        self.lq_reserved_total = counter("kueue_local_queue_quota_reserved_workloads_total",
                                         "Workloads that reserved quota", lqpc)
        self.lq_finished_total = counter("kueue_local_queue_finished_workloads_total", "Workloads finished", lq)
        self.lq_evicted_total = counter("kueue_local_queue_evicted_workloads_total", "Workloads evicted",
                                        [*lq, "reason", "underlying_cause", "priority_class"])
        self.lq_reserved_wait = histogram("kueue_local_queue_quota_reserved_wait_time_seconds",
                                          "Created or requeued until quota reservation", lqpc)
        self.lq_admission_wait = histogram("kueue_local_queue_admission_wait_time_seconds",
                                           "Created or requeued until admission", lqpc)
        self.lq_checks_wait = histogram("kueue_local_queue_admission_checks_wait_time_seconds",
                                        "Quota reservation until admission", lqpc)
        self.lq_ready_wait = histogram("kueue_local_queue_ready_wait_time_seconds", "Created or requeued until ready",
                                       lqpc)
        self.lq_admitted_ready_wait = histogram("kueue_local_queue_admitted_until_ready_wait_time_seconds",
                                                "Admitted until ready", lqpc)
        self.lq_finished = _FinishedGauge(r, self.role, "kueue_local_queue_finished_workloads", ("name", "namespace"))
        # Aliases under the names the AKS walkthrough's PromQL uses (not Kueue's; docs/metrics.md, "Aliases")
        self.alias_admitted = KeptCounter("kueue_workload_admitted", "Alias: workloads admitted (kueue_admitted_"
                                          "workloads_total summed over priority classes)", ["clusterqueue"], registry=r)
        self.build = Gauge("kueue_build_info", "Build information", ["git_version", "replica_role"], registry=r)
        self.integrations = Gauge("gitopsq_integration_active", "1: an enabled integration's kind is served and "
                                  "watched; 0: skipped, its CRD not installed", ["framework"], registry=r)
        self.build.labels(__version__, self.role).set(1)

    def set_role(self, role: str) -> None:
        """``replica_role`` from now on (``leader`` / ``follower``). The state gauges are dropped: a follower runs
        no admission pass, so it must not keep serving the last state it saw as leader; a leader's next pass
        writes them again."""
        if role == self.role:
            return
        self.build.remove(__version__, self.role)
        self.role = self.finished.role = self.lq_finished.role = role
        self.build.labels(__version__, role).set(1)
        self.queue_state.role = role
        self.queue_state.clear()
        self.finished.values = {}
        self.lq_finished.values = {}

    def integration_active(self, framework: str, active: bool) -> None:
        self.integrations.labels(framework).set(1 if active else 0)

    # --- events of one pass -------------------------------------------------------------------------------------

    def attempt(self, admitted: int, inadmissible: int, seconds: float) -> None:
        if admitted:
            self.attempts.labels("success", self.role).inc(admitted)
        if inadmissible:
            self.attempts.labels("inadmissible", self.role).inc(inadmissible)
        self.attempt_seconds.labels("success" if admitted else "inadmissible", self.role).observe(seconds)

    def admitted(self, w: Any, cq: str, waited: float, *, checks: bool, reserved: bool = True,
                 checks_waited: float | None = None) -> None:
        """A reservation was written (``reserved``) and, unless admission checks remain, an admission. ``waited``
        counts from the Workload's creation or last requeue (Kueue's queued wait time); ``checks_waited``, from
        its quota reservation, when admission checks were waited for."""
        pc, lq = w.priority_class or "", (w.queue, w.namespace)
        if reserved:
            self.quota_reserved.labels(cq, pc, self.role).inc()
            self.reserved_wait.labels(cq, pc, self.role).observe(waited)
            self.lq_reserved_total.labels(*lq, pc, self.role).inc()
            self.lq_reserved_wait.labels(*lq, pc, self.role).observe(waited)
        if not checks:
            self.admitted_total.labels(cq, pc, self.role).inc()
            self.alias_admitted.labels(cq).inc()
            self.admission_wait.labels(cq, pc, self.role).observe(waited)
            self.lq_admitted_total.labels(*lq, self.role).inc()
            self.lq_admission_wait.labels(*lq, pc, self.role).observe(waited)
            if checks_waited is not None:
                self.checks_wait.labels(cq, pc, self.role).observe(checks_waited)
                self.lq_checks_wait.labels(*lq, pc, self.role).observe(checks_waited)

    def ready(self, w: Any, queued_waited: float, admitted_waited: float) -> None:
        """An admitted Workload's pods all became ready (its ``PodsReady`` condition turned True)."""
        cq, pc, lq = w.cluster_queue or "", w.priority_class or "", (w.queue, w.namespace)
        self.ready_wait.labels(cq, pc, self.role).observe(queued_waited)
        self.admitted_ready_wait.labels(cq, pc, self.role).observe(admitted_waited)
        self.lq_ready_wait.labels(*lq, pc, self.role).observe(queued_waited)
        self.lq_admitted_ready_wait.labels(*lq, pc, self.role).observe(admitted_waited)

    def evicted(self, w: Any, kind: str, reason: str, message: str) -> None:
        cq, pc = w.cluster_queue or "", w.priority_class or ""
        if kind == "Preempted":
            label, cause = "Preempted", reason
            found = re.search(r"preemptor path: \S*/([^/;\s]+);", message)
            self.preempted_total.labels(found.group(1) if found else "", reason, self.role).inc()
        elif reason.startswith("DeactivatedDueTo"):  # Kueue labels the cause apart: Deactivated / AdmissionCheck
            label, cause = "Deactivated", reason.removeprefix("DeactivatedDueTo")
        else:
            label, cause = reason, ""
        self.evicted_total.labels(cq, label, cause, pc, self.role).inc()
        self.lq_evicted_total.labels(w.queue, w.namespace, label, cause, pc, self.role).inc()
        once = (str(getattr(w, "uid", "") or w.key), label, cause)
        if once not in self._evicted_seen:  # the first eviction of this workload for this reason
            self._evicted_seen.add(once)
            self.evicted_once.labels(cq, label, cause, pc, self.role).inc()

    def workload_finished(self, w: Any) -> None:
        self.finished_total.labels(w.cluster_queue or "", w.priority_class or "", self.role).inc()
        self.lq_finished_total.labels(w.queue, w.namespace, self.role).inc()
        self._evicted_seen = {k for k in self._evicted_seen if k[0] != str(getattr(w, "uid", "") or w.key)}

    # --- state after a pass -------------------------------------------------------------------------------------

    def observe_queues(self, topology: Any, cq_tally: Mapping[str, Any], lq_tally: Mapping[str, Any],
                       reasons: Iterable[tuple[str, str]], finished: Mapping[str, int], *,
                       active: Mapping[str, int] | None = None, lq_active: Mapping[str, int] | None = None,
                       shares: tuple[Mapping[str, tuple[str, float]], Mapping[str, float]] | None = None) -> None:
        """The state after a pass, from the tallies queue_status.py computed: kept, rendered when scraped
        (`gitopsq.queue_metrics`). ``reasons`` = (cluster queue, pending reason); ``active`` / ``lq_active``:
        pending workloads still in the admission queue (not yet found inadmissible) per ClusterQueue /
        ``namespace/name``; ``shares``: fair sharing's weighted shares."""
        # ``reasons`` is a new list every pass (`AdmissionPass.run`), never changed afterwards: kept as it is.
        self.queue_state.observe(Snapshot(topology, cq_tally, lq_tally, reasons, active or {}, lq_active or {}, shares))
        self.finished.values = dict(finished)
        lq_finished = {}
        for key, t in lq_tally.items():
            ns, _, name = key.partition("/")
            lq_finished[(name, ns)] = t.finished
        self.lq_finished.values = lq_finished


class _FinishedGauge:
    """``kueue_finished_workloads{cluster_queue}`` (and ``kueue_local_queue_finished_workloads{name,namespace}``):
    a gauge sharing its name with a counter ``..._total``, which prometheus_client's own Gauge refuses; served by
    a collector without ``describe`` so the registry does not check the name. Each queue's line is kept while its
    count stays the same (`queue_metrics.KeptRows`)."""

    def __init__(self, registry: CollectorRegistry, role: str, name: str = "kueue_finished_workloads",
                 labels: tuple[str, ...] = ("cluster_queue",)) -> None:
        self.values: dict[Any, int] = {}  # label value (or tuple of values) -> count
        self.role, self.labels = role, labels
        self._kept = KeptRows((FamilyName(name, "Finished workloads still present", (*labels, "replica_role")),))
        registry.register(self)

    def collect(self) -> Iterable[Any]:
        role = self.role
        yield from self._kept.families(((key, n, functools.partial(_finished_rows, key, n, role))
                                        for key, n in sorted(self.values.items())), role)


def _finished_rows(key: Any, n: int, role: str) -> Rows:
    return ([((*(key if isinstance(key, tuple) else (key,)), role), n)],)


class SyncMetrics:
    """gitopsq's own series: sync passes by outcome, last success, applied revision, drift corrections, rollbacks,
    refused rewinds, dry-run refusals, unhealthy queues; and the
    audit trail's backlog and pushes (`observe_audit`, sampled from `AuditTrail.status()`)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, source: str = "") -> None:
        self.registry = r = registry or CollectorRegistry()
        self.source = source  # the GitSource (namespace/name) the revision label belongs to
        self.syncs = Counter("gitopsq_sync_total", "Sync passes by outcome", ["outcome"], registry=r)
        self.last = Gauge("gitopsq_sync_last_success_timestamp_seconds", "Wall time of the last good pass", registry=r)
        self.applied = Counter("gitopsq_sync_applied_objects_total", "Objects applied by syncs", registry=r)
        self.drift = Counter("gitopsq_sync_drift_corrections_total", "Objects whose drift a sync corrected, by kind",
                             ["kind"], registry=r)
        self.rollbacks = Counter("gitopsq_sync_rollbacks_total", "Revisions whose apply failed on every attempt "
                                 "and were rolled back to the last good one", registry=r)
        self.rewinds = Counter("gitopsq_sync_rewinds_refused_total", "Heads refused because they do not descend "
                               "from the revision applied last (a branch moved back or force-pushed)", registry=r)
        self.refusals = Counter("gitopsq_sync_dry_run_refusals_total", "Objects the API server's dry run refused "
                                "(each refusal leaves its revision unapplied)", registry=r)
        self.unhealthy = Gauge("gitopsq_sync_unhealthy_queues", "Applied queues not healthy at the last check",
                               registry=r)
        self.revision = Gauge("gitopsq_sync_applied_revision_info", "1 for the revision applied last, per source",
                              ["source", "revision"], registry=r)
        self.audit_pending = Gauge("gitopsq_audit_pending_records", "Audit records accepted but not yet pushed",
                                   registry=r)
        self.audit_last_push = Gauge("gitopsq_audit_last_push_timestamp_seconds",
                                     "Wall time of the last successful audit push", registry=r)
        self.audit_failures = Counter("gitopsq_audit_push_failures_total", "Failed audit commit or push rounds",
                                      registry=r)
        self.audit_rewound = Gauge("gitopsq_audit_branch_rewound", "1 while the audit branch does not hold the commit "
                                   "the writer last pushed (records go to a recovery ref)", registry=r)
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
        if outcome == "rolled-back":
            self.rollbacks.inc()
        if outcome == "rewound":
            self.rewinds.inc()
        refusals = getattr(result, "refusals", ())
        if refusals:
            self.refusals.inc(len(refusals))
        health = getattr(result, "health", None)
        if health is not None:
            self.unhealthy.set(sum(1 for h in health if not h.healthy))
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
        self.audit_rewound.set(0 if getattr(status, "incident", None) is None else 1)


def serve(address: str, registry: CollectorRegistry, limits: ServerLimits | None = None) -> HttpServer:
    """Serve ``registry`` at any path of ``host:port`` (``:8080`` = all interfaces), started; returns the server
    (``.server_port``, ``.shutdown()``).

    Without ``*_created`` series (process-wide): Kueue's exposition has none, and for the per-queue counters and
    histograms they were a tenth of every scrape. The text is `gitopsq.exposition`'s (label text built once)."""
    disable_created_metrics()  # type: ignore[no-untyped-call]
    page = exposition.metrics_page(registry)

    def scrape(request: Request) -> Reply:
        body, zipped = page(request.headers.get("accept-encoding", ""))
        return Reply(200, body, exposition.CONTENT_TYPE, (("Content-Encoding", "gzip"),) if zipped else ())

    server = HttpServer(address, [Route("GET", "*", scrape)], limits=limits, name="metrics")
    server.start()
    return server
