"""RayJobs and RayClusters on the live loop and the full rig, with the real KubeRay operator (built from
github.com/ray-project/kuberay/ray-operator): one Workload per RayJob with pod sets head, one per worker group and
the submitter, each on its flavor's nodes; preempted (KubeRay deletes the cluster) and brought back; all or nothing
under waitForPodsReady; the RayJob's RayCluster never queued; a standalone RayCluster queued itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_rig import create_job, holds, wait_for, workloads
from envtest_rig import RUN_FOR, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running, setup
from ray_objects import (
    cluster_spec,
    create,
    delete,
    get_raycluster,
    get_rayjob,
    nodes,
    ray_pods,
    raycluster,
    rayclusters,
    rayjob,
    rayjob_cluster_name,
    worker_group,
    workload_of,
)
from running_loop import FAST, RunningLoop, running_on_clean

from gitopsq.admission_loop.options import RequeuingStrategy, WaitForPodsReady

pytestmark = pytest.mark.envtest

WITH_RAY = dataclasses.replace(FAST, integrations=("batch/job", "ray.io/rayjob", "ray.io/raycluster"))


@pytest.fixture
def ray_loop(full_kueue: FullCluster, kuberay_cluster: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop with the batch/job and both Ray integrations on the full rig (KubeRay operator on)."""
    with running_on_clean(full_kueue, WITH_RAY) as running_loop:
        yield running_loop


def _job_pods(cluster: FullCluster, ns: str, name: str, group: str | None = None) -> list[dict[str, Any]]:
    """The running pods of the RayJob's current RayCluster (none while it has no cluster)."""
    cluster_name = rayjob_cluster_name(cluster, ns, name)
    return running(ray_pods(cluster, ns, cluster_name, group)) if cluster_name else []  # type: ignore[return-value]


def test_rayjob_head_workers_and_submitter_each_on_their_flavor(ray_loop: RunningLoop,
                                                                node_pools: NodePools) -> None:
    """A RayJob with a CPU head and two 4-GPU workers becomes one Workload with pod sets head (1), workers (2) and
    submitter (1); the head and submitter fit the on-demand flavor, the workers only spot: KubeRay's pods run on
    those flavors' nodes, and the RayCluster KubeRay made for the job gets no Workload of its own."""
    cluster: FullCluster = node_pools.cluster
    pools = gpu_pools(node_pools, {"on-demand": (1, 4), "spot": (2, 4)})
    with namespace(cluster, "ray-place") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pools["on-demand"], 4), (pools["spot"], 8)]))
        create(cluster, rayjob(ns, "train", cluster_spec(worker_group("workers", replicas=2, gpus=4))))
        wl = wait_for("the RayJob admitted", lambda: holds(workload_of(cluster, "RayJob", ns, "train"), "Admitted")
                      and workload_of(cluster, "RayJob", ns, "train"), timeout=30)
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2),
                                                                             ("submitter", 1)]
        flavors = {a["name"]: set(a["flavors"].values()) for a in wl["status"]["admission"]["podSetAssignments"]}
        assert flavors == {"head": {pools["on-demand"].flavor}, "workers": {pools["spot"].flavor},
                           "submitter": {pools["on-demand"].flavor}}
        head = wait_for("the head running", lambda: _job_pods(cluster, ns, "train", "headgroup"), timeout=60)
        workers = wait_for("both workers running", lambda: len(_job_pods(cluster, ns, "train", "workers")) == 2
                           and _job_pods(cluster, ns, "train", "workers"), timeout=60)
        assert nodes(head) <= pools["on-demand"].nodes
        assert nodes(workers) <= pools["spot"].nodes
        submitter = wait_for("the submitter running", lambda: running(pods_of(cluster, ns, "train")), timeout=60)
        assert nodes(submitter) <= pools["on-demand"].nodes
        (child,) = rayclusters(cluster, ns)
        assert child["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") == "queue"  # KubeRay copied it
        assert len(workloads(cluster, ns)) == 1, "the RayJob's RayCluster got a Workload of its own"


def test_preempted_rayjob_loses_its_cluster_and_comes_back(ray_loop: RunningLoop, node_pools: NodePools) -> None:
    """A running low-priority RayJob holding all 8 GPUs is preempted by a high-priority Job: it is suspended,
    KubeRay deletes its RayCluster and pods, its templates are restored; the high Job runs; once it finishes the
    RayJob is admitted again and KubeRay makes a new cluster whose workers run on the flavor's nodes."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (2, 4)})["spot"]
    with namespace(cluster, "ray-preempt") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 8)], preemption="LowerPriority",
                                      priorities={f"low-{ns}": 10, f"high-{ns}": 100}))
        create(cluster, rayjob(ns, "low", cluster_spec(worker_group("workers", replicas=2, gpus=4)),
                               priority=f"low-{ns}"))
        wait_for("low's workers running", lambda: len(_job_pods(cluster, ns, "low", "workers")) == 2, timeout=60)
        first = rayjob_cluster_name(cluster, ns, "low")
        create_job(cluster, gpu_job(ns, "high", pods=2, gpus=4, priority=f"high-{ns}",
                                    pod_annotations={RUN_FOR: "3s"}))
        evicted = wait_for("low evicted", lambda: holds(workload_of(cluster, "RayJob", ns, "low"), "Evicted"),
                           timeout=30)
        assert evicted["reason"] == "Preempted"
        wait_for("low suspended", lambda: get_rayjob(cluster, ns, "low")["spec"].get("suspend") is True)
        wait_for("KubeRay deleted low's cluster", lambda: not rayclusters(cluster, ns), timeout=60)
        wait_for("high running", lambda: len(running(pods_of(cluster, ns, "high"))) == 2, timeout=60)
        low = wait_for("low's templates restored", lambda: _restored(get_rayjob(cluster, ns, "low")), timeout=30)
        assert "tolerations" not in low["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
        assert "kueue.x-k8s.io/job-uid" not in (low["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
                                                .get("metadata") or {}).get("labels", {})
        wait_for("high finished", lambda: holds(get_job_workload(cluster, ns, "high"), "Finished"), timeout=60)
        wait_for("low admitted again", lambda: holds(workload_of(cluster, "RayJob", ns, "low"), "Admitted"),
                 timeout=30)
        again = wait_for("low's workers running again", lambda: len(_job_pods(cluster, ns, "low", "workers")) == 2
                         and _job_pods(cluster, ns, "low", "workers"), timeout=90)
        assert rayjob_cluster_name(cluster, ns, "low") != first, "KubeRay did not make a new cluster"
        assert nodes(again) <= spot.nodes


def _restored(job: dict[str, Any]) -> dict[str, Any] | None:
    """The RayJob once its worker template has no node selector again."""
    spec = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    return job if "nodeSelector" not in spec else None


def get_job_workload(cluster: FullCluster, ns: str, name: str) -> dict[str, Any] | None:
    return workload_of(cluster, "Job", ns, name)


def test_rayjob_the_nodes_cannot_hold_is_evicted_whole_by_pods_ready(full_kueue: FullCluster,
                                                                     kuberay_cluster: FullCluster,
                                                                     node_pools: NodePools) -> None:
    """Quota admits a RayJob of three 4-GPU workers but the pool's two nodes hold only two of them: KubeRay never
    reports the cluster ready, so with waitForPodsReady the Workload is evicted (PodsReadyTimeout) and the RayJob
    suspended whole — KubeRay deletes its cluster and none of its pods keeps running."""
    cluster: FullCluster = node_pools.cluster
    gang = WaitForPodsReady(enable=True, timeout=4.0, requeuing_strategy=RequeuingStrategy(
        backoff_limit_count=1, backoff_base_seconds=30, backoff_max_seconds=60))
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    full_kueue.delete_all()
    try:
        with RunningLoop(full_kueue, dataclasses.replace(WITH_RAY, wait_for_pods_ready=gang)), \
                namespace(cluster, "ray-gang") as ns:
            setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 12)]))
            create(cluster, rayjob(ns, "gang", cluster_spec(worker_group("workers", replicas=3, gpus=4))))
            wait_for("two of three workers running", lambda: len(_job_pods(cluster, ns, "gang", "workers")) == 2,
                     timeout=60)
            evicted = wait_for("evicted by the timeout", lambda: holds(workload_of(cluster, "RayJob", ns, "gang"),
                                                                       "Evicted"), timeout=30)
            assert evicted["reason"] == "PodsReadyTimeout"
            wait_for("the RayJob suspended", lambda: get_rayjob(cluster, ns, "gang")["spec"].get("suspend") is True)
            wait_for("its cluster deleted", lambda: not rayclusters(cluster, ns), timeout=60)
            wait_for("no pod of it left running", lambda: not running(
                [p for p in _all_pods(cluster, ns) if "ray.io/cluster" in p["metadata"].get("labels", {})]),
                timeout=60)
    finally:
        full_kueue.delete_all()


def _all_pods(cluster: FullCluster, ns: str) -> list[dict[str, Any]]:
    from cluster_rig import get

    items: list[dict[str, Any]] = get(cluster, f"/api/v1/namespaces/{ns}/pods")["items"]
    return items


def test_standalone_raycluster_is_queued_placed_and_released(ray_loop: RunningLoop, node_pools: NodePools) -> None:
    """A queued RayCluster is one Workload with pod sets head and workers (no submitter); once admitted KubeRay's
    pods run on the flavors' nodes and the cluster reports ready (PodsReady); deleting the cluster removes the
    Workload and gives its quota back, so a second cluster waiting for the GPUs is admitted."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (2, 4)})["spot"]
    with namespace(cluster, "ray-cluster") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 8)]))
        create(cluster, raycluster(ns, "first", cluster_spec(worker_group("gpu", replicas=2, gpus=4))))
        wl = wait_for("first admitted", lambda: holds(workload_of(cluster, "RayCluster", ns, "first"), "Admitted")
                      and workload_of(cluster, "RayCluster", ns, "first"), timeout=30)
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("gpu", 2)]
        workers = wait_for("first's workers running", lambda: len(running(ray_pods(cluster, ns, "first", "gpu")))
                           == 2 and running(ray_pods(cluster, ns, "first", "gpu")), timeout=60)
        assert nodes(workers) <= spot.nodes
        wait_for("first ready", lambda: (get_raycluster(cluster, ns, "first").get("status") or {}).get("state")
                 == "ready", timeout=60)
        create(cluster, raycluster(ns, "second", cluster_spec(worker_group("gpu", replicas=1, gpus=4))))
        wait_for("second's Workload", lambda: workload_of(cluster, "RayCluster", ns, "second"), timeout=30)
        assert not holds(workload_of(cluster, "RayCluster", ns, "second"), "Admitted"), "admitted over quota"
        assert get_raycluster(cluster, ns, "second")["spec"]["suspend"] is True
        delete(cluster, "RayCluster", ns, "first")
        wait_for("first's Workload gone", lambda: workload_of(cluster, "RayCluster", ns, "first") is None, timeout=60)
        wait_for("second admitted", lambda: holds(workload_of(cluster, "RayCluster", ns, "second"), "Admitted"),
                 timeout=30)
        wait_for("second's worker running", lambda: len(running(ray_pods(cluster, ns, "second", "gpu"))) == 1,
                 timeout=60)
