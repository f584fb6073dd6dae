"""The mixed-framework walkthrough on the full rig (real controller-manager, scheduler, KWOK GPU nodes, the real
JobSet, Trainer and KubeRay controllers): one ClusterQueue of 16 GPUs shared by a TrainJob, a JobSet, a RayJob and
a pod group, admitted in Kueue's order (priority, then creation), each kind's pods on its assigned flavor's nodes,
no child object queued, and the job left waiting admitted once another is deleted."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cluster_rig import get, holds, rest, wait_for, workloads
from envtest_rig import FullCluster, NodePools
from gpu_rig import MERGE, gpu_pools, gpu_queue_yaml, setup
from jobset_rig import create_jobset, delete_jobset, jobset, jobset_pods, replicated, workload_of_jobset
from pod_objects import create as create_pods
from pod_objects import group, pods_in, release, workload_named
from ray_objects import cluster_spec, ray_pods, rayclusters, rayjob, rayjob_cluster_name, worker_group, workload_of
from ray_objects import create as create_ray
from running_loop import FAST, RunningLoop, running_on_clean
from trainjob_objects import (
    QUEUE_LABEL,
    create_runtime,
    create_trainjob,
    delete_runtime,
    torch_runtime,
    trainjob,
    trainjob_pods,
    workload_of_trainjob,
)

pytestmark = pytest.mark.envtest

# every framework of the walkthrough; waitForPodsReady stays off (FAST): KubeRay never reports a RayJob's cluster
# ready on KWOK (docs/admission-loop.md, "RayJob and RayCluster")
WITH_ALL = dataclasses.replace(FAST, integrations=(
    "batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "ray.io/rayjob", "ray.io/raycluster",
    "pod"))

OWNER_KINDS = {"Pod", "TrainJob", "JobSet", "RayJob"}


@pytest.fixture
def frameworks_loop(full_kueue: FullCluster, trainer_cluster: FullCluster,
                    kuberay_cluster: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop with every integration on the full rig (JobSet, Trainer and KubeRay controllers on)."""
    with running_on_clean(full_kueue, WITH_ALL) as running_loop:
        yield running_loop


@pytest.fixture
def walk_ns(full_kueue: FullCluster) -> Iterator[str]:
    """The walkthrough's namespace; its pods lose gitopsq's finalizer afterwards so that it can be deleted."""
    ns = full_kueue.new_namespace("mixed")
    try:
        yield ns
    finally:
        release(full_kueue, ns)
        full_kueue.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _flavors(wl: dict[str, Any]) -> dict[str, set[str]]:
    """Pod set name → the flavors its admission assigned."""
    return {a["name"]: set(a["flavors"].values()) for a in wl["status"]["admission"]["podSetAssignments"]}


def _placed(pods: list[dict[str, Any]], count: int) -> set[str] | None:
    """The nodes of ``count`` bound pods (none being deleted), or None until that many are bound."""
    bound = [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
             and (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]
    return {p["spec"]["nodeName"] for p in bound} if len(bound) == count else None


def _owner_kinds(cluster: FullCluster, ns: str) -> list[str]:
    """The owner kinds of each Workload in ``ns`` (a group's Workload is owned by each member Pod), sorted."""
    return sorted("/".join(sorted({r["kind"] for r in wl["metadata"].get("ownerReferences") or ()}))
                  for wl in workloads(cluster, ns))


def _created_in_turn(what: str, make: Callable[[], object], workload: Callable[[], dict[str, Any] | None]) -> None:
    """Create an object and wait for its Workload, then let the clock pass a second: creation timestamps have
    second precision, and Kueue breaks priority ties by them."""
    make()
    wait_for(f"{what}'s Workload", workload, timeout=30)
    time.sleep(1.1)


def test_mixed_frameworks_share_sixteen_gpus_in_kueues_order(frameworks_loop: RunningLoop, node_pools: NodePools,
                                                             walk_ns: str) -> None:
    """Queued behind a held ClusterQueue (TrainJob 2 × 4 GPUs, JobSet 2 × 2, RayJob 2 × 2 workers, all mid, then a
    high pod group 2 × 2), they are admitted in Kueue's order — the group on on-demand, the TrainJob pushed to spot,
    the JobSet on on-demand, the RayJob (last among equals) waiting without a cluster — each kind's pods on its
    flavor's nodes and no child queued; deleting the JobSet admits the RayJob on on-demand, and a second high group
    then preempts the RayJob (not the TrainJob) and runs on the freed on-demand nodes."""
    cluster: FullCluster = node_pools.cluster
    ns = walk_ns
    pools = gpu_pools(node_pools, {"on-demand": (4, 2), "spot": (2, 4)})
    on_demand, spot = pools["on-demand"], pools["spot"]
    cq, mid, high = f"cq-{ns}", f"mid-{ns}", f"high-{ns}"
    queue_yaml = gpu_queue_yaml(ns, cq, [(on_demand, 8), (spot, 8)], preemption="LowerPriority",
                                priorities={mid: 50, high: 100})
    held = queue_yaml.replace("spec:\n  namespaceSelector:", "spec:\n  stopPolicy: Hold\n  namespaceSelector:")
    assert held != queue_yaml
    setup(cluster, held)
    runtime = f"torch-{uuid.uuid4().hex[:6]}"
    create_runtime(cluster, torch_runtime(runtime))
    try:
        train = trainjob(ns, "train", runtime, nodes=2, gpus=4, priority=mid)
        train["spec"]["labels"] = {QUEUE_LABEL: "queue"}  # as the job webhook writes it: Trainer's JobSet carries it
        _created_in_turn("the TrainJob", lambda: create_trainjob(cluster, train),
                         lambda: workload_of_trainjob(cluster, ns, "train"))
        _created_in_turn("the JobSet", lambda: create_jobset(cluster, jobset(
            ns, "sweep", replicated("workers", replicas=2, pods=1, gpus=2), priority=mid)),
            lambda: workload_of_jobset(cluster, ns, "sweep"))
        _created_in_turn("the RayJob", lambda: create_ray(cluster, rayjob(
            ns, "tune", cluster_spec(worker_group("workers", replicas=2, gpus=2)), priority=mid)),
            lambda: workload_of(cluster, "RayJob", ns, "tune"))
        _created_in_turn("the pod group", lambda: create_pods(cluster, *group(ns, "serve", 2, gpus=2, priority=high,
                                                                               managed=True)),
                         lambda: workload_named(cluster, ns, "serve"))
        assert not any(holds(wl, "QuotaReserved") for wl in workloads(cluster, ns)), "admitted while held"

        rest(cluster).request("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{cq}",
                              body={"spec": {"stopPolicy": "None"}}, content_type=MERGE)
        serve = wait_for("the pod group admitted", lambda: holds(workload_named(cluster, ns, "serve"), "Admitted")
                         and workload_named(cluster, ns, "serve"), timeout=30)
        trained = wait_for("the TrainJob admitted", lambda: holds(workload_of_trainjob(cluster, ns, "train"),
                                                                 "Admitted") and workload_of_trainjob(cluster, ns,
                                                                                                      "train"),
                           timeout=30)
        swept = wait_for("the JobSet admitted", lambda: holds(workload_of_jobset(cluster, ns, "sweep"), "Admitted")
                         and workload_of_jobset(cluster, ns, "sweep"), timeout=30)
        assert set().union(*_flavors(serve).values()) == {on_demand.flavor}, _flavors(serve)
        assert _flavors(trained) == {"node": {spot.flavor}}
        assert _flavors(swept) == {"workers": {on_demand.flavor}}

        # placements: each kind's pods on the nodes of the flavor its Workload was given
        assert wait_for("the group's pods bound", lambda: _placed(pods_in(cluster, ns, "serve"), 2),
                        timeout=60) <= on_demand.nodes
        assert wait_for("the TrainJob's pods bound", lambda: _placed(trainjob_pods(cluster, ns, "train"), 2),
                        timeout=90) <= spot.nodes
        assert wait_for("the JobSet's pods bound", lambda: _placed(jobset_pods(cluster, ns, "sweep"), 2),
                        timeout=60) <= on_demand.nodes

        # the RayJob, last of the equals, waits: quota all used, still suspended, KubeRay made no cluster
        tune = workload_of(cluster, "RayJob", ns, "tune")
        assert tune is not None and not holds(tune, "QuotaReserved"), tune
        assert get(cluster, f"/apis/ray.io/v1/namespaces/{ns}/rayjobs/tune")["spec"]["suspend"] is True
        assert not rayclusters(cluster, ns)

        # children never queued: Trainer's JobSet (queue-labelled) and its Job, the JobSet's two Jobs
        jobsets = get(cluster, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets")["items"]
        assert sorted(j["metadata"]["name"] for j in jobsets) == ["sweep", "train"]
        assert len(get(cluster, f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]) == 3
        assert _owner_kinds(cluster, ns) == ["JobSet", "Pod", "RayJob", "TrainJob"]

        # the JobSet deleted: once its pods are gone its quota goes to the RayJob, on on-demand
        delete_jobset(cluster, ns, "sweep")
        tune = wait_for("the RayJob admitted", lambda: holds(workload_of(cluster, "RayJob", ns, "tune"), "Admitted")
                        and workload_of(cluster, "RayJob", ns, "tune"), timeout=60)
        assert _flavors(tune) == {"head": {on_demand.flavor}, "workers": {on_demand.flavor},
                                  "submitter": {on_demand.flavor}}
        name = wait_for("KubeRay's cluster", lambda: rayjob_cluster_name(cluster, ns, "tune"), timeout=60)
        assert wait_for("the Ray workers bound", lambda: _placed(ray_pods(cluster, ns, name, "workers"), 2),
                        timeout=60) <= on_demand.nodes
        assert wait_for("the Ray head bound", lambda: _placed(ray_pods(cluster, ns, name, "headgroup"), 1),
                        timeout=60) <= on_demand.nodes
        (child,) = rayclusters(cluster, ns)
        assert child["metadata"]["labels"].get(QUEUE_LABEL) == "queue"
        wait_for("the JobSet's Workload gone", lambda: "JobSet" not in _owner_kinds(cluster, ns), timeout=30)
        assert _owner_kinds(cluster, ns) == ["Pod", "RayJob", "TrainJob"], "a child of the RayJob got a Workload"

        # a second high-priority group arrives with the quota full: it preempts a mid job on the first flavor that
        # can make room (on-demand, where the RayJob is the only lower-priority holder); KubeRay tears the
        # cluster down, and the group runs on the freed on-demand nodes
        create_pods(cluster, *group(ns, "urgent", 2, gpus=2, priority=high, managed=True))
        evicted = wait_for("the RayJob preempted", lambda: holds(workload_of(cluster, "RayJob", ns, "tune"),
                                                                 "Evicted"), timeout=30)
        assert evicted["reason"] == "Preempted", evicted
        wait_for("KubeRay deleted the RayJob's cluster", lambda: not rayclusters(cluster, ns), timeout=60)
        urgent = wait_for("the urgent group admitted", lambda: holds(workload_named(cluster, ns, "urgent"),
                                                                     "Admitted") and workload_named(cluster, ns,
                                                                                                    "urgent"),
                          timeout=60)
        assert set().union(*_flavors(urgent).values()) == {on_demand.flavor}, _flavors(urgent)
        assert wait_for("the urgent group's pods bound", lambda: _placed(pods_in(cluster, ns, "urgent"), 2),
                        timeout=60) <= on_demand.nodes
        assert get(cluster, f"/apis/ray.io/v1/namespaces/{ns}/rayjobs/tune")["spec"]["suspend"] is True
        # the first group (same priority) and the TrainJob (on spot) kept their places throughout
        assert holds(workload_named(cluster, ns, "serve"), "Admitted")
        assert holds(workload_of_trainjob(cluster, ns, "train"), "Admitted")
        assert not holds(workload_of_trainjob(cluster, ns, "train"), "Evicted")
    finally:
        delete_runtime(cluster, runtime)
