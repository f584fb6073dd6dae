"""The Workload the reconciler creates for a job (Kueue's ``ConstructWorkload``): its name, priority, pod sets,
owner reference and finalizer; and the flavors' node labels and tolerations its admission gives each pod set."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import cast

from gitopsq.admission_loop.integrations import Integration, PodSetPlacement
from gitopsq.admission_loop.lifecycle import max_execution_seconds
from gitopsq.admission_loop.live_workload import JOB_UID_LABEL, PRIORITY_LABEL, QUEUE_LABEL, RESOURCE_IN_USE
from gitopsq.admission_loop.ports import WatchCache
from gitopsq.api.pod_object import PodTemplateSpec, Toleration
from gitopsq.api.queue_objects import PriorityClassObject, ResourceFlavorObject
from gitopsq.api.raw_objects import KubeObject
from gitopsq.api.workload_object import PriorityClassRef, WorkloadObject, WorkloadSpec
from gitopsq.cluster.kinds import WORKLOAD

_PREFIX_MAX = 253 - 1 - 5


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """Kueue's Workload name for an owner: ``<kind>-<name>`` (≤ 247 chars) + ``-`` + 5 hex of a SHA-1."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode(), usedforsecurity=False).hexdigest()
    return f"{f'{kind.lower()}-{name}'[:_PREFIX_MAX]}-{digest[:5]}"


def resolve_priority(cache: WatchCache, job_labels: Mapping[str, str], template: PodTemplateSpec
                     ) -> tuple[int, PriorityClassRef | None]:
    """(priority, priorityClassRef or None): WorkloadPriorityClass label, else the pod template's
    PriorityClass, else the cluster's global default PriorityClass, else 0."""
    wpc_name = job_labels.get(PRIORITY_LABEL)
    if wpc_name:
        wpc = cast(PriorityClassObject | None, cache.get("workloadpriorityclasses", wpc_name))
        if wpc is not None:
            return int(wpc.get("value") or 0), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                "name": wpc_name}
    pc_name = ((template.get("spec") or {}).get("priorityClassName")) or ""
    if pc_name:
        pc = cast(PriorityClassObject | None, cache.get("priorityclasses", pc_name))
        if pc is not None:
            return int(pc.get("value") or 0), {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                               "name": pc_name}
    defaults = sorted(int(p.get("value") or 0) for p in cast(list[PriorityClassObject], cache.items("priorityclasses"))
                      if p.get("globalDefault"))
    return (defaults[0] if defaults else 0), None


def new_workload(integration: Integration, job: KubeObject, cache: WatchCache) -> WorkloadObject:
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    pod_sets = integration.pod_sets(job)
    priority, ref = resolve_priority(cache, labels, pod_sets[0].get("template") or {})
    spec: WorkloadSpec = {"queueName": labels[QUEUE_LABEL], "podSets": pod_sets, "priority": priority}
    if ref is not None:
        spec["priorityClassRef"] = ref
    limit = max_execution_seconds(labels)
    if limit is not None:
        spec["maximumExecutionTimeSeconds"] = limit
    return {"apiVersion": WORKLOAD.api_version, "kind": WORKLOAD.kind, "metadata": {
        "name": workload_name(integration.kind, integration.group, meta["name"], meta["uid"]),
        "namespace": meta["namespace"], "labels": {JOB_UID_LABEL: meta["uid"]}, "finalizers": [RESOURCE_IN_USE],
        "ownerReferences": [{"apiVersion": f"{integration.group}/{integration.version}", "kind": integration.kind,
                             "name": meta["name"], "uid": meta["uid"], "controller": True,
                             "blockOwnerDeletion": True}]}, "spec": spec}


def placements(cache: WatchCache, workload: WorkloadObject) -> tuple[PodSetPlacement, ...]:
    """Node labels and tolerations of the flavors assigned to each pod set."""
    admission = (workload.get("status") or {}).get("admission") or {}
    out = []
    for psa in admission.get("podSetAssignments") or ():
        selector: dict[str, str] = {}
        tolerations: list[Toleration] = []
        for flavor in dict.fromkeys((psa.get("flavors") or {}).values()):
            rf = cast(ResourceFlavorObject, cache.get("resourceflavors", flavor) or {})
            rf_spec = rf.get("spec") or {}
            selector.update(rf_spec.get("nodeLabels") or {})
            tolerations.extend(t for t in rf_spec.get("tolerations") or () if t not in tolerations)
        out.append(PodSetPlacement(psa.get("name", "main"), int(psa.get("count") or 0), selector, tuple(tolerations)))
    return tuple(out)
