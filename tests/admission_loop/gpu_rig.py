"""Builders and reads for the admission-loop tests on the full rig (no tests here): GPU flavors bound to pools of
KWOK nodes, a ClusterQueue over them, GPU Jobs, and the pods the real Job controller and scheduler made."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cluster_rig import apply, get, rest
from envtest_rig import GPU, FullCluster, NodePools

SPOT_TAINT = {"key": "example.com/spot", "value": "true", "effect": "NoSchedule"}
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class Pool:
    """A pool of fake nodes and the ResourceFlavor that places pods on it."""

    flavor: str
    label: str  # value of the nodes' `pool` label (the flavor's nodeLabels)
    nodes: frozenset[str]
    spot: bool


def gpu_pools(node_pools: NodePools, shapes: Mapping[str, tuple[int, int]]) -> dict[str, Pool]:
    """For each name (``on-demand`` / ``spot``): ``count`` nodes of ``gpus`` GPUs labelled with a unique pool, and
    the name of the flavor that selects them (made by `flavors_yaml`). Spot nodes are tainted."""
    suffix = uuid.uuid4().hex[:6]
    out = {}
    for name, (count, gpus) in shapes.items():
        spot = name == "spot"
        label = f"{name}-{suffix}"
        nodes = node_pools.add(label, count, gpus=gpus, cpu="16", labels={"example.com/capacity": name},
                               taints=[SPOT_TAINT] if spot else None)
        out[name] = Pool(f"{name}-{suffix}", label, frozenset(nodes), spot)
    return out


def flavors_yaml(pools: Sequence[Pool]) -> str:
    """A ResourceFlavor per pool: nodeLabels select the pool; spot flavors tolerate the spot taint."""
    docs = []
    for p in pools:
        tolerations = (f"  tolerations: [{{key: {SPOT_TAINT['key']}, operator: Equal, value: \"true\", "
                       f"effect: {SPOT_TAINT['effect']}}}]\n") if p.spot else ""
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: {p.flavor}}}\n"
                    f"spec:\n  nodeLabels: {{pool: {p.label}}}\n{tolerations}")
    return "---\n".join(docs)


def gpu_queue_yaml(ns: str, cq: str, quotas: Sequence[tuple[Pool, int]], *, preemption: str = "Never",
                   priorities: Mapping[str, int] | None = None) -> str:
    """The pools' flavors, a ClusterQueue over ``cpu`` and GPUs with ``(pool, gpus)`` quotas in that order
    (ample CPU), the WorkloadPriorityClasses, and LocalQueue ``queue`` in ``ns``."""
    docs = [flavors_yaml([p for p, _ in quotas])]
    for name, value in (priorities or {}).items():
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {{name: {name}}}\n"
                    f"value: {value}\n")
    flavors = "".join(f"    - name: {p.flavor}\n      resources: [{{name: cpu, nominalQuota: \"64\"}}, "
                      f"{{name: \"{GPU}\", nominalQuota: \"{gpus}\"}}]\n" for p, gpus in quotas)
    docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {cq}}}\nspec:\n"
                f"  namespaceSelector: {{}}\n  preemption: {{withinClusterQueue: {preemption}}}\n"
                f"  resourceGroups:\n  - coveredResources: [cpu, \"{GPU}\"]\n    flavors:\n{flavors}")
    docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: queue, namespace: {ns}}}\n"
                f"spec: {{clusterQueue: {cq}}}\n")
    return "---\n".join(docs)


def gpu_job(ns: str, name: str, *, pods: int, gpus: int, priority: str | None = None,
            annotations: Mapping[str, str] | None = None, pod_annotations: Mapping[str, str] | None = None,
            labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A suspended Job of ``pods`` pods of ``gpus`` GPUs each in LocalQueue ``queue``; its pods run until deleted
    unless ``pod_annotations`` set KWOK's ``gitopsq.dev/run-for``."""
    meta_labels = {"kueue.x-k8s.io/queue-name": "queue", **(labels or {})}
    if priority:
        meta_labels["kueue.x-k8s.io/priority-class"] = priority
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": meta_labels,
                         "annotations": dict(annotations or {})},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"metadata": {"annotations": dict(pod_annotations or {})}, "spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "train", "image": "example.invalid/train:1", "resources": {
                             "requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}}}}


def pods_of(cluster: FullCluster, ns: str, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{job}")[
        "items"]
    return items


def running(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods KWOK made Running and Ready (not being deleted)."""
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or ())]


def patch_workload(cluster: FullCluster, ns: str, name: str, body: Mapping[str, Any]) -> None:
    rest(cluster).request("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{name}",
                          body=dict(body), content_type=MERGE)


@contextmanager
def namespace(cluster: FullCluster, prefix: str) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount), deleted afterwards with everything in it, so no Job
    of this test outlives it into the next."""
    ns = cluster.new_namespace(prefix)
    try:
        yield ns
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def setup(cluster: FullCluster, text: str) -> None:
    apply(cluster, text)
