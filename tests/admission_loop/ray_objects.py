"""RayJob and RayCluster builders and reads for the admission-loop tests (no tests here): small enough to compose a
mixed walkthrough. On the full rig the real KubeRay operator (hack/kuberay) makes the RayJob's RayCluster, the
head and worker pods and the submitter Job; KWOK runs the pods on fake nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cluster_rig import get, rest
from envtest_rig import GPU, Envtest

RAYJOBS = "/apis/ray.io/v1/namespaces/{ns}/rayjobs"
RAYCLUSTERS = "/apis/ray.io/v1/namespaces/{ns}/rayclusters"
IMAGE = "example.invalid/ray:2.9"


def pod_template(container: str, *, cpu: str = "1", gpus: int = 0,
                 annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu}}
    if gpus:
        resources["requests"][GPU] = str(gpus)
        resources["limits"] = {GPU: str(gpus)}
    return {"metadata": {"annotations": dict(annotations or {})},
            "spec": {"containers": [{"name": container, "image": IMAGE, "resources": resources}]}}


def worker_group(name: str, *, replicas: int, gpus: int, cpu: str = "1",
                 annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A worker group of ``replicas`` pods of ``gpus`` GPUs each (fixed size: min = max = replicas)."""
    return {"groupName": name, "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas,
            "rayStartParams": {}, "template": pod_template("ray-worker", cpu=cpu, gpus=gpus, annotations=annotations)}


def cluster_spec(*groups: dict[str, Any], head_gpus: int = 0, autoscaling: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {},
                                              "template": pod_template("ray-head", gpus=head_gpus)},
                            "workerGroupSpecs": list(groups)}
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def _labels(queue: str | None, priority: str | None) -> dict[str, str]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return labels


def rayjob(ns: str, name: str, spec: dict[str, Any], *, queue: str | None = "queue", priority: str | None = None,
           suspend: bool | None = True) -> dict[str, Any]:
    """A RayJob running ``spec``'s cluster in LocalQueue ``queue`` (K8sJobMode, the cluster deleted at the end as
    Kueue requires), created suspended unless ``suspend`` is None (left to the webhook). Its submitter asks for CPU
    only (KubeRay's default one also asks for memory, which the tests' ClusterQueues do not cover)."""
    submitter = pod_template("ray-job-submitter", cpu="500m")
    submitter["spec"]["restartPolicy"] = "Never"
    body: dict[str, Any] = {"entrypoint": "python -c 'print(1)'", "shutdownAfterJobFinishes": True,
                            "rayClusterSpec": spec, "submitterPodTemplate": submitter}
    if suspend is not None:
        body["suspend"] = suspend
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": ns, "labels": _labels(queue, priority)}, "spec": body}


def raycluster(ns: str, name: str, spec: dict[str, Any], *, queue: str | None = "queue",
               priority: str | None = None, suspend: bool | None = True) -> dict[str, Any]:
    """A standalone RayCluster in LocalQueue ``queue``."""
    body = dict(spec)
    if suspend is not None:
        body["suspend"] = suspend
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns, "labels": _labels(queue, priority)}, "spec": body}


def create(cluster: Envtest, manifest: dict[str, Any]) -> dict[str, Any]:
    path = RAYJOBS if manifest["kind"] == "RayJob" else RAYCLUSTERS
    created: dict[str, Any] = rest(cluster).request("POST", path.format(ns=manifest["metadata"]["namespace"]),
                                                    body=manifest)
    return created


def delete(cluster: Envtest, kind: str, ns: str, name: str) -> None:
    path = RAYJOBS if kind == "RayJob" else RAYCLUSTERS
    rest(cluster).request("DELETE", f"{path.format(ns=ns)}/{name}", body={"propagationPolicy": "Background"})


def get_rayjob(cluster: Envtest, ns: str, name: str) -> dict[str, Any]:
    return get(cluster, f"{RAYJOBS.format(ns=ns)}/{name}")


def get_raycluster(cluster: Envtest, ns: str, name: str) -> dict[str, Any]:
    return get(cluster, f"{RAYCLUSTERS.format(ns=ns)}/{name}")


def rayclusters(cluster: Envtest, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, RAYCLUSTERS.format(ns=ns))["items"]
    return items


def workload_of(cluster: Envtest, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    for wl in get(cluster, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"]:
        if any(r.get("kind") == kind and r.get("name") == name for r in wl["metadata"].get("ownerReferences") or ()):
            return dict(wl)
    return None


def ray_pods(cluster: Envtest, ns: str, cluster_name: str, group: str | None = None) -> list[dict[str, Any]]:
    """The pods KubeRay made for RayCluster ``cluster_name`` (``group``: ``headgroup`` or a worker group)."""
    selector = f"ray.io/cluster%3D{cluster_name}" + (f",ray.io/group%3D{group}" if group else "")
    items: list[dict[str, Any]] = get(cluster, f"/api/v1/namespaces/{ns}/pods?labelSelector={selector}")["items"]
    return items


def rayjob_cluster_name(cluster: Envtest, ns: str, name: str) -> str | None:
    """The RayCluster KubeRay made for the RayJob (its status names it), or None before it has."""
    return (get_rayjob(cluster, ns, name).get("status") or {}).get("rayClusterName") or None


def nodes(pods: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(p["spec"].get("nodeName")) for p in pods}
