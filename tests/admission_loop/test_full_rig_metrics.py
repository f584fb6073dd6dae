"""Kueue's metrics of the running loop on the full rig, scraped over HTTP: pending workloads by status, wait times
counted from the last requeue, admission-check and pods-ready wait times, unique evictions, fair-sharing shares,
LocalQueue series, and the AKS walkthrough's alias names evaluated with its PromQL selectors."""

from __future__ import annotations

import dataclasses
import math
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest
from checks_rig import set_check_active, set_check_state
from cluster_rig import apply, cond, create_job, job_manifest, queue_setup, wait_for, workload_of
from envtest_rig import RUN_FOR, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running
from prometheus_client.parser import text_string_to_metric_families
from running_loop import FAST, RunningLoop

from gitopsq.admission.topology import Settings
from gitopsq.admission_loop.options import WaitForPodsReady
from gitopsq.metrics import BUCKETS, BUCKETS_16, KueueMetrics, serve

pytestmark = pytest.mark.envtest

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, metric: str, **labels: str) -> float | None:
    """The one sample of ``metric`` whose labels include ``labels`` (None if there is none)."""
    found = [v for (n, ls), v in samples.items() if n == metric and set(labels.items()) <= set(ls)]
    assert len(found) <= 1, (metric, labels, found)
    return found[0] if found else None


@pytest.fixture
def metered(full_kueue: FullCluster) -> Iterator[tuple[RunningLoop, Any, FullCluster]]:
    """A loop with metrics served on a free port, fair sharing on and waitForPodsReady on (5 min timeout)."""
    full_kueue.delete_all()
    metrics = KueueMetrics()
    server = serve("127.0.0.1:0", metrics.registry)
    options = dataclasses.replace(FAST, settings=Settings(fair_sharing=True),
                                  wait_for_pods_ready=WaitForPodsReady(enable=True, timeout=300))
    try:
        with RunningLoop(full_kueue, options, metrics=metrics) as running_loop:
            yield running_loop, server, full_kueue
    finally:
        server.shutdown()
        full_kueue.delete_all()


def test_histograms_use_kueue_buckets() -> None:
    """Wait-time buckets are Kueue's generateExponentialBuckets: 1, then 2.5 doubling (14, or 16 for admission)."""
    assert BUCKETS[:5] == (1.0, 2.5, 5.0, 10.0, 20.0) and len(BUCKETS) == 14
    assert len(BUCKETS_16) == 16 and BUCKETS_16[-1] == 2.5 * 2 ** 14


def test_strict_fifo_pending_workloads_are_active(metered: tuple[RunningLoop, Any, FullCluster]) -> None:
    """In a StrictFIFO ClusterQueue the waiting workloads stay in the admission queue: pending_workloads counts
    them `active` (not the constant 0 of before), per ClusterQueue and per LocalQueue."""
    _, server, env = metered
    with namespace(env, "strict") as ns:
        text = queue_setup(ns, f"strict-{ns}", cpu="1").replace("  namespaceSelector: {}\n",
                                                                "  namespaceSelector: {}\n"
                                                                "  queueingStrategy: StrictFIFO\n")
        apply(env, text)
        for i in range(3):
            create_job(env, job_manifest(ns, f"j{i}", "queue", {"cpu": "1"}))

        def settled() -> Samples | None:
            got = scrape(server.server_port)
            return got if value(got, "kueue_pending_workloads", cluster_queue=f"strict-{ns}", status="active") == 2 \
                else None

        got = wait_for("two active pending", settled, timeout=30)
        assert value(got, "kueue_pending_workloads", cluster_queue=f"strict-{ns}", status="inadmissible") == 0
        assert value(got, "kueue_local_queue_pending_workloads", name="queue", namespace=ns, status="active") == 2
        assert value(got, "kueue_workload_pending_total", clusterqueue=f"strict-{ns}") == 2
        assert value(got, "kueue_local_queue_status", name="queue", namespace=ns, active="True") == 1
        assert value(got, "kueue_local_queue_resource_reservation", name="queue", namespace=ns, resource="cpu") == 1


def _evicted(wl: dict[str, Any]) -> bool:
    c = cond(wl, "Evicted")
    return c is not None and c["status"] == "True"


def test_check_retry_wait_times_and_unique_evictions(metered: tuple[RunningLoop, Any, FullCluster],
                                                     node_pools: NodePools) -> None:
    """A Workload evicted twice by a Retry check counts two evictions but one unique eviction; once admitted, its
    admission wait time counts from its last requeue (not its creation) and the admission-check wait time from
    its reservation; when its pods are all ready the ready wait times are observed."""
    _, server, env = metered
    pool = gpu_pools(node_pools, {"on-demand": (1, 8)})["on-demand"]
    with namespace(env, "waits") as ns:
        check, cq = f"check-{ns}", f"cq-{ns}"
        apply(env, f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {{name: {check}}}\n"
                   "spec: {controllerName: example.com/capacity}\n---\n"
              + gpu_queue_yaml(ns, cq, [(pool, 8)]).replace(
                  "  preemption:", f"  admissionChecksStrategy: {{admissionChecks: [{{name: {check}}}]}}\n"
                                   "  preemption:"))
        set_check_active(env, check, True)
        created = time.monotonic()
        create_job(env, gpu_job(ns, "trainer", pods=2, gpus=1, pod_annotations={RUN_FOR: "60s"}))
        for attempt in range(2):
            wl = wait_for("reserved", lambda: (w := workload_of(env, ns, "trainer")) and (
                c := cond(w, "QuotaReserved")) and c["status"] == "True" and w.get("status", {}).get(
                "admissionChecks") and all(s["state"] == "Pending" for s in w["status"]["admissionChecks"])
                and not _evicted(w) and w, timeout=30)
            if attempt == 0:
                time.sleep(2)  # the first wait is long, the one after the requeue short
            set_check_state(env, wl, "Retry", "later", requeue_after=1)
            # requeueAt is the check's lastTransitionTime in whole seconds + 1 s: often already past when the quota
            # is released, so the release and the next reservation may come within one pass — count the eviction
            # instead of polling for the moment in between
            wait_for("evicted", lambda n=attempt + 1: value(scrape(server.server_port), "kueue_evicted_workloads_total",
                                                            cluster_queue=cq, reason="AdmissionCheck") == n,
                     timeout=30)
        wl = wait_for("reserved again", lambda: (w := workload_of(env, ns, "trainer")) and (
            c := cond(w, "QuotaReserved")) and c["status"] == "True" and not _evicted(w) and w, timeout=30)
        requeued_for = time.monotonic() - created
        time.sleep(1)
        set_check_state(env, wl, "Ready", "ok")
        wait_for("pods ready", lambda: len(running(pods_of(env, ns, "trainer"))) == 2, timeout=60)

        def observed() -> Samples | None:
            got = scrape(server.server_port)
            return got if value(got, "kueue_ready_wait_time_seconds_count", cluster_queue=cq) == 1 else None

        got = wait_for("ready wait observed", observed, timeout=30)
    evicted = value(got, "kueue_evicted_workloads_total", cluster_queue=cq, reason="AdmissionCheck")
    assert evicted == 2
    assert value(got, "kueue_evicted_workloads_once_total", cluster_queue=cq, reason="AdmissionCheck") == 1
    assert value(got, "kueue_local_queue_evicted_workloads_total", name="queue", reason="AdmissionCheck") == 2
    assert value(got, "kueue_admission_wait_time_seconds_count", cluster_queue=cq) == 1
    waited = value(got, "kueue_admission_wait_time_seconds_sum", cluster_queue=cq)
    assert waited is not None and waited < requeued_for - 1.5, (waited, requeued_for)
    checks_waited = value(got, "kueue_admission_checks_wait_time_seconds_sum", cluster_queue=cq)
    assert checks_waited is not None and checks_waited >= 0.5
    assert value(got, "kueue_admitted_until_ready_wait_time_seconds_count", cluster_queue=cq) == 1
    assert value(got, "kueue_local_queue_quota_reserved_workloads_total", name="queue", namespace=ns) == 3
    assert value(got, "kueue_local_queue_admission_checks_wait_time_seconds_count", name="queue") == 1
    assert value(got, "kueue_local_queue_ready_wait_time_seconds_count", name="queue") == 1


def test_weighted_shares_and_walkthrough_aliases(metered: tuple[RunningLoop, Any, FullCluster],
                                                 node_pools: NodePools) -> None:
    """With fair sharing on, a ClusterQueue borrowing from its cohort reports a positive weighted share and one
    within its quota 0; the walkthrough's PromQL selectors over the alias names (label ``clusterqueue``) all
    match series of a scrape, with the values of Kueue's own series."""
    _, server, env = metered
    with namespace(env, "share") as ns:
        apply(env, queue_setup(ns, f"borrower-{ns}", cpu="1", cohort=f"co-{ns}"))
        apply(env, f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: lender-{ns}}}
spec:
  cohortName: co-{ns}
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{{name: cpu, nominalQuota: "3"}}]
""")
        for i in range(3):
            create_job(env, job_manifest(ns, f"j{i}", "queue", {"cpu": "1"}))
        create_job(env, job_manifest(ns, "too-big", "queue", {"cpu": "9"}))

        def settled() -> Samples | None:
            got = scrape(server.server_port)
            used = value(got, "kueue_clusterqueue_used_resources", clusterqueue=f"borrower-{ns}", resource="cpu")
            return got if used == 3 and value(got, "kueue_workload_pending_total",
                                               clusterqueue=f"borrower-{ns}") == 1 else None

        got = wait_for("three admitted, one pending", settled, timeout=30)
    share = value(got, "kueue_cluster_queue_weighted_share", cluster_queue=f"borrower-{ns}", cohort=f"co-{ns}")
    assert share is not None and share > 0 and not math.isnan(share)
    assert value(got, "kueue_cluster_queue_weighted_share", cluster_queue=f"lender-{ns}") == 0
    assert value(got, "kueue_cohort_weighted_share", cohort=f"co-{ns}") == 0  # a root cohort borrows from no one
    cq = f"borrower-{ns}"
    queries = [
        f'sum(rate(kueue_workload_admitted_total{{clusterqueue="{cq}"}}[5m])) by (clusterqueue)',
        f'kueue_workload_pending_total{{clusterqueue="{cq}"}}',
        f'kueue_clusterqueue_used_resources{{clusterqueue="{cq}", resource="cpu"}}',
        f'kueue_clusterqueue_available_resources{{clusterqueue="{cq}", resource="cpu"}}',
        f'sum by (clusterqueue) (kueue_clusterqueue_used_resources{{clusterqueue="{cq}"}}) / sum by (clusterqueue) '
        f'(kueue_clusterqueue_used_resources{{clusterqueue="{cq}"}} + '
        f'kueue_clusterqueue_available_resources{{clusterqueue="{cq}"}})',
    ]
    for query in queries:
        for selector in selectors(promql_parser.parse(query)):
            matched = [v for (name, labels), v in got.items() if name == selector.name
                       and all(_matches(dict(labels).get(m.name, ""), m) for m in selector.matchers.matchers)]
            assert matched, f"{query}: no series for {selector.name}{selector.matchers}"
    assert value(got, "kueue_workload_admitted_total", clusterqueue=cq) == 3 == value(
        got, "kueue_admitted_workloads_total", cluster_queue=cq)
    assert value(got, "kueue_clusterqueue_available_resources", clusterqueue=cq, resource="cpu") == 0


def selectors(expr: Any) -> Iterator[Any]:
    """Every vector selector of a parsed PromQL expression."""
    if isinstance(expr, promql_parser.VectorSelector):
        yield expr
    for attr in ("expr", "lhs", "rhs", "vector_selector"):
        child = getattr(expr, attr, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield from selectors(child)
    for arg in getattr(expr, "args", None) or ():
        yield from selectors(arg)


def _matches(actual: str, matcher: Any) -> bool:
    import re

    op = str(matcher.op)
    if op.endswith("NotEqual"):
        return actual != matcher.value
    if op.endswith("NotRe"):
        return re.fullmatch(matcher.value, actual) is None
    if op.endswith("Re"):
        return re.fullmatch(matcher.value, actual) is not None
    return actual == matcher.value
