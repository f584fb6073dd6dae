"""The full rig is a cluster: the real Job controller makes pods, the real scheduler places them on KWOK's fake
GPU nodes, KWOK runs and finishes them after the time the test sets, and the Job completes on its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from envtest_rig import EXIT_CODE, GPU, RUN_FOR, FullCluster, NodePools, fake_node, wait_for

pytestmark = pytest.mark.envtest

SPOT_TAINT = {"key": "example.com/spot", "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Pool:
    label: str  # the value of the nodes' `pool` label
    nodes: frozenset[str]


@pytest.fixture(scope="module")
def gpu_pools(full_cluster: FullCluster) -> Iterator[dict[str, Pool]]:
    """8 nodes of 8 GPUs on demand and 8 tainted spot nodes of 8 GPUs, for the whole module."""
    pools = NodePools(full_cluster)
    suffix = uuid.uuid4().hex[:6]
    found = {}
    for capacity, taints in (("on-demand", []), ("spot", [SPOT_TAINT])):
        label = f"{capacity}-{suffix}"
        names = pools.add(label, 8, gpus=8, labels={"example.com/capacity": capacity}, taints=taints)
        found[capacity] = Pool(label, frozenset(names))
    yield found
    full_cluster.delete_nodes(pools.created)


def _job(name: str, *, pods: int, gpus: int, pool: str, run_for: str | None, spot: bool = False) -> dict[str, Any]:
    annotations = {RUN_FOR: run_for} if run_for else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"pool": pool},
                    "tolerations": [{**SPOT_TAINT, "operator": "Equal"}] if spot else [],
                    "containers": [
                        {
                            "name": "train",
                            "image": "example.invalid/train:1",
                            "resources": {"requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}},
                        }
                    ],
                },
            },
        },
    }


def _pods(cluster: FullCluster, namespace: str, job: str) -> list[Any]:
    from kubernetes import client

    with cluster.api_client() as api:
        return list(client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={job}").items)


def _read_job(cluster: FullCluster, namespace: str, name: str) -> Any:
    from kubernetes import client

    with cluster.api_client() as api:
        return client.BatchV1Api(api).read_namespaced_job(name, namespace)


def _create_job(cluster: FullCluster, namespace: str, manifest: dict[str, Any]) -> None:
    from kubernetes import client

    with cluster.api_client() as api:
        client.BatchV1Api(api).create_namespaced_job(namespace, manifest)


def _condition(job: Any, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in (job.status.conditions or []))


@pytest.mark.parametrize("capacity", ["on-demand", "spot"])
def test_gpu_job_is_placed_on_its_pool_runs_and_completes(
    full_cluster: FullCluster, gpu_pools: dict[str, Pool], capacity: str
) -> None:
    """A 4-pod GPU Job gets its pods from the Job controller, each bound by the scheduler to a node of the
    selected pool, made Running+Ready by KWOK, finished after the annotated 3 s, and the Job turns Complete."""
    namespace = full_cluster.new_namespace("gpu")
    pool = gpu_pools[capacity]
    job = _job("train", pods=4, gpus=4, pool=pool.label, run_for="3s", spot=capacity == "spot")
    _create_job(full_cluster, namespace, job)

    most_ready, seen_ready = 0, set()

    def complete() -> Any:
        nonlocal most_ready
        for pod in _pods(full_cluster, namespace, "train"):
            if pod.status.phase == "Running" and _condition(pod, "Ready"):
                seen_ready.add(pod.metadata.name)
        job = _read_job(full_cluster, namespace, "train")
        most_ready = max(most_ready, job.status.ready or 0)
        return job if _condition(job, "Complete") else None

    job = wait_for("Job train to complete", complete, timeout=60)
    assert job.status.succeeded == 4
    assert len(seen_ready) == 4, "every pod was Running and Ready before it finished"
    assert most_ready == 4, "the Job controller counted all four pods Ready while they ran"
    pods = _pods(full_cluster, namespace, "train")
    assert len(pods) == 4
    for pod in pods:
        assert pod.spec.node_name in pool.nodes
        assert pod.status.phase == "Succeeded"
        finished = pod.status.container_statuses[0].state.terminated
        assert finished.exit_code == 0
        ran = (finished.finished_at - finished.started_at).total_seconds()
        assert 2 <= ran <= 10, f"pod {pod.metadata.name} ran {ran}s, not about the annotated 3s"


def test_job_that_cannot_fit_leaves_its_pods_unschedulable(
    full_cluster: FullCluster, gpu_pools: dict[str, Pool]
) -> None:
    """Pods asking for more GPUs than any node has stay Pending with the scheduler's Unschedulable reason."""
    namespace = full_cluster.new_namespace("nofit")
    pool = gpu_pools["on-demand"].label
    _create_job(full_cluster, namespace, _job("huge", pods=2, gpus=16, pool=pool, run_for="1s"))

    def unschedulable() -> list[Any] | None:
        pods = _pods(full_cluster, namespace, "huge")
        marked = [
            c for p in pods for c in (p.status.conditions or [])
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        ]  # fmt: skip
        return marked if len(pods) == 2 and len(marked) == 2 else None

    conditions = wait_for("both pods to be reported Unschedulable", unschedulable, timeout=30)
    assert all(f"Insufficient {GPU}" in c.message for c in conditions)
    assert all(p.spec.node_name is None and p.status.phase == "Pending" for p in _pods(full_cluster, namespace, "huge"))
    job = _read_job(full_cluster, namespace, "huge")
    assert not job.status.ready and not job.status.succeeded


def test_suspending_a_running_job_makes_the_job_controller_delete_its_pods(
    full_cluster: FullCluster, gpu_pools: dict[str, Pool]
) -> None:
    """A running Job (pods without a run time run until deleted) set to suspend loses its pods, which KWOK
    removes once the Job controller has released them, and the Job reports Suspended."""
    from kubernetes import client

    namespace = full_cluster.new_namespace("suspend")
    pool = gpu_pools["on-demand"].label
    _create_job(full_cluster, namespace, _job("serve", pods=2, gpus=1, pool=pool, run_for=None))
    wait_for(
        "two running pods",
        lambda: len([p for p in _pods(full_cluster, namespace, "serve") if p.status.phase == "Running"]) == 2,
        timeout=30,
    )
    assert _read_job(full_cluster, namespace, "serve").status.start_time is not None
    with full_cluster.api_client() as api:
        client.BatchV1Api(api).patch_namespaced_job("serve", namespace, {"spec": {"suspend": True}})
    wait_for("the pods to be gone", lambda: not _pods(full_cluster, namespace, "serve"), timeout=30)

    def suspended() -> Any:
        job = _read_job(full_cluster, namespace, "serve")
        return job if _condition(job, "Suspended") else None

    job = wait_for("the Job to report Suspended", suspended, timeout=30)
    assert not job.status.active


def test_plain_pods_finish_with_the_annotated_exit_code(full_cluster: FullCluster, node_pools: NodePools) -> None:
    """A pod no Job owns also runs for its annotated time: exit code 0 ends Succeeded, any other Failed."""
    from kubernetes import client

    pool = f"plain-{uuid.uuid4().hex[:6]}"
    nodes = set(node_pools.add(pool, 1, cpu="4"))
    namespace = full_cluster.new_namespace("plain")
    with full_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for name, code in (("ok", "0"), ("crash", "3")):
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "annotations": {RUN_FOR: "1s", EXIT_CODE: code}},
                "spec": {"nodeSelector": {"pool": pool}, "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "example.invalid/app:1"}]},
            })  # fmt: skip

    def finished() -> dict[str, Any] | None:
        with full_cluster.api_client() as api:
            pods = {p.metadata.name: p for p in client.CoreV1Api(api).list_namespaced_pod(namespace).items}
        done = all(p.status.phase in {"Succeeded", "Failed"} for p in pods.values())
        return pods if len(pods) == 2 and done else None

    pods = wait_for("both pods to finish", finished, timeout=30)
    assert pods["ok"].status.phase == "Succeeded"
    assert pods["crash"].status.phase == "Failed"
    assert pods["crash"].status.container_statuses[0].state.terminated.exit_code == 3
    assert {p.spec.node_name for p in pods.values()} <= nodes


def test_deleting_a_job_and_a_namespace_cleans_up_through_the_controllers(
    full_cluster: FullCluster, gpu_pools: dict[str, Pool]
) -> None:
    """The garbage collector removes a deleted Job's pods, and the namespace controller finishes deleting a
    namespace (both stay forever on the bare rig)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    namespace = full_cluster.new_namespace("gc")
    pool = gpu_pools["on-demand"].label
    _create_job(full_cluster, namespace, _job("idle", pods=1, gpus=1, pool=pool, run_for=None))
    running = lambda: [p for p in _pods(full_cluster, namespace, "idle") if p.status.phase == "Running"]  # noqa: E731
    wait_for("a running pod", running)
    with full_cluster.api_client() as api:
        client.BatchV1Api(api).delete_namespaced_job("idle", namespace, propagation_policy="Background")
    wait_for("the orphaned pod to be collected", lambda: not _pods(full_cluster, namespace, "idle"), timeout=30)

    def namespace_gone() -> bool:
        with full_cluster.api_client() as api:
            try:
                client.CoreV1Api(api).read_namespace(namespace)
            except ApiException as err:
                return err.status == 404
        return False

    with full_cluster.api_client() as api:
        client.CoreV1Api(api).delete_namespace(namespace)
    wait_for(f"namespace {namespace} to be deleted", namespace_gone, timeout=60)


def test_node_applied_with_kubectl_and_only_a_capacity_becomes_ready_with_that_allocatable(
    full_cluster: FullCluster,
) -> None:
    """A Node applied by kubectl with the fake-node annotation and just a capacity (as docs/envtest.md shows)
    is made Ready by KWOK with allocatable equal to that capacity, the pod count defaulting to 110."""
    import json

    from kubernetes import client

    name = f"applied-{uuid.uuid4().hex[:6]}"
    manifest = fake_node(name, gpus=8)
    manifest["status"] = {"capacity": {"cpu": "96", "memory": "1Ti", GPU: "8"}}
    full_cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    try:

        def ready() -> Any:
            with full_cluster.api_client() as api:
                node = client.CoreV1Api(api).read_node(name)
            conditions = node.status.conditions or []
            return node if any(c.type == "Ready" and c.status == "True" for c in conditions) else None

        node = wait_for(f"KWOK to make {name} Ready", ready, timeout=30)
        assert node.status.allocatable == {"cpu": "96", "memory": "1Ti", GPU: "8", "pods": "110"}
        assert node.spec.taints is None or not any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints)
    finally:
        full_cluster.delete_nodes([name])
