"""Prometheus metrics of the admission loop, scraped over HTTP, with Kueue's names and labels."""

from __future__ import annotations

import urllib.request

import pytest
from cluster_rig import admitted, apply, create_job, job_manifest, queue_setup, wait_for
from envtest_rig import Envtest
from prometheus_client.parser import text_string_to_metric_families
from running_loop import RunningLoop

from gitopsq.metrics import KueueMetrics, SyncMetrics, serve

pytestmark = pytest.mark.envtest



def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_admission_metrics_use_kueue_names_and_labels(kueue_clean: Envtest) -> None:
    """After two admissions and one pending workload, the scrape shows Kueue's counters, gauges and quota
    series with their labels (replica_role included)."""
    env = kueue_clean
    ns = env.new_namespace("metrics")
    apply(env, queue_setup(ns, "metrics-cq", cpu="3", cohort="metrics-cohort", borrowing_limit="1"))
    metrics = KueueMetrics()
    server = serve("127.0.0.1:0", metrics.registry)
    try:
        with RunningLoop(env, metrics=metrics):
            for name in ("a", "b", "c"):
                create_job(env, job_manifest(ns, name, "queue", {"cpu": "1500m"}))
            wait_for("two admitted", lambda: sum(admitted(env, ns, n) for n in "abc") == 2)

            def settled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
                got = scrape(server.server_port)
                key = ("kueue_pending_workloads", (("cluster_queue", "metrics-cq"), ("replica_role", "standalone"),
                                                   ("status", "inadmissible")))
                return got if got.get(key) == 1 else None

            got = wait_for("pending gauge", settled)
    finally:
        server.shutdown()
    cq = ("cluster_queue", "metrics-cq")
    role = ("replica_role", "standalone")
    assert got[("kueue_admitted_workloads_total", (cq, ("priority_class", ""), role))] == 2
    assert got[("kueue_quota_reserved_workloads_total", (cq, ("priority_class", ""), role))] == 2
    assert got[("kueue_admitted_active_workloads", (cq, role))] == 2
    assert got[("kueue_unadmitted_workloads", (cq, ("reason", "WaitingForQuota"), role,
                                               ("underlying_cause", "")))] == 1
    quota = (("cluster_queue", "metrics-cq"), ("cohort", "metrics-cohort"), ("flavor", "default-flavor"), role,
             ("resource", "cpu"))
    quota = tuple(sorted(quota))
    assert got[("kueue_cluster_queue_nominal_quota", quota)] == 3
    assert got[("kueue_cluster_queue_borrowing_limit", quota)] == 1
    assert got[("kueue_cluster_queue_resource_usage", quota)] == 3
    assert got[("kueue_cluster_queue_status", (cq, role, ("status", "active")))] == 1
    assert got[("kueue_admission_attempts_total", (role, ("result", "success")))] >= 1
    assert got[("kueue_admission_wait_time_seconds_count", (cq, ("priority_class", ""), role))] == 2


def test_sync_metrics_count_outcomes() -> None:
    """gitopsq's sync series count passes by outcome and stamp the last success."""
    sync = SyncMetrics()
    for outcome in ("applied", "failed", "unchanged"):
        sync.observe(outcome)
    families = {f.name: f for f in text_string_to_metric_families(
        __import__("prometheus_client").generate_latest(sync.registry).decode())}
    totals = {s.labels["outcome"]: s.value for s in families["gitopsq_sync"].samples if s.name == "gitopsq_sync_total"}
    assert totals == {"applied": 1.0, "failed": 1.0, "unchanged": 1.0}
    assert families["gitopsq_sync_last_success_timestamp_seconds"].samples[0].value > 0
