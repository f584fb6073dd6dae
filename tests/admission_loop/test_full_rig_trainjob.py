"""Kubeflow TrainJobs on the live loop and the full rig, with the real Trainer controller manager (built from
github.com/kubeflow/trainer/v2) making JobSets that the real JobSet controller runs: one Workload per TrainJob
whose pods land on the admitted GPU flavor's nodes, preempted and brought back, all or nothing under
waitForPodsReady; the TrainJob's JobSet and Jobs never queued themselves."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_rig import get, holds, wait_for, workloads
from envtest_rig import FullCluster, NodePools
from gpu_rig import gpu_pools, gpu_queue_yaml, namespace, running, setup
from running_loop import FAST, RunningLoop, running_on_clean
from trainjob_objects import (
    QUEUE_LABEL,
    create_runtime,
    create_trainjob,
    delete_runtime,
    delete_trainjob,
    get_trainjob,
    torch_runtime,
    trainjob,
    trainjob_pods,
    workload_of_trainjob,
)

from gitopsq.admission_loop.integrations.trainjob import OVERRIDE_MARK
from gitopsq.admission_loop.options import RequeuingStrategy, WaitForPodsReady

pytestmark = pytest.mark.envtest

WITH_TRAINJOB = dataclasses.replace(FAST, integrations=("batch/job", "jobset.x-k8s.io/jobset",
                                                        "trainer.kubeflow.org/trainjob"))


@pytest.fixture
def trainjob_loop(full_kueue: FullCluster, trainer_cluster: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop with the batch/job, JobSet and TrainJob integrations on the full rig (JobSet and
    Trainer controllers on)."""
    with running_on_clean(full_kueue, WITH_TRAINJOB) as running_loop:
        yield running_loop


@pytest.fixture
def runtimes(trainer_cluster: FullCluster) -> Iterator[list[str]]:
    """Names of the ClusterTrainingRuntimes a test made (cluster-scoped), deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        delete_runtime(trainer_cluster, name)


def _runtime(cluster: FullCluster, made: list[str], **shape: Any) -> str:
    name = f"torch-{uuid.uuid4().hex[:6]}"
    create_runtime(cluster, torch_runtime(name, **shape))
    made.append(name)
    return name


def _nodes(pods: list[dict[str, Any]] | Any) -> set[str]:
    return {p["spec"]["nodeName"] for p in pods}


def test_trainjob_runs_on_the_gpu_flavor_as_one_workload(trainjob_loop: RunningLoop, node_pools: NodePools,
                                                         runtimes: list[str]) -> None:
    """A TrainJob of two 4-GPU nodes on a torch runtime becomes one Workload with pod set ``node`` (2); only the
    spot GPU flavor has quota, so gitopsq's podSpecOverride carries that flavor's node label and toleration,
    Trainer's JobSet runs both pods on the spot nodes, and neither the JobSet (which carries the queue label, as
    Kueue's webhook writes it into spec.labels) nor its Job gets a Workload."""
    cluster: FullCluster = node_pools.cluster
    pools = gpu_pools(node_pools, {"on-demand": (1, 4), "spot": (2, 4)})
    runtime = _runtime(cluster, runtimes)
    with namespace(cluster, "tj-place") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pools["spot"], 8)]))
        manifest = trainjob(ns, "train", runtime, nodes=2, gpus=4)
        manifest["spec"]["labels"] = {QUEUE_LABEL: "queue"}
        create_trainjob(cluster, manifest)
        wl = wait_for("the TrainJob admitted", lambda: holds(workload_of_trainjob(cluster, ns, "train"), "Admitted")
                      and workload_of_trainjob(cluster, ns, "train"), timeout=30)
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
        assert {f for a in wl["status"]["admission"]["podSetAssignments"] for f in a["flavors"].values()} == \
            {pools["spot"].flavor}
        started = wait_for("the TrainJob unsuspended", lambda: get_trainjob(cluster, ns, "train")["spec"].get(
            "suspend") is False and get_trainjob(cluster, ns, "train"))
        assert started["metadata"]["annotations"][OVERRIDE_MARK] == "0"
        (override,) = started["spec"]["podSpecOverrides"]
        assert override["targetJobs"] == [{"name": "node"}]
        assert override["nodeSelector"] == {"pool": pools["spot"].label}
        pods = wait_for("both nodes running", lambda: len(running(trainjob_pods(cluster, ns, "train"))) == 2
                        and running(trainjob_pods(cluster, ns, "train")), timeout=90)
        assert _nodes(pods) <= pools["spot"].nodes
        jobsets = get(cluster, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets")["items"]
        assert [j["metadata"]["labels"].get(QUEUE_LABEL) for j in jobsets] == ["queue"]
        assert len(get(cluster, f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]) == 1
        assert len(workloads(cluster, ns)) == 1, "the TrainJob's JobSet or Job got a Workload of its own"


def test_preempted_trainjob_is_suspended_restored_and_comes_back(trainjob_loop: RunningLoop,
                                                                node_pools: NodePools, runtimes: list[str]) -> None:
    """A running low-priority TrainJob holding all 8 GPUs is preempted by a high-priority one: it is suspended,
    its pods go, gitopsq's overrides and index annotation are removed; the high one runs and completes (Trainer
    marks it Complete), and the low one is admitted again and runs once more on the GPU nodes."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (2, 4)})["spot"]
    forever, short = _runtime(cluster, runtimes), _runtime(cluster, runtimes, run_for="3s")
    with namespace(cluster, "tj-preempt") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 8)], preemption="LowerPriority",
                                      priorities={f"low-{ns}": 10, f"high-{ns}": 100}))
        create_trainjob(cluster, trainjob(ns, "low", forever, nodes=2, gpus=4, priority=f"low-{ns}"))
        wait_for("low running", lambda: len(running(trainjob_pods(cluster, ns, "low"))) == 2, timeout=90)
        create_trainjob(cluster, trainjob(ns, "high", short, nodes=2, gpus=4, priority=f"high-{ns}"))
        evicted = wait_for("low evicted", lambda: holds(workload_of_trainjob(cluster, ns, "low"), "Evicted"),
                           timeout=30)
        assert evicted["reason"] == "Preempted"
        wait_for("low suspended", lambda: get_trainjob(cluster, ns, "low")["spec"].get("suspend") is True)
        wait_for("high running", lambda: len(running(trainjob_pods(cluster, ns, "high"))) == 2, timeout=90)
        low = get_trainjob(cluster, ns, "low")
        assert OVERRIDE_MARK not in (low["metadata"].get("annotations") or {}), "override index not removed"
        assert not low["spec"].get("podSpecOverrides"), "gitopsq's overrides not removed"
        assert not running(trainjob_pods(cluster, ns, "low")), "low's pods still run beside high's"
        wait_for("high complete", lambda: holds(get_trainjob(cluster, ns, "high"), "Complete"), timeout=90)
        wait_for("high's Workload finished", lambda: holds(workload_of_trainjob(cluster, ns, "high"), "Finished"),
                 timeout=30)
        wait_for("low admitted again", lambda: holds(workload_of_trainjob(cluster, ns, "low"), "Admitted"),
                 timeout=30)
        again = wait_for("low running again", lambda: len(running(trainjob_pods(cluster, ns, "low"))) == 2
                         and running(trainjob_pods(cluster, ns, "low")), timeout=90)
        assert _nodes(again) <= spot.nodes
        delete_trainjob(cluster, ns, "high")


def test_trainjob_the_nodes_cannot_hold_is_evicted_whole_by_pods_ready(full_kueue: FullCluster,
                                                                       trainer_cluster: FullCluster,
                                                                       node_pools: NodePools,
                                                                       runtimes: list[str]) -> None:
    """Quota admits a TrainJob of three 4-GPU nodes but the pool's two nodes hold only two of its pods: with
    waitForPodsReady the Workload is evicted (PodsReadyTimeout) and the TrainJob suspended whole — none of its
    pods keeps running."""
    cluster: FullCluster = node_pools.cluster
    gang = WaitForPodsReady(enable=True, timeout=3.0, requeuing_strategy=RequeuingStrategy(
        backoff_limit_count=1, backoff_base_seconds=30, backoff_max_seconds=60))
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    runtime = _runtime(cluster, runtimes)
    full_kueue.delete_all()
    try:
        with RunningLoop(full_kueue, dataclasses.replace(WITH_TRAINJOB, wait_for_pods_ready=gang)), \
                namespace(cluster, "tj-gang") as ns:
            setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 12)]))
            create_trainjob(cluster, trainjob(ns, "gang", runtime, nodes=3, gpus=4))
            wait_for("two of three running", lambda: len(running(trainjob_pods(cluster, ns, "gang"))) == 2,
                     timeout=90)
            evicted = wait_for("evicted by the timeout", lambda: holds(workload_of_trainjob(cluster, ns, "gang"),
                                                                       "Evicted"), timeout=30)
            assert evicted["reason"] == "PodsReadyTimeout"
            wait_for("the TrainJob suspended", lambda: get_trainjob(cluster, ns, "gang")["spec"].get("suspend")
                     is True)
            wait_for("no pod of it left running", lambda: not running(trainjob_pods(cluster, ns, "gang")),
                     timeout=60)
    finally:
        full_kueue.delete_all()
