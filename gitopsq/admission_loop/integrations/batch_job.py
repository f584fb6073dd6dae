"""batch/v1 Job: one pod set ``main`` of ``min(parallelism, completions)`` pods (Kueue's job controller).

Stopping follows Kueue's order (``Job.Stop``): suspend (marking the Job ``kueue.x-k8s.io/stopping``), clear
``status.startTime`` through the status subresource, then restore the pod template and drop the mark. The API
server accepts edits of a suspended Job's node selector and tolerations only while ``startTime`` is unset, and
the Job controller never unsets it, so without the middle step a started Job could not be moved off a flavor.
Kubernetes 1.36 (gates ``MutableSchedulingDirectivesForSuspendedJobs``, beta) also accepts the edit of a started
Job once it is marked ``Suspended``, and on either rule only while ``status.active`` is 0 (k8s
pkg/registry/batch/job/strategy.go ``shouldAllowMutablePodTemplate``), so the restore waits for the Job
controller to have deleted the active pods; the quota is released after that anyway.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Final, cast

from gitopsq.admission_loop.integrations.base import PodSetPlacement, Rule
from gitopsq.admission_loop.partial import MIN_PARALLELISM, min_count
from gitopsq.api.job_objects import JobObject
from gitopsq.api.pod_object import PodSpec
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import JOB, Kind

STOPPING: Final = "kueue.x-k8s.io/stopping"


def _job(job: KubeObject) -> JobObject:
    return cast(JobObject, job)  # the edge: an object of the jobs resource


def _template_spec(job: KubeObject) -> PodSpec:
    return ((_job(job).get("spec") or {}).get("template") or {}).get("spec") or {}


def _annotations(job: KubeObject) -> Mapping[str, str]:
    return (job.get("metadata") or {}).get("annotations") or {}


class BatchJob:
    framework = "batch/job"
    kind = "Job"
    group = "batch"
    version = "v1"
    resource = "jobs"
    crd: str | None = None
    # watched; suspended, unsuspended, given the flavors' node selectors and tolerations; status.startTime unset
    # on a stop (Kueue's order); a deleted Job's pods counted before its Workload's finalizer comes off
    rules: tuple[Rule, ...] = (Rule("batch", ("jobs",), ("get", "list", "watch", "patch")),
                               Rule("batch", ("jobs/status",), ("patch",)), Rule("", ("pods",), ("list",)))
    webhook: bool = True

    @property
    def kind_info(self) -> Kind:
        return JOB

    def collection_path(self, namespace: str) -> str:
        return f"/apis/batch/v1/namespaces/{namespace}/jobs"

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        spec = _job(job).get("spec") or {}
        parallelism = spec.get("parallelism")
        parallelism = 1 if parallelism is None else int(parallelism)
        completions = spec.get("completions")
        count = parallelism if completions is None else min(parallelism, int(completions))
        template = copy.deepcopy(spec.get("template") or {})
        template.get("metadata", {}).pop("creationTimestamp", None)
        pod_set: PodSet = {"name": "main", "count": count, "template": template}
        least = min_count(_annotations(job), count)
        if least is not None:
            pod_set["minCount"] = least
        return [pod_set]

    def is_suspended(self, job: KubeObject) -> bool:
        """Suspended and not half-way through a stop (Kueue's ``IsSuspended``): a stop interrupted by a crash
        is redone."""
        return bool((job.get("spec") or {}).get("suspend")) and STOPPING not in _annotations(job)

    def active_pods(self, job: KubeObject) -> int:
        status = _job(job).get("status") or {}
        return int(status.get("active") or 0) + int(status.get("terminating") or 0)

    def pod_selector(self, name: str, uid: str) -> str:
        return f"batch.kubernetes.io/controller-uid={uid}"

    def pods_ready(self, job: KubeObject) -> bool:
        """Ready plus succeeded pods reach min(parallelism, completions) (Kueue's ``Job.PodsReady``)."""
        spec, status = _job(job).get("spec") or {}, _job(job).get("status") or {}
        completions = spec.get("completions")
        want = self._parallelism(job) if completions is None else min(self._parallelism(job), int(completions))
        uncounted = len((status.get("uncountedTerminatedPods") or {}).get("succeeded") or ())
        return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) + uncounted >= want

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        for c in (_job(job).get("status") or {}).get("conditions") or ():
            if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
                reason = "Succeeded" if c["type"] == "Complete" else "Failed"
                return reason, str(c.get("message") or ("Job finished successfully" if reason == "Succeeded"
                                                        else "Job failed"))
        return None

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        current = _template_spec(job)
        selector = dict(current.get("nodeSelector") or {})
        tolerations = list(current.get("tolerations") or [])
        for p in placements:
            selector.update(p.node_selector)
            tolerations.extend(t for t in p.tolerations if t not in tolerations)
        pod_spec: MergePatch = {"nodeSelector": selector or None}
        if tolerations:
            pod_spec["tolerations"] = tolerations
        spec: MergePatch = {"suspend": False, "template": {"spec": pod_spec}}
        admitted = next((p.count for p in placements if p.name == "main"), 0)
        if admitted and MIN_PARALLELISM in _annotations(job) and admitted != self._parallelism(job):
            spec["parallelism"] = admitted  # partial admission (Kueue's RunWithPodSetsInfo): only the pods admitted
        return {"spec": spec}

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        return {"metadata": {"annotations": {STOPPING: "true"}}, "spec": {"suspend": True}}

    def suspend_child_patch(self, job: KubeObject) -> MergePatch:
        """A managed parent's child is only suspended (no stop mark: the child's stop is never completed here)."""
        return {"spec": {"suspend": True}}

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        """A status-subresource merge patch unsetting ``startTime``, or None when it is unset."""
        if (_job(job).get("status") or {}).get("startTime") is None:
            return None
        return {"status": {"startTime": None}}

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        patch: MergePatch = {}
        if STOPPING in _annotations(job):
            patch["metadata"] = {"annotations": {STOPPING: None}}
        if not original:
            return patch or None
        want = (original[0].get("template") or {}).get("spec") or {}
        have = _template_spec(job)
        want_sel, have_sel = dict(want.get("nodeSelector") or {}), dict(have.get("nodeSelector") or {})
        want_tol, have_tol = list(want.get("tolerations") or []), list(have.get("tolerations") or [])
        spec: MergePatch = {}
        if int((_job(job).get("status") or {}).get("active") or 0):
            return None  # not yet, and the stop mark stays: template edits are refused while pods are active
        if want_sel != have_sel or want_tol != have_tol:
            selector: dict[str, str | None] = {k: None for k in have_sel if k not in want_sel}
            selector.update(want_sel)
            spec["template"] = {"spec": {"nodeSelector": selector or None, "tolerations": want_tol or None}}
        count = original[0].get("count")
        if original[0].get("minCount") is not None and count is not None and self._parallelism(job) != count:
            spec["parallelism"] = int(count)  # partial admission had reduced it
        if spec:
            patch["spec"] = spec
        return patch or None

    @staticmethod
    def _parallelism(job: KubeObject) -> int:
        value = (_job(job).get("spec") or {}).get("parallelism")
        return 1 if value is None else int(value)
