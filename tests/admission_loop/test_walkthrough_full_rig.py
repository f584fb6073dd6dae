"""The walkthroughs users follow, end to end on the full rig: real Job controller, scheduler and KWOK nodes, so
every admitted Job's pods are scheduled onto fake nodes of its flavor, run and complete.

- the AKS walkthrough: two CPU Jobs admitted, run and finish; ``kubectl get workloads``; its metrics queries;
- the GPU triad: 64 GPUs, 33 Jobs of 2 GPUs: 32 running on GPU nodes, the 33rd pending with Kueue's message;
- the reference's quick start: 8 H100, one Job of 4 pods x 1 GPU;
- pattern A: two teams of a cohort with fair sharing; the idle team's quota is borrowed, then reclaimed with
  preemption, and the reclaiming team's pods land on the freed GPU nodes;
- pattern B: on-demand first, then spot.
"""

from __future__ import annotations

import dataclasses
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_rig import apply, columns, cond, create_job, job_manifest, wait_for, workload_of, workloads
from envtest_rig import GPU, RUN_FOR, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running
from prometheus_client.parser import text_string_to_metric_families
from running_loop import FAST, RunningLoop

from gitopsq.admission.topology import Settings
from gitopsq.metrics import KueueMetrics, serve

pytestmark = pytest.mark.envtest


@pytest.fixture
def loop_with_metrics(full_kueue: FullCluster) -> Iterator[tuple[RunningLoop, Any]]:
    """A loop on the full rig with fair sharing on (patterns A and B decide as gitopsq.yaml's `fairSharing: {}`
    would) and metrics served on a free port."""
    full_kueue.delete_all()
    metrics = KueueMetrics()
    server = serve("127.0.0.1:0", metrics.registry)
    try:
        with RunningLoop(full_kueue, dataclasses.replace(FAST, settings=Settings(fair_sharing=True)),
                         metrics=metrics) as running_loop:
            yield running_loop, server
    finally:
        server.shutdown()
        full_kueue.delete_all()


def _on(pods: list[dict[str, Any]], nodes: frozenset[str]) -> bool:
    return all(p["spec"].get("nodeName") in nodes for p in pods)


def test_aks_two_cpu_jobs(loop_with_metrics: tuple[RunningLoop, Any], node_pools: NodePools) -> None:
    """Two CPU Jobs in a 4-CPU queue are admitted, their pods scheduled onto the CPU nodes, and they finish;
    `kubectl get workloads` shows both admitted and finished; the walkthrough's metric names have data."""
    _, server = loop_with_metrics
    cluster = node_pools.cluster
    nodes = frozenset(node_pools.add(f"cpu-{time.monotonic_ns() % 10**6}", 2, cpu="4", memory="16Gi"))
    with namespace(cluster, "aks") as ns:
        apply(cluster, f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: default-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cluster-queue-{ns}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources: [{{name: cpu, nominalQuota: "4"}}, {{name: memory, nominalQuota: 8Gi}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: user-queue, namespace: {ns}}}
spec: {{clusterQueue: cluster-queue-{ns}}}
""")
        for name in ("sample-job-1", "sample-job-2"):
            manifest = job_manifest(ns, name, "user-queue", {"cpu": "1", "memory": "1Gi"}, parallelism=2)
            manifest["spec"]["template"]["metadata"] = {"annotations": {RUN_FOR: "2s"}}
            create_job(cluster, manifest)
        for name in ("sample-job-1", "sample-job-2"):
            pods = wait_for(f"{name}'s pods running", lambda n=name: (r := running(pods_of(cluster, ns, n)))
                            and len(r) == 2 and r, timeout=60)
            assert _on(pods, nodes)
        wait_for("both finished", lambda: all((c := cond(workload_of(cluster, ns, n), "Finished")) and
                                              c["status"] == "True" for n in ("sample-job-1", "sample-job-2")),
                 timeout=60)
        table = cluster.kubectl("get", "workloads", "-n", ns).stdout
        assert sorted(columns(table, "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED")) == [
            ("user-queue", f"cluster-queue-{ns}", "True", "True")] * 2, table
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read().decode()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples[("kueue_workload_admitted_total", (("clusterqueue", f"cluster-queue-{ns}"),))] == 2
        assert samples[("kueue_admitted_workloads_total", (("cluster_queue", f"cluster-queue-{ns}"),
                                                           ("priority_class", ""),
                                                           ("replica_role", "standalone")))] == 2


def test_gpu_triad_32_running_and_the_33rd_pending(loop_with_metrics: tuple[RunningLoop, Any],
                                                   node_pools: NodePools) -> None:
    """64 GPUs on 8 nodes and 33 Jobs of 2 GPUs: 32 Jobs' pods run on the GPU nodes, the 33rd waits with
    Kueue's message and its Job stays suspended."""
    cluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (8, 8)})["on-demand"]
    with namespace(cluster, "triad") as ns:
        apply(cluster, gpu_queue_yaml(ns, f"gpu-{ns}", [(pool, 64)]))
        for i in range(33):
            create_job(cluster, gpu_job(ns, f"train-{i:02d}", pods=1, gpus=2))

        def settled() -> list[dict[str, Any]] | None:
            wls = workloads(cluster, ns)
            return wls if len(wls) == 33 and sum(bool((c := cond(w, "Admitted")) and c["status"] == "True")
                                                 for w in wls) == 32 and all(cond(w, "QuotaReserved") for w in wls) \
                else None

        wls = wait_for("32 admitted", settled, timeout=90)
        waiting = [w for w in wls if cond(w, "QuotaReserved")["status"] == "False"]
        assert len(waiting) == 1
        assert cond(waiting[0], "QuotaReserved")["message"] == (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in flavor {pool.flavor}, "
            "2 more needed")

        def all_running() -> list[dict[str, Any]] | None:
            pods = running(pods_of_all(cluster, ns))
            return pods if len(pods) == 32 else None

        pods = wait_for("32 pods running", all_running, timeout=120)
        assert _on(pods, pool.nodes)
        pending_job = waiting[0]["metadata"]["ownerReferences"][0]["name"]
        assert pods_of(cluster, ns, pending_job) == []


def pods_of_all(cluster: FullCluster, ns: str) -> list[dict[str, Any]]:
    from cluster_rig import get

    items: list[dict[str, Any]] = get(cluster, f"/api/v1/namespaces/{ns}/pods")["items"]
    return items


def test_quick_start_8_h100_job_of_4(loop_with_metrics: tuple[RunningLoop, Any], node_pools: NodePools) -> None:
    """The quick start: one node of 8 H100 behind an 8-GPU queue; a Job of 4 pods x 1 GPU is admitted, its four
    pods run on the H100 node and the Job completes."""
    cluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 8)})["on-demand"]
    with namespace(cluster, "quick") as ns:
        apply(cluster, gpu_queue_yaml(ns, f"h100-{ns}", [(pool, 8)]))
        create_job(cluster, gpu_job(ns, "sample", pods=4, gpus=1, pod_annotations={RUN_FOR: "2s"}))
        pods = wait_for("4 pods running", lambda: (r := running(pods_of(cluster, ns, "sample"))) and len(r) == 4 and r,
                        timeout=60)
        assert _on(pods, pool.nodes)
        wl = workload_of(cluster, ns, "sample")
        assert wl is not None and wl["status"]["admission"]["podSetAssignments"][0]["count"] == 4
        wait_for("job complete", lambda: (c := cond(workload_of(cluster, ns, "sample"), "Finished"))
                 and c["status"] == "True" and c["reason"] == "Succeeded", timeout=60)


def test_pattern_a_cohort_fair_share_reclaim_on_gpu_nodes(loop_with_metrics: tuple[RunningLoop, Any],
                                                          node_pools: NodePools) -> None:
    """Pattern A: team A and team B each own 8 GPUs of a 16-GPU cohort. Team A, alone, borrows everything (four
    Jobs of 4 GPUs running); team B's two Jobs reclaim its quota by preempting two of team A's, and team B's pods
    run on the freed GPU nodes."""
    cluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (2, 8)})["on-demand"]
    with namespace(cluster, "pattern-a") as ns:
        docs = [gpu_queue_yaml(ns, f"team-{t}-{ns}", [(pool, 8)]).replace(
            "  namespaceSelector: {}\n", f"  cohortName: gpus-{ns}\n  namespaceSelector: {{}}\n").replace(
            "withinClusterQueue: Never", "reclaimWithinCohort: Any, withinClusterQueue: Never").replace(
            "name: queue,", f"name: team-{t},") for t in ("a", "b")]
        apply(cluster, "---\n".join(docs))
        for i in range(4):
            create_job(cluster, gpu_job(ns, f"a-{i}", pods=1, gpus=4, labels={"kueue.x-k8s.io/queue-name": "team-a"}))
        wait_for("team A runs on all 16 GPUs", lambda: sum(len(running(pods_of(cluster, ns, f"a-{i}")))
                                                           for i in range(4)) == 4, timeout=60)
        for i in range(2):
            create_job(cluster, gpu_job(ns, f"b-{i}", pods=1, gpus=4, labels={"kueue.x-k8s.io/queue-name": "team-b"},
                                        pod_annotations={RUN_FOR: "30s"}))
        b_pods = wait_for("team B's pods running", lambda: (r := [p for i in range(2)
                                                                  for p in running(pods_of(cluster, ns, f"b-{i}"))])
                          and len(r) == 2 and r, timeout=90)
        assert _on(b_pods, pool.nodes)
        preempted = [i for i in range(4) if (c := cond(workload_of(cluster, ns, f"a-{i}"), "Preempted"))
                     and c["status"] == "True"]
        assert len(preempted) == 2, preempted
        reasons = {cond(workload_of(cluster, ns, f"a-{i}"), "Preempted")["reason"] for i in preempted}
        assert reasons <= {"InCohortReclamation", "InCohortFairSharing"}, reasons
        assert sum(len(running(pods_of(cluster, ns, f"a-{i}"))) for i in range(4)) == 2


def test_pattern_b_on_demand_then_spot(loop_with_metrics: tuple[RunningLoop, Any], node_pools: NodePools) -> None:
    """Pattern B: a queue over an on-demand flavor, then a spot one (tainted nodes): the first two Jobs run on
    on-demand nodes, the next two on spot nodes (tolerating the taint), and a fifth waits."""
    cluster = node_pools.cluster
    pools = gpu_pools(node_pools, {"on-demand": (1, 8), "spot": (1, 8)})
    with namespace(cluster, "pattern-b") as ns:
        apply(cluster, gpu_queue_yaml(ns, f"od-spot-{ns}", [(pools["on-demand"], 8), (pools["spot"], 8)]))
        for i in range(5):
            create_job(cluster, gpu_job(ns, f"j-{i}", pods=1, gpus=4))
            if i < 4:
                wait_for(f"j-{i} admitted", lambda i=i: (c := cond(workload_of(cluster, ns, f"j-{i}"), "Admitted"))
                         and c["status"] == "True", timeout=30)
        for i, pool in ((0, pools["on-demand"]), (1, pools["on-demand"]), (2, pools["spot"]), (3, pools["spot"])):
            pods = wait_for(f"j-{i} running", lambda i=i: (r := running(pods_of(cluster, ns, f"j-{i}"))) and r,
                            timeout=60)
            assert _on(pods, pool.nodes), (i, pool.label)
        last = wait_for("j-4 pending", lambda: (c := cond(workload_of(cluster, ns, "j-4"), "QuotaReserved"))
                        and c["status"] == "False" and c["reason"] != "Pending" and c)
        assert "insufficient unused quota" in last["message"], last
