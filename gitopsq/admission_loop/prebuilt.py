"""Kueue's ``kueue.x-k8s.io/prebuilt-workload-name`` (label, or annotation): the job runs under a Workload made
beforehand instead of one the loop creates. Until that Workload exists the job is kept suspended; then the loop
adopts it — controller owner reference to the job and the ``kueue.x-k8s.io/job-uid`` label, as Kueue's
``ensurePrebuiltWorkloadOwnership`` — and from there it is the job's Workload like any other. A prebuilt Workload
already controlled by another object is not taken. A prebuilt Workload whose pod sets do not match the job
(workload_match.py) is marked ``Finished`` with reason ``OutOfSync`` and the job stays suspended, as Kueue's
``ensurePrebuiltWorkloadInSync`` does."""

from __future__ import annotations

from typing import Final

from gitopsq.admission_loop.integrations import Integration
from gitopsq.admission_loop.live_workload import JOB_UID_LABEL
from gitopsq.api.raw_objects import KubeObject, MergePatch, OwnerReference
from gitopsq.api.workload_object import WorkloadObject

PREBUILT: Final = "kueue.x-k8s.io/prebuilt-workload-name"
# The Finished condition (reason, message) of a prebuilt Workload that does not match its job (workload_match.py)
OUT_OF_SYNC: Final = ("OutOfSync", "The prebuilt workload is out of sync with its user job")


def prebuilt_name(job: KubeObject) -> str | None:
    meta = job.get("metadata") or {}
    return ((meta.get("labels") or {}).get(PREBUILT) or (meta.get("annotations") or {}).get(PREBUILT)) or None


def adoption_patch(integration: Integration, job: KubeObject, workload: WorkloadObject) -> MergePatch | None:
    """A merge patch making ``workload`` the job's (owner reference, job-uid label), or None when another object
    controls it already."""
    meta, wl_meta = job["metadata"], workload.get("metadata") or {}
    refs: list[OwnerReference] = [r.copy() for r in wl_meta.get("ownerReferences") or ()]
    if any(r.get("controller") for r in refs):
        return None
    refs.append({"apiVersion": f"{integration.group}/{integration.version}", "kind": integration.kind,
                 "name": meta["name"], "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True})
    return {"metadata": {"ownerReferences": refs, "labels": {JOB_UID_LABEL: meta["uid"]},
                         "resourceVersion": wl_meta.get("resourceVersion")}}
