"""Builders and reads for plain Pods and pod groups on the full rig (no tests here), composable with the other
integrations' builders (jobset_rig.py, gpu_rig.py) for a mixed walkthrough.

`pod` makes a queued Pod as a user would write it; ``managed=True`` also adds what gitopsq's pod webhook adds
(label, finalizer, gate, role hash), for tests that do not register the webhook. `group` makes the members of
a pod group. Kueue never recreates a preempted group's pods: `recreate` does it, as the user's controller would.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from cluster_rig import get, rest
from envtest_rig import GPU, Envtest

from gitopsq.errors import ClusterError
from gitopsq.manifests.pod_marks import FINALIZER, GATE, GROUP_NAME, MANAGED_LABEL, ROLE_HASH, TOTAL_COUNT, role_hash

MERGE = "application/merge-patch+json"
PODS = "/api/v1/namespaces/{ns}/pods"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"


def pod(ns: str, name: str, *, gpus: int, cpu: str = "1", priority: str | None = None, queue: str = "queue",
        managed: bool = False, annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Pod in LocalQueue ``queue`` asking for ``gpus`` GPUs; it runs until deleted unless ``annotations`` set
    KWOK's ``gitopsq.dev/run-for``."""
    meta_labels = {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}
    if priority:
        meta_labels["kueue.x-k8s.io/priority-class"] = priority
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
        "name": "train", "image": "example.invalid/train:1",
        "resources": {"requests": {"cpu": cpu, GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": meta_labels,
                                                           "annotations": dict(annotations or {})}, "spec": spec}
    if managed:
        out["metadata"]["labels"][MANAGED_LABEL] = "true"
        out["metadata"]["finalizers"] = [FINALIZER]
        out["metadata"]["annotations"][ROLE_HASH] = role_hash(spec)
        spec["schedulingGates"] = [{"name": GATE}]
    return out


def group(ns: str, name: str, members: int, *, gpus: int, total: int | None = None, prefix: str = "",
          **kwargs: Any) -> list[dict[str, Any]]:
    """``members`` Pods of pod group ``name`` (total count ``total``, default ``members``), named
    ``<name>-<prefix><i>``."""
    out = []
    for i in range(members):
        p = pod(ns, f"{name}-{prefix}{i}", gpus=gpus, **kwargs)
        p["metadata"]["annotations"][GROUP_NAME] = name
        p["metadata"]["annotations"][TOTAL_COUNT] = str(total or members)
        out.append(p)
    return out


def create(cluster: Envtest, *pods: dict[str, Any]) -> list[dict[str, Any]]:
    return [rest(cluster).request("POST", PODS.format(ns=p["metadata"]["namespace"]), body=p) for p in pods]


def pods_in(cluster: Envtest, ns: str, group_name: str | None = None) -> list[dict[str, Any]]:
    """The namespace's pods (of one group when named), sorted by name."""
    items: list[dict[str, Any]] = get(cluster, PODS.format(ns=ns))["items"]
    if group_name is not None:
        items = [p for p in items if (p["metadata"].get("annotations") or {}).get(GROUP_NAME) == group_name]
    return sorted(items, key=lambda p: p["metadata"]["name"])


def get_pod(cluster: Envtest, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return get(cluster, f"{PODS.format(ns=ns)}/{name}")
    except ClusterError as err:
        if err.status == 404:
            return None
        raise


def workload_named(cluster: Envtest, ns: str, name: str) -> dict[str, Any] | None:
    """A pod group's Workload (named after the group), or None."""
    try:
        return get(cluster, f"{WORKLOADS.format(ns=ns)}/{name}")
    except ClusterError as err:
        if err.status == 404:
            return None
        raise


def workload_of_pod(cluster: Envtest, ns: str, name: str) -> dict[str, Any] | None:
    """A single pod's Workload (owned by it as controller), or None."""
    for wl in get(cluster, WORKLOADS.format(ns=ns))["items"]:
        if any(r.get("kind") == "Pod" and r.get("name") == name and r.get("controller")
               for r in wl["metadata"].get("ownerReferences") or ()):
            return dict(wl)
    return None


def gated(p: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in (p.get("spec") or {}).get("schedulingGates") or ())


def recreate(cluster: Envtest, pods: list[dict[str, Any]], *, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Create ``pods`` again once the old ones of the same names are gone (what a user's controller does after
    Kueue deleted a preempted group)."""
    ns = pods[0]["metadata"]["namespace"]
    deadline = time.monotonic() + timeout
    names = {p["metadata"]["name"] for p in pods}
    while {p["metadata"]["name"] for p in pods_in(cluster, ns)} & names:
        if time.monotonic() > deadline:
            raise AssertionError(f"old pods {sorted(names)} still there after {timeout}s")
        time.sleep(0.2)
    return create(cluster, *pods)


def release(cluster: Envtest, ns: str) -> None:
    """Drop gitopsq's finalizer from every pod left in ``ns`` (the loop has stopped; the namespace can go)."""
    api = rest(cluster)
    for p in pods_in(cluster, ns):
        if FINALIZER in (p["metadata"].get("finalizers") or ()):
            rest_finalizers = [f for f in p["metadata"]["finalizers"] if f != FINALIZER]
            try:
                api.request("PATCH", f"{PODS.format(ns=ns)}/{p['metadata']['name']}",
                            body={"metadata": {"finalizers": rest_finalizers or None}}, content_type=MERGE)
            except ClusterError as err:
                if err.status != 404:
                    raise
