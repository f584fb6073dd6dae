"""trainer.kubeflow.org TrainJob (Kueue's ``trainer.kubeflow.org/trainjob``, Kubeflow Trainer v2.0): one Workload
per TrainJob, a pod set per replicated job of the JobSet its training runtime renders (trainjob_render.py).

A TrainJob names a ClusterTrainingRuntime or a namespaced TrainingRuntime; the Trainer controller makes a
JobSet from the runtime's template and the TrainJob's overrides, suspended while the TrainJob is, and keeps its
``suspend`` in step with the TrainJob's. So the integration reads each TrainJob with its runtime and that JobSet
from the watch cache (`with_related`): the pod sets come from the runtime, whether pods are still active or
ready from the JobSet (Trainer v2.0 fills no job counts in the TrainJob's own status).

Starting appends one ``spec.podSpecOverrides`` entry per pod set (its replicated job as the target, the flavors'
node selector and tolerations), records where gitopsq's entries begin in the annotation
``kueue.x-k8s.io/trainjob-override-idx`` (Kueue's name and meaning) and unsuspends, in one patch; Trainer then
writes the overrides into the JobSet's pod templates and resumes it. Stopping suspends the TrainJob — Trainer
suspends the JobSet, whose controller suspends its Jobs — and once no child Job is active cuts the overrides
back to the user's and drops the annotation. Finished comes from the TrainJob's ``Complete``/``Failed``
conditions (Trainer copies them from the JobSet). The JobSet and its Jobs are never queued themselves: their
controller chain leads to a managed TrainJob (ancestry.py).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Final, cast

from gitopsq.admission_loop.integrations.base import CacheGet, PodSetPlacement, Rule
from gitopsq.admission_loop.integrations.jobset import JOBSET_KIND, active_jobs, jobs_ready
from gitopsq.admission_loop.integrations.trainjob_render import (
    CLUSTER_TRAINING_RUNTIME,
    OVERRIDE_MARK,
    RELATED,
    TRAINING_RUNTIME,
    render_pod_sets,
    runtime_ref,
    user_overrides,
)
from gitopsq.api.job_objects import JobSetObject
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.trainjob_object import PodSpecOverride, Related, TrainingRuntimeObject, TrainJobObject
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind

TRAINJOB_KIND: Final = Kind("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", True, synced=False)
JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"  # the JobSet is named after the TrainJob
def _trainjob(job: KubeObject) -> TrainJobObject:
    return cast(TrainJobObject, job)  # the edge: an object of the trainjobs resource, as `with_related` made it


def _related(job: KubeObject) -> Related | None:
    related = _trainjob(job).get("gitopsq.dev/related")
    return related if isinstance(related, Mapping) else None


def _child_jobset(job: KubeObject) -> JobSetObject | None:
    related = _related(job)
    child = related.get("jobset") if related else None
    return child if isinstance(child, Mapping) else None


class TrainJob:
    framework = "trainer.kubeflow.org/trainjob"
    kind = TRAINJOB_KIND.kind
    group = TRAINJOB_KIND.group
    version = TRAINJOB_KIND.version
    resource = TRAINJOB_KIND.plural
    crd: str | None = "trainjobs.trainer.kubeflow.org"
    # watched, suspended and given overrides; its runtimes read for the pod sets; its JobSet read for active and
    # ready Jobs; its pods counted (by the JobSet name label) before a deleted TrainJob's Workload lets go
    rules: tuple[Rule, ...] = (
        Rule("trainer.kubeflow.org", ("trainjobs",), ("get", "list", "watch", "patch")),
        Rule("trainer.kubeflow.org", ("trainingruntimes", "clustertrainingruntimes"), ("get", "list", "watch")),
        Rule("jobset.x-k8s.io", ("jobsets",), ("get", "list", "watch")),
        Rule("", ("pods",), ("list",)),
    )
    webhook: bool = True
    queue_label_in_spec: bool = True  # the job webhook copies the queue label into spec.labels, as Kueue's does
    related: tuple[Kind, ...] = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET_KIND)

    @property
    def kind_info(self) -> Kind:
        return TRAINJOB_KIND

    def collection_path(self, namespace: str) -> str:
        return TRAINJOB_KIND.collection_path(namespace)

    def with_related(self, job: KubeObject, get: CacheGet) -> KubeObject:
        """The TrainJob with its runtime (None while it does not exist) and the JobSet Trainer made for it (None
        until Trainer has made it; a JobSet of the same name controlled by another object is not it)."""
        meta = job.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        kind, runtime_name = runtime_ref(_trainjob(job))
        runtime = get(TRAINING_RUNTIME.plural, f"{namespace}/{runtime_name}") if kind == TRAINING_RUNTIME.kind \
            else get(CLUSTER_TRAINING_RUNTIME.plural, runtime_name)
        child = get(JOBSET_KIND.plural, f"{namespace}/{name}")
        owners = (child or {}).get("metadata", {}).get("ownerReferences") or ()
        if not any(r.get("controller") and r.get("uid") == meta.get("uid") for r in owners):
            child = None
        related: Related = {"runtime": cast(TrainingRuntimeObject | None, runtime),
                            "jobset": cast(JobSetObject | None, child)}
        return cast(KubeObject, {**job, RELATED: related})

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        related = _related(job)
        return render_pod_sets(_trainjob(job), related.get("runtime") if related else None)

    def is_suspended(self, job: KubeObject) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def active_pods(self, job: KubeObject) -> int:
        """Child Jobs with a pod still pending or running, from the JobSet's status (and the TrainJob's own job
        counts, which later Trainer releases fill): quota waits for these to be gone."""
        own = sum(int(s.get("active") or 0) for s in (_trainjob(job).get("status") or {}).get("jobsStatus") or ())
        child = _child_jobset(job)
        return max(own, active_jobs(child) if child is not None else 0)

    def pod_selector(self, name: str, uid: str) -> str:
        return f"{JOBSET_NAME_LABEL}={name}"

    def pods_ready(self, job: KubeObject) -> bool:
        """Every child Job of the TrainJob's JobSet ready or succeeded (Kueue's ``TrainJob.PodsReady``); False
        until Trainer has made the JobSet."""
        child = _child_jobset(job)
        return child is not None and jobs_ready(child)

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        for c in (_trainjob(job).get("status") or {}).get("conditions") or ():
            if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
                reason = "Succeeded" if c["type"] == "Complete" else "Failed"
                return reason, str(c.get("message") or ("TrainJob finished successfully" if reason == "Succeeded"
                                                        else "TrainJob failed"))
        return None

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        """The user's overrides followed by one per pod set (its flavors' node selector and tolerations), the
        index where gitopsq's begin, and ``suspend: false``."""
        overrides = [copy.deepcopy(o) for o in user_overrides(_trainjob(job))]
        mark = len(overrides)
        for placement in placements:
            entry: PodSpecOverride = {"targetJobs": [{"name": placement.name}]}
            if placement.node_selector:
                entry["nodeSelector"] = dict(placement.node_selector)
            if placement.tolerations:
                entry["tolerations"] = [t.copy() for t in placement.tolerations]
            overrides.append(entry)
        return {"metadata": {"annotations": {OVERRIDE_MARK: str(mark)}},
                "spec": {"suspend": False, "podSpecOverrides": overrides}}

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        return {"spec": {"suspend": True}}

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        return None  # Trainer re-renders the JobSet while suspended; the JobSet controller clears its Jobs'

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        """The overrides cut back to the user's and the index annotation dropped; None when gitopsq added none,
        and (not yet) while a child Job is active or the JobSet's state is unknown (a job read without its
        related objects)."""
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if OVERRIDE_MARK not in annotations or _related(job) is None or self.active_pods(job):
            return None
        kept = [copy.deepcopy(o) for o in user_overrides(_trainjob(job))]
        return {"metadata": {"annotations": {OVERRIDE_MARK: None}}, "spec": {"podSpecOverrides": kept or None}}
