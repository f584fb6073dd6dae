"""jobset.x-k8s.io JobSet (Kueue's ``jobset.x-k8s.io/jobset``): one pod set per replicated job, named after it,
of ``replicas × min(parallelism, completions)`` pods, so a driver and its workers are one Workload admitted all
or nothing, each replicated job on the flavor its pod set was given.

Starting writes each pod set's node selector and tolerations into its replicated job's pod template and sets
``spec.suspend: false``; the JobSet controller creates (or resumes) the child Jobs from those templates, clearing
their ``startTime`` itself (jobset pkg/controllers/jobset_controller.go ``resumeJob``), so no status patch is
needed here. Stopping suspends the JobSet — its controller suspends the child Jobs, whose controller deletes
the pods — and restores the templates from the Workload's pod sets once no child Job is active. The child Jobs
are never queued: they are owned by a managed JobSet (ancestry.py).
"""

from __future__ import annotations

import copy
from typing import Final, cast

from gitopsq.admission_loop.integrations.base import PodSetPlacement, Rule, place_pod_spec
from gitopsq.api.job_objects import JobSetObject, JobSpec, ReplicatedJob
from gitopsq.api.pod_object import PodSpec
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind

JOBSET_KIND: Final = Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True, synced=False)
NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"  # on the JobSet's child Jobs and their pods


def jobset_of(job: KubeObject) -> JobSetObject:
    return cast(JobSetObject, job)  # the edge: an object of the jobsets resource


def _replicated(jobset: JobSetObject) -> list[ReplicatedJob]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or ())


def _job_spec(rjob: ReplicatedJob) -> JobSpec:
    return (rjob.get("template") or {}).get("spec") or {}


def _pods_per_job(rjob: ReplicatedJob) -> int:
    spec = _job_spec(rjob)
    parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


def _replicas(rjob: ReplicatedJob) -> int:
    value = rjob.get("replicas")
    return 1 if value is None else int(value)


def _pod_spec(rjob: ReplicatedJob) -> PodSpec:
    return (_job_spec(rjob).get("template") or {}).get("spec") or {}


def active_jobs(jobset: JobSetObject) -> int:
    """Child Jobs with a pod still pending or running (the JobSet status counts Jobs, not pods)."""
    return sum(int(s.get("active") or 0) for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ())


def jobs_ready(jobset: JobSetObject) -> bool:
    """Every child Job ready or succeeded: ready + succeeded Jobs reach the sum of the replicas."""
    status = {s.get("name"): s for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ()}
    want = sum(_replicas(r) for r in _replicated(jobset))
    have = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in status.values())
    return have >= want


class JobSet:
    framework = "jobset.x-k8s.io/jobset"
    kind = JOBSET_KIND.kind
    group = JOBSET_KIND.group
    version = JOBSET_KIND.version
    resource = JOBSET_KIND.plural
    crd: str | None = "jobsets.jobset.x-k8s.io"
    # watched; suspended, unsuspended, its templates given the flavors' node selectors and tolerations; its
    # pods counted (by the JobSet name label) before a deleted JobSet's Workload lets go of its quota
    rules: tuple[Rule, ...] = (Rule("jobset.x-k8s.io", ("jobsets",), ("get", "list", "watch", "patch")),
                               Rule("", ("pods",), ("list",)))
    webhook: bool = True

    @property
    def kind_info(self) -> Kind:
        return JOBSET_KIND

    def collection_path(self, namespace: str) -> str:
        return JOBSET_KIND.collection_path(namespace)

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        out: list[PodSet] = []
        for rjob in _replicated(jobset_of(job)):
            template = copy.deepcopy(_job_spec(rjob).get("template") or {})
            template.get("metadata", {}).pop("creationTimestamp", None)
            out.append({"name": str(rjob.get("name")), "count": _replicas(rjob) * _pods_per_job(rjob),
                        "template": template})
        return out

    def is_suspended(self, job: KubeObject) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def active_pods(self, job: KubeObject) -> int:
        """Child Jobs with a pod still pending or running (the JobSet status counts Jobs, not pods): quota
        waits for these to be gone."""
        return active_jobs(jobset_of(job))

    def pod_selector(self, name: str, uid: str) -> str:
        return f"{NAME_LABEL}={name}"

    def pods_ready(self, job: KubeObject) -> bool:
        """Every child Job ready or succeeded (Kueue's ``JobSet.PodsReady``: ready + succeeded Jobs reach the
        sum of the replicas)."""
        return jobs_ready(jobset_of(job))

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        for c in (jobset_of(job).get("status") or {}).get("conditions") or ():
            if c.get("status") == "True" and c.get("type") in ("Completed", "Failed"):
                reason = "Succeeded" if c["type"] == "Completed" else "Failed"
                return reason, str(c.get("message") or ("JobSet finished successfully" if reason == "Succeeded"
                                                        else "JobSet failed"))
        return None

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        """The whole ``replicatedJobs`` list (a merge patch replaces lists), each template with its pod set's
        node labels and tolerations added."""
        by_name = {p.name: p for p in placements}
        rjobs = []
        for source in _replicated(jobset_of(job)):
            rjob = copy.deepcopy(source)
            placement = by_name.get(str(rjob.get("name")))
            if placement is not None:
                place_pod_spec(rjob.setdefault("template", {}).setdefault("spec", {}).setdefault(
                    "template", {}).setdefault("spec", {}), placement)
            rjobs.append(rjob)
        return {"spec": {"suspend": False, "replicatedJobs": rjobs}}

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        return {"spec": {"suspend": True}}

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        return None  # the JobSet controller clears its child Jobs' startTime when it resumes them

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        """Each replicated job's pod template node selector and tolerations as the Workload recorded them; None
        when they already match, and (not yet) while a child Job is active. Skipped when the pod sets no longer
        match the replicated jobs (Kueue does the same)."""
        rjobs = _replicated(jobset_of(job))
        wanted: dict[str, PodSpec] = {str(p.get("name")): (p.get("template") or {}).get("spec") or {} for p in original}
        if set(wanted) != {str(r.get("name")) for r in rjobs}:
            return None
        changed = False
        out = []
        for source in rjobs:
            have, want = _pod_spec(source), wanted[str(source.get("name"))]
            rjob = copy.deepcopy(source)
            if dict(have.get("nodeSelector") or {}) != dict(want.get("nodeSelector") or {}) or \
                    list(have.get("tolerations") or []) != list(want.get("tolerations") or []):
                changed = True
                pod_spec = rjob["template"]["spec"]["template"].setdefault("spec", {})
                if want.get("nodeSelector"):
                    pod_spec["nodeSelector"] = copy.deepcopy(want["nodeSelector"])
                else:
                    pod_spec.pop("nodeSelector", None)
                if want.get("tolerations"):
                    pod_spec["tolerations"] = copy.deepcopy(want["tolerations"])
                else:
                    pod_spec.pop("tolerations", None)
            out.append(rjob)
        if not changed:
            return None
        if self.active_pods(job):
            return None
        return {"spec": {"replicatedJobs": out}}
