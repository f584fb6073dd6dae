"""JobSet builders and reads for the admission-loop tests on the full rig, where the real JobSet controller runs
(no tests here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster_rig import get, rest
from envtest_rig import GPU, Envtest

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def replicated(name: str, *, replicas: int, pods: int, gpus: int,
               pod_annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A replicated job of ``replicas`` Jobs of ``pods`` pods of ``gpus`` GPUs each."""
    return {"name": name, "replicas": replicas, "template": {"spec": {
        "parallelism": pods, "completions": pods, "backoffLimit": 0,
        "template": {"metadata": {"annotations": dict(pod_annotations or {})}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": name, "image": "example.invalid/train:1", "resources": {
                "requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}}}}}


def jobset(ns: str, name: str, *rjobs: dict[str, Any], priority: str | None = None,
           suspend: bool = True) -> dict[str, Any]:
    """A JobSet in LocalQueue ``queue`` (created suspended, as gitopsq's webhook would make it)."""
    labels = {"kueue.x-k8s.io/queue-name": "queue"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"suspend": suspend, "replicatedJobs": list(rjobs)}}


def create_jobset(cluster: Envtest, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = rest(cluster).request(
        "POST", JOBSETS.format(ns=manifest["metadata"]["namespace"]), body=manifest)
    return created


def delete_jobset(cluster: Envtest, ns: str, name: str) -> None:
    rest(cluster).request("DELETE", f"{JOBSETS.format(ns=ns)}/{name}",
                          body={"propagationPolicy": "Background"})


def get_jobset(cluster: Envtest, ns: str, name: str) -> dict[str, Any]:
    return get(cluster, f"{JOBSETS.format(ns=ns)}/{name}")


def workload_of_jobset(cluster: Envtest, ns: str, name: str) -> dict[str, Any] | None:
    for wl in get(cluster, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"]:
        if any(r.get("kind") == "JobSet" and r.get("name") == name for r in wl["metadata"].get("ownerReferences")
               or ()):
            return dict(wl)
    return None


def jobset_pods(cluster: Envtest, ns: str, name: str, rjob: str | None = None) -> list[dict[str, Any]]:
    selector = f"{NAME_LABEL}%3D{name}" + (f",{RJOB_LABEL}%3D{rjob}" if rjob else "")
    items: list[dict[str, Any]] = get(cluster, f"/api/v1/namespaces/{ns}/pods?labelSelector={selector}")["items"]
    return items
