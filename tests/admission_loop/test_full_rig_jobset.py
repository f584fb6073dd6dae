"""JobSets on the live loop and the full rig, with the real JobSet controller (built from sigs.k8s.io/jobset):
one Workload per JobSet with a pod set per replicated job, each placed on its own flavor, preempted and brought
back, all or nothing under waitForPodsReady; the child Jobs never queued."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_rig import get, holds, wait_for, workloads
from envtest_rig import RUN_FOR, FullCluster, NodePools
from gpu_rig import gpu_pools, gpu_queue_yaml, namespace, running, setup
from jobset_rig import create_jobset, delete_jobset, get_jobset, jobset, jobset_pods, replicated, workload_of_jobset
from running_loop import FAST, RunningLoop, running_on_clean

from gitopsq.admission_loop.options import RequeuingStrategy, WaitForPodsReady

pytestmark = pytest.mark.envtest

WITH_JOBSET = dataclasses.replace(FAST, integrations=("batch/job", "jobset.x-k8s.io/jobset"))


@pytest.fixture
def jobset_loop(full_kueue: FullCluster, jobset_cluster: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop with the batch/job and JobSet integrations on the full rig (JobSet controller on)."""
    with running_on_clean(full_kueue, WITH_JOBSET) as running_loop:
        yield running_loop


def _nodes(pods: list[dict[str, Any]]) -> set[str]:
    return {p["spec"]["nodeName"] for p in pods}


def test_driver_and_workers_are_one_workload_each_on_its_flavor(jobset_loop: RunningLoop,
                                                                  node_pools: NodePools) -> None:
    """A JobSet with a 1-GPU driver and two 4-GPU workers becomes one Workload with pod sets driver (1) and workers
    (2); the driver fits the on-demand flavor, the workers only spot: each replicated job's pods run on its own
    flavor's nodes, and the JobSet's child Jobs get no Workload."""
    cluster: FullCluster = node_pools.cluster
    pools = gpu_pools(node_pools, {"on-demand": (1, 4), "spot": (2, 4)})
    with namespace(cluster, "js-place") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pools["on-demand"], 4), (pools["spot"], 8)]))
        create_jobset(cluster, jobset(ns, "train", replicated("driver", replicas=1, pods=1, gpus=1),
                                      replicated("workers", replicas=2, pods=1, gpus=4)))
        wl = wait_for("the JobSet admitted", lambda: holds(workload_of_jobset(cluster, ns, "train"), "Admitted")
                      and workload_of_jobset(cluster, ns, "train"), timeout=30)
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("driver", 1), ("workers", 2)]
        flavors = {a["name"]: set(a["flavors"].values()) for a in wl["status"]["admission"]["podSetAssignments"]}
        assert flavors == {"driver": {pools["on-demand"].flavor}, "workers": {pools["spot"].flavor}}
        driver = wait_for("the driver running", lambda: running(jobset_pods(cluster, ns, "train", "driver")),
                          timeout=60)
        workers = wait_for("both workers running", lambda: len(running(jobset_pods(cluster, ns, "train", "workers")))
                           == 2 and running(jobset_pods(cluster, ns, "train", "workers")), timeout=60)
        assert _nodes(list(driver)) <= pools["on-demand"].nodes
        assert _nodes(list(workers)) <= pools["spot"].nodes
        children = get(cluster, f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
        assert len(children) == 3, [c["metadata"]["name"] for c in children]
        assert len(workloads(cluster, ns)) == 1, "a child Job of a queued JobSet got a Workload"


def test_preempted_jobset_is_suspended_restored_and_comes_back(jobset_loop: RunningLoop,
                                                               node_pools: NodePools) -> None:
    """A running low-priority JobSet holding all 8 GPUs is preempted by a high-priority one: it is suspended, its
    pods go, its templates are restored; the high one runs on the nodes; when the high one finishes, the low one
    is admitted again and its pods run once more."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (2, 4)})["spot"]
    with namespace(cluster, "js-preempt") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 8)], preemption="LowerPriority",
                                      priorities={f"low-{ns}": 10, f"high-{ns}": 100}))
        create_jobset(cluster, jobset(ns, "low", replicated("workers", replicas=2, pods=1, gpus=4),
                                      priority=f"low-{ns}"))
        wait_for("low running", lambda: len(running(jobset_pods(cluster, ns, "low"))) == 2, timeout=60)
        create_jobset(cluster, jobset(ns, "high", replicated("workers", replicas=2, pods=1, gpus=4,
                                                             pod_annotations={RUN_FOR: "3s"}),
                                      priority=f"high-{ns}"))
        evicted = wait_for("low evicted", lambda: holds(workload_of_jobset(cluster, ns, "low"), "Evicted"), timeout=30)
        assert evicted["reason"] == "Preempted"
        wait_for("low suspended", lambda: get_jobset(cluster, ns, "low")["spec"].get("suspend") is True)
        wait_for("high running", lambda: len(running(jobset_pods(cluster, ns, "high"))) == 2, timeout=60)
        low = get_jobset(cluster, ns, "low")
        pod_spec = low["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert "nodeSelector" not in pod_spec and "tolerations" not in pod_spec, "templates not restored"
        assert not running(jobset_pods(cluster, ns, "low")), "low's pods still run beside high's"
        wait_for("high finished", lambda: holds(workload_of_jobset(cluster, ns, "high"), "Finished"), timeout=60)
        wait_for("low admitted again", lambda: holds(workload_of_jobset(cluster, ns, "low"), "Admitted"), timeout=30)
        again = wait_for("low running again", lambda: len(running(jobset_pods(cluster, ns, "low"))) == 2
                         and running(jobset_pods(cluster, ns, "low")), timeout=60)
        assert _nodes(list(again)) <= spot.nodes
        delete_jobset(cluster, ns, "high")


def test_jobset_the_nodes_cannot_hold_is_evicted_whole_by_pods_ready(full_kueue: FullCluster,
                                                                     jobset_cluster: FullCluster,
                                                                     node_pools: NodePools) -> None:
    """Quota admits a JobSet of three 4-GPU workers but the pool's two nodes hold only two of them: with
    waitForPodsReady the Workload is evicted (PodsReadyTimeout) and the JobSet suspended whole — none of its
    pods keeps running."""
    cluster: FullCluster = node_pools.cluster
    gang = WaitForPodsReady(enable=True, timeout=3.0, requeuing_strategy=RequeuingStrategy(
        backoff_limit_count=1, backoff_base_seconds=30, backoff_max_seconds=60))
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    full_kueue.delete_all()
    try:
        with RunningLoop(full_kueue, dataclasses.replace(WITH_JOBSET, wait_for_pods_ready=gang)), \
                namespace(cluster, "js-gang") as ns:
            setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 12)]))
            create_jobset(cluster, jobset(ns, "gang", replicated("workers", replicas=3, pods=1, gpus=4)))
            wait_for("two of three running", lambda: len(running(jobset_pods(cluster, ns, "gang"))) == 2, timeout=60)
            evicted = wait_for("evicted by the timeout", lambda: holds(workload_of_jobset(cluster, ns, "gang"),
                                                                       "Evicted"), timeout=30)
            assert evicted["reason"] == "PodsReadyTimeout"
            wait_for("the JobSet suspended", lambda: get_jobset(cluster, ns, "gang")["spec"].get("suspend") is True)
            wait_for("no pod of it left running", lambda: not running(jobset_pods(cluster, ns, "gang")), timeout=60)
    finally:
        full_kueue.delete_all()
