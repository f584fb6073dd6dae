"""Prometheus metrics of the admission loop, scraped over HTTP, with Kueue's names and labels."""

from __future__ import annotations

import urllib.request

import pytest
from cluster_rig import admitted, apply, cond, create_job, job_manifest, queue_setup, rest, wait_for, workloads
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


def test_pending_gauges_count_waiting_workloads_beyond_the_engines_window(kueue_clean: Envtest) -> None:
    """With metrics on, a pass still reads only the index's window (8 per group of identical Workloads), yet the
    pending gauges count every waiting Workload: the ones beyond the window are counted from the index, as
    active, under their ClusterQueue's head reason."""
    env = kueue_clean
    ns = env.new_namespace("window")
    apply(env, queue_setup(ns, "window-cq", cpu="1"))
    metrics = KueueMetrics()
    server = serve("127.0.0.1:0", metrics.registry)
    waiting = 24
    try:
        with RunningLoop(env, metrics=metrics) as running:
            for i in range(waiting + 1):  # identical Workloads, made directly as Kueue's benchmark runner does
                rest(env).request("POST", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads", body={
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "metadata": {"name": f"w{i:02d}", "namespace": ns},
                    "spec": {"queueName": "queue", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
            wait_for("one admitted", lambda: sum(
                cond(w, "QuotaReserved") is not None and cond(w, "QuotaReserved")["status"] == "True"  # type: ignore[index]
                for w in workloads(env, ns)) == 1)
            cq = ("cluster_queue", "window-cq")
            role = ("replica_role", "standalone")

            def settled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
                got = scrape(server.server_port)
                total = sum(got.get(("kueue_pending_workloads", (cq, role, ("status", s))), 0)
                            for s in ("active", "inadmissible"))
                return got if total == waiting else None

            got = wait_for("every waiting Workload counted", settled)
            assert running.loop.admission._window < waiting  # the pass did not see them all
    finally:
        server.shutdown()
    unadmitted = {labels: v for (name, labels), v in got.items()
                  if name == "kueue_unadmitted_workloads" and cq in labels}
    assert sum(unadmitted.values()) == waiting
    assert got[("kueue_admitted_active_workloads", (cq, role))] == 1
    lq = sum(v for (name, labels), v in got.items()
             if name == "kueue_local_queue_pending_workloads" and ("namespace", ns) in labels)
    assert lq == waiting


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
