"""The live loop on the full rig, Kueue's lifecycle of admitted Jobs: partial admission (`job-min-parallelism`) run
and restored, `spec.active: false` evicting an admitted Workload, and `maximumExecutionTimeSeconds` enforced."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_rig import cluster_queue, cond, create_job, flavors_usage, holds, job, rest, wait_for, workload_of
from envtest_rig import GPU, TERMINATE_AFTER, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, patch_workload, pods_of, running, setup
from running_loop import RunningLoop

from gitopsq.cluster.kube import ClusterNotFound

pytestmark = pytest.mark.envtest


def get_workload(cluster: FullCluster, ns: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = rest(cluster).request(
            "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{name}")
    except ClusterNotFound:
        return None
    return found


def _gpus_used(cluster: FullCluster, cq: str, flavor: str) -> str | None:
    return flavors_usage(cluster_queue(cluster, cq)).get((flavor, GPU))


def test_partial_admission_runs_the_admitted_pods_and_deactivation_restores_the_job(
        full_admission: RunningLoop, node_pools: NodePools) -> None:
    """With 4 of 8 GPUs taken, a Job of 4 × 2 GPUs allowing `job-min-parallelism: 1` is admitted at 2 pods: the
    Workload's count and usage, the Job's parallelism and the pods running say 2, and the queue's usage is 8,
    not 12. `spec.active: false` then evicts it (reason Deactivated): the Job is suspended with parallelism 4
    again, its quota returns once its pods are gone, and it is not admitted again while inactive; made active
    again it is requeued (Reactivated) and runs its 2 pods again."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    with namespace(cluster, "partial") as ns:
        cq = f"cq-{ns}"
        setup(cluster, gpu_queue_yaml(ns, cq, [(pool, 8)]))
        create_job(cluster, gpu_job(ns, "filler", pods=2, gpus=2))
        wait_for("filler running", lambda: len(running(pods_of(cluster, ns, "filler"))) == 2, timeout=60)
        create_job(cluster, gpu_job(ns, "elastic", pods=4, gpus=2,
                                    annotations={"kueue.x-k8s.io/job-min-parallelism": "1"}))
        wl = wait_for("elastic admitted", lambda: holds(workload_of(cluster, ns, "elastic"), "Admitted")
                      and workload_of(cluster, ns, "elastic"))
        assert wl["spec"]["podSets"][0]["count"] == 4 and wl["spec"]["podSets"][0]["minCount"] == 1
        assignment = wl["status"]["admission"]["podSetAssignments"][0]
        assert assignment["count"] == 2
        assert assignment["resourceUsage"][GPU] == "4"
        pods = wait_for("2 elastic pods running", lambda: len(running(pods_of(cluster, ns, "elastic"))) == 2
                        and running(pods_of(cluster, ns, "elastic")), timeout=60)
        assert {p["spec"]["nodeName"] for p in pods} <= pool.nodes
        assert job(cluster, ns, "elastic")["spec"]["parallelism"] == 2
        assert len(pods_of(cluster, ns, "elastic")) == 2, "no third pod was created"
        wait_for("queue usage of 8 GPUs", lambda: _gpus_used(cluster, cq, pool.flavor) == "8")

        patch_workload(cluster, ns, wl["metadata"]["name"], {"spec": {"active": False}})
        evicted = wait_for("elastic evicted", lambda: holds(workload_of(cluster, ns, "elastic"), "Evicted"))
        assert (evicted["reason"], evicted["message"]) == ("Deactivated", "The workload is deactivated")
        released = wait_for("elastic's quota released", lambda: (w := workload_of(cluster, ns, "elastic"))
                            and not (w.get("status") or {}).get("admission") and w)
        assert not pods_of(cluster, ns, "elastic") or not running(pods_of(cluster, ns, "elastic"))
        assert cond(released, "QuotaReserved")["status"] == "False"  # type: ignore[index]
        requeued = cond(released, "Requeued")
        assert requeued is not None and (requeued["status"], requeued["reason"]) == ("False", "Deactivated")
        wait_for("queue usage back to 4 GPUs", lambda: _gpus_used(cluster, cq, pool.flavor) == "4")
        stopped = job(cluster, ns, "elastic")
        assert stopped["spec"]["suspend"] is True
        assert stopped["spec"]["parallelism"] == 4, "partial admission's parallelism restored"
        assert not holds(workload_of(cluster, ns, "elastic"), "QuotaReserved"), "an inactive Workload stays out"

        patch_workload(cluster, ns, wl["metadata"]["name"], {"spec": {"active": True}})
        wait_for("elastic admitted again", lambda: holds(workload_of(cluster, ns, "elastic"), "Admitted"))
        requeued = cond(workload_of(cluster, ns, "elastic"), "Requeued")
        assert requeued is not None and (requeued["status"], requeued["reason"], requeued["message"]) == (
            "True", "Reactivated", "The workload was reactivated")
        wait_for("2 elastic pods running again", lambda: len(running(pods_of(cluster, ns, "elastic"))) == 2,
                 timeout=60)
        assert job(cluster, ns, "elastic")["spec"]["parallelism"] == 2


def test_maximum_execution_time_deactivates_a_running_job(full_admission: RunningLoop,
                                                          node_pools: NodePools) -> None:
    """A Job labelled `kueue.x-k8s.io/max-exec-time-seconds: 2` gets a Workload with that maximum; 2 s after it
    is admitted the loop marks it (DeactivationTarget), deactivates it and evicts it with reason
    DeactivatedDueToMaximumExecutionTimeExceeded: the Job is suspended and its quota released."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    with namespace(cluster, "maxexec") as ns:
        cq = f"cq-{ns}"
        setup(cluster, gpu_queue_yaml(ns, cq, [(pool, 4)]))
        create_job(cluster, gpu_job(ns, "bounded", pods=2, gpus=2,
                                    labels={"kueue.x-k8s.io/max-exec-time-seconds": "2"}))
        wait_for("bounded running", lambda: len(running(pods_of(cluster, ns, "bounded"))) == 2, timeout=60)
        wl = workload_of(cluster, ns, "bounded")
        assert wl is not None and wl["spec"]["maximumExecutionTimeSeconds"] == 2
        evicted = wait_for("bounded evicted", lambda: holds(workload_of(cluster, ns, "bounded"), "Evicted"),
                           timeout=30)
        assert evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
        assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
        admitted_at = cond(wl, "Admitted")["lastTransitionTime"]  # type: ignore[index]
        assert evicted["lastTransitionTime"] >= admitted_at
        wl = workload_of(cluster, ns, "bounded")
        assert wl is not None and wl["spec"]["active"] is False
        assert cond(wl, "DeactivationTarget") is None, "the mark is dropped once evicted"
        wait_for("bounded's quota released", lambda: not ((workload_of(cluster, ns, "bounded") or {}).get(
            "status") or {}).get("admission"))
        wait_for("queue usage back to 0", lambda: _gpus_used(cluster, cq, pool.flavor) in ("0", None))
        assert job(cluster, ns, "bounded")["spec"]["suspend"] is True
        assert not running(pods_of(cluster, ns, "bounded"))


def test_deleting_a_job_frees_its_quota_only_when_its_pods_are_gone(full_admission: RunningLoop,
                                                                    node_pools: NodePools) -> None:
    """A running Job's Workload carries Kueue's `resource-in-use` finalizer. Deleting the Job (background
    propagation, as kubectl does) lets the garbage collector delete the Workload, but while the Job's pods take
    2 s to terminate the Workload stays, holding its quota, and the Job waiting behind it is not admitted; once
    the pods are gone the finalizer comes off and the waiting Job runs on the freed GPUs."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    with namespace(cluster, "final") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 4)]))
        create_job(cluster, gpu_job(ns, "first", pods=2, gpus=2, pod_annotations={TERMINATE_AFTER: "2s"}))
        wait_for("first running", lambda: len(running(pods_of(cluster, ns, "first"))) == 2, timeout=60)
        wl = workload_of(cluster, ns, "first")
        assert wl is not None and wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
        name = wl["metadata"]["name"]
        create_job(cluster, gpu_job(ns, "second", pods=2, gpus=2))
        wait_for("second pending", lambda: (c := cond(workload_of(cluster, ns, "second"), "QuotaReserved"))
                 and c["status"] == "False")

        cluster.kubectl("delete", "job", "first", "-n", ns, "--wait=false")
        wait_for("first's Workload being deleted", lambda: (get_workload(cluster, ns, name) or {}).get(
            "metadata", {}).get("deletionTimestamp"), timeout=30)
        observed = 0
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "first's pods never went away"
            # the Workloads are read before the pods: a state seen while the pods still exist afterwards was
            # certainly the state while they existed (pods do not come back), however slow the reads
            held = get_workload(cluster, ns, name)
            second_admitted = holds(workload_of(cluster, ns, "second"), "QuotaReserved")
            alive = [p for p in pods_of(cluster, ns, "first")
                     if p["status"].get("phase") not in ("Succeeded", "Failed")]
            if not alive:
                break
            assert held is not None, "the Workload went while its pods still existed"
            assert not second_admitted, "second admitted too early"
            observed += 1
            time.sleep(0.1)
        assert observed >= 3, "the terminating window was observed"
        wait_for("first's Workload gone", lambda: get_workload(cluster, ns, name) is None, timeout=30)
        pods = wait_for("second running", lambda: len(running(pods_of(cluster, ns, "second"))) == 2
                        and running(pods_of(cluster, ns, "second")), timeout=60)
        assert {p["spec"]["nodeName"] for p in pods} <= pool.nodes


def test_deleting_the_workload_of_a_running_job_stops_it_and_queues_it_again(full_admission: RunningLoop,
                                                                             node_pools: NodePools) -> None:
    """Deleting a running Job's Workload (kubectl delete workload) stops the Job first; the Workload goes only
    once the Job's pods are gone, and the Job then gets a new Workload that is admitted and runs it again."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    with namespace(cluster, "wldel") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 4)]))
        create_job(cluster, gpu_job(ns, "work", pods=2, gpus=2, pod_annotations={TERMINATE_AFTER: "1s"}))
        wait_for("work running", lambda: len(running(pods_of(cluster, ns, "work"))) == 2, timeout=60)
        first = workload_of(cluster, ns, "work")
        assert first is not None
        old_pods = {p["metadata"]["uid"] for p in pods_of(cluster, ns, "work")}
        cluster.kubectl("delete", "workload", first["metadata"]["name"], "-n", ns, "--wait=false")
        wait_for("work suspended", lambda: job(cluster, ns, "work")["spec"].get("suspend") is True)
        observed, deadline = 0, time.monotonic() + 30
        while True:  # the old Workload stays while any old pod is left; then a new one comes
            assert time.monotonic() < deadline, "no new Workload"
            current = workload_of(cluster, ns, "work")
            if any(p["metadata"]["uid"] in old_pods for p in pods_of(cluster, ns, "work")):
                assert current is not None and current["metadata"]["uid"] == first["metadata"]["uid"], \
                    "the old Workload went while the Job's pods were still there"
                observed += 1
            elif current is not None and current["metadata"]["uid"] != first["metadata"]["uid"]:
                break
            time.sleep(0.1)
        assert observed >= 3, "the terminating window was observed"
        wait_for("work admitted again", lambda: holds(workload_of(cluster, ns, "work"), "Admitted"), timeout=30)
        wait_for("work running again", lambda: len(running(pods_of(cluster, ns, "work"))) == 2, timeout=60)
