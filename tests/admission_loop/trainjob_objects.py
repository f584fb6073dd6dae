"""Kubeflow TrainJob objects for the admission-loop tests (no tests here): a torch ClusterTrainingRuntime written
for gitopsq's tests, TrainJobs that use it, and reads of what Trainer and the JobSet controller make from them.
Used by test_full_rig_trainjob*.py and the mixed walkthrough."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster_rig import get, rest
from envtest_rig import GPU, RUN_FOR, Envtest

TRAINER_GROUP = "trainer.kubeflow.org"
API_VERSION = f"{TRAINER_GROUP}/v1alpha1"
TRAINJOBS = f"/apis/{API_VERSION}/namespaces/{{ns}}/trainjobs"
CLUSTER_RUNTIMES = f"/apis/{API_VERSION}/clustertrainingruntimes"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def torch_runtime(name: str, *, run_for: str | None = None, num_nodes: int = 1,
                  initializer: bool = False) -> dict[str, Any]:
    """A ClusterTrainingRuntime shaped like Trainer's ``torch-distributed``: one trainer job ``node`` (its
    container ``node``) of ``num_nodes`` pods by default; its pods run for ``run_for`` on KWOK (for ever when
    None). ``initializer`` adds a one-pod ``dataset-initializer`` job (1 CPU, no GPU) in front of it."""
    annotations = {RUN_FOR: run_for} if run_for else {}
    rjobs: list[dict[str, Any]] = []
    if initializer:
        rjobs.append({"name": "dataset-initializer", "template": {
            "metadata": {"labels": {ANCESTOR_LABEL: "dataset-initializer"}},
            "spec": {"template": {"metadata": {"annotations": dict(annotations)}, "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "dataset-initializer", "image": "example.invalid/init:1",
                                "resources": {"requests": {"cpu": "1"}}}]}}}}})
    rjobs.append({"name": "node", "template": {
        "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
        "spec": {"template": {"metadata": {"annotations": dict(annotations)}, "spec": {
            "containers": [{"name": "node", "image": "example.invalid/torch:2.7",
                            "command": ["torchrun", "train.py"]}]}}}}})
    return {"apiVersion": API_VERSION, "kind": "ClusterTrainingRuntime", "metadata": {"name": name},
            "spec": {"mlPolicy": {"numNodes": num_nodes, "torch": {"numProcPerNode": "auto"}},
                     "template": {"spec": {"replicatedJobs": rjobs}}}}


def trainjob(ns: str, name: str, runtime: str, *, nodes: int, gpus: int, queue: str = "queue",
             priority: str | None = None, suspend: bool = True,
             overrides: list[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A TrainJob of ``nodes`` nodes of ``gpus`` GPUs (and 1 CPU) each on ``runtime``, in LocalQueue ``queue``
    (created suspended, as gitopsq's webhook makes a queued one)."""
    labels = {QUEUE_LABEL: queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime, "apiGroup": TRAINER_GROUP,
                                           "kind": "ClusterTrainingRuntime"},
                            "trainer": {"numNodes": nodes, "resourcesPerNode": resources},
                            "suspend": suspend}
    if overrides:
        spec["podSpecOverrides"] = [dict(o) for o in overrides]
    return {"apiVersion": API_VERSION, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec}


def create_runtime(cluster: Envtest, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = rest(cluster).request("POST", CLUSTER_RUNTIMES, body=manifest)
    return created


def delete_runtime(cluster: Envtest, name: str) -> None:
    rest(cluster).request("DELETE", f"{CLUSTER_RUNTIMES}/{name}")


def create_trainjob(cluster: Envtest, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = rest(cluster).request(
        "POST", TRAINJOBS.format(ns=manifest["metadata"]["namespace"]), body=manifest)
    return created


def delete_trainjob(cluster: Envtest, ns: str, name: str) -> None:
    rest(cluster).request("DELETE", f"{TRAINJOBS.format(ns=ns)}/{name}", body={"propagationPolicy": "Background"})


def get_trainjob(cluster: Envtest, ns: str, name: str) -> dict[str, Any]:
    return get(cluster, f"{TRAINJOBS.format(ns=ns)}/{name}")


def workload_of_trainjob(cluster: Envtest, ns: str, name: str) -> dict[str, Any] | None:
    """The Workload a TrainJob owns, or None."""
    for wl in get(cluster, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"]:
        if any(r.get("kind") == "TrainJob" and r.get("name") == name for r in wl["metadata"].get("ownerReferences")
               or ()):
            return dict(wl)
    return None


def trainjob_pods(cluster: Envtest, ns: str, name: str) -> list[dict[str, Any]]:
    """The pods of the TrainJob's JobSet (named after the TrainJob)."""
    items: list[dict[str, Any]] = get(
        cluster, f"/api/v1/namespaces/{ns}/pods?labelSelector={JOBSET_NAME_LABEL}%3D{name}")["items"]
    return items
