"""ray.io RayJob (Kueue's ``ray.io/rayjob``): the Ray cluster the job brings (``spec.rayClusterSpec``) as pod
sets ``head`` and one per worker group (ray_spec.py), plus, in KubeRay's default ``K8sJobMode``, a pod set
``submitter`` of 1 pod for the Job that submits the entrypoint (its template is ``spec.submitterPodTemplate``, or
KubeRay's default one: the head image, 500m CPU / 200Mi requested). In ``SidecarMode`` the submitter is a
container of the head pod, counted there.

KubeRay's ``spec.suspend`` deletes the RayJob's RayCluster and submitter Job and moves
``status.jobDeploymentStatus`` to ``Suspended``; unsuspending makes it create a new RayCluster from the spec the
start patch wrote (node selectors and tolerations per group; a default submitter template is written when there is
none, so the submitter lands on its flavor too). The job is active in every deployment status but ``New`` (empty)
and ``Suspended``, as Kueue reads it; it has ended when the status is ``Complete`` or ``Failed`` (Succeeded only
when ``jobStatus`` is ``SUCCEEDED``; the message is KubeRay's). Pods ready means the RayCluster status KubeRay
copies into the RayJob is ``ready``.

The RayCluster carries the RayJob's labels, queue name included, and the RayJob as controller owner: it is a
child (ancestry.py), never queued itself. A RayJob that names an existing cluster (``clusterSelector``) is not
Kueue's to manage (`skip`). Its pods carry only the generated cluster's name, so the start patch also labels the
pod templates with the job's UID (``JOB_UID_LABEL``) to find a deleted RayJob's pods.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Final, cast

from gitopsq.admission_loop.integrations import ray_spec
from gitopsq.admission_loop.integrations.base import PodSetPlacement, Rule
from gitopsq.api.pod_object import PodTemplateSpec, ResourceRequirements
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.ray_objects import RayClusterSpec, RayJobObject, RayJobSpec, RayJobStatus
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind

RAYJOB_KIND: Final = Kind("RayJob", "ray.io", "v1", "rayjobs", True, synced=False)
SUBMITTER: Final = "submitter"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
SUBMITTER_RESOURCES: Final[ResourceRequirements] = {"requests": {"cpu": "500m", "memory": "200Mi"},
                                                   "limits": {"cpu": "1", "memory": "1Gi"}}
IDLE: Final = ("", "New", "Suspended")  # deployment statuses with no pod (Kueue's IsActive)


def _spec(job: Mapping[str, object]) -> RayJobSpec:
    return cast(RayJobObject, job).get("spec") or {}  # the edge: an object of the rayjobs resource


def _cluster(job: KubeObject) -> RayClusterSpec:
    return _spec(job).get("rayClusterSpec") or {}


def _mode(job: KubeObject) -> str:
    return str(_spec(job).get("submissionMode") or "K8sJobMode")


def _status(job: KubeObject) -> RayJobStatus:
    return cast(RayJobObject, job).get("status") or {}


def submitter_template(job: KubeObject) -> PodTemplateSpec:
    """``spec.submitterPodTemplate``, or the one KubeRay would use: the head's image, KubeRay's resources."""
    given = _spec(job).get("submitterPodTemplate")
    if given:
        return copy.deepcopy(given)
    containers = (ray_spec.head_template(_cluster(job)).get("spec") or {}).get("containers") or [{}]
    return {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "ray-job-submitter", "image": containers[0].get("image", ""),
         "resources": copy.deepcopy(SUBMITTER_RESOURCES)}]}}


class RayJob:
    framework = "ray.io/rayjob"
    kind = RAYJOB_KIND.kind
    group = RAYJOB_KIND.group
    version = RAYJOB_KIND.version
    resource = RAYJOB_KIND.plural
    crd: str | None = "rayjobs.ray.io"
    # watched; suspended, unsuspended, its cluster and submitter templates given the flavors' placement; its
    # pods counted (by the job-UID label the start patch puts on them) before a deleted RayJob's Workload lets go
    rules: tuple[Rule, ...] = (Rule("ray.io", ("rayjobs",), ("get", "list", "watch", "patch")),
                               Rule("", ("pods",), ("list",)))
    webhook: bool = True

    @property
    def kind_info(self) -> Kind:
        return RAYJOB_KIND

    def collection_path(self, namespace: str) -> str:
        return RAYJOB_KIND.collection_path(namespace)

    def skip(self, job: KubeObject) -> bool:
        """A RayJob that runs on an existing cluster (``clusterSelector``) is not queued (Kueue's ``Skip``)."""
        return bool(_spec(job).get("clusterSelector"))

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        out = ray_spec.pod_sets(_cluster(job))
        if _mode(job) == "SidecarMode":
            out[0]["template"].setdefault("spec", {}).setdefault("containers", []).append(
                {"name": "ray-job-submitter", "resources": copy.deepcopy(SUBMITTER_RESOURCES)})
        if _mode(job) == "K8sJobMode":
            template = submitter_template(job)
            template.get("metadata", {}).pop("creationTimestamp", None)
            out.append({"name": SUBMITTER, "count": 1, "template": template})
        return out

    def is_suspended(self, job: KubeObject) -> bool:
        return bool(_spec(job).get("suspend"))

    def active_pods(self, job: KubeObject) -> int:
        """1 while KubeRay has not yet deleted the cluster and the submitter (deployment status neither new nor
        ``Suspended``): an evicted RayJob's quota waits for that."""
        return 0 if str(_status(job).get("jobDeploymentStatus") or "") in IDLE else 1

    def pod_selector(self, name: str, uid: str) -> str:
        return f"{JOB_UID_LABEL}={uid}"

    def pods_ready(self, job: KubeObject) -> bool:
        return (_status(job).get("rayClusterStatus") or {}).get("state") == "ready"

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        status = _status(job)
        deployment = status.get("jobDeploymentStatus")
        if deployment not in ("Complete", "Failed"):
            return None
        succeeded = status.get("jobStatus") == "SUCCEEDED"
        reason = "Succeeded" if succeeded else "Failed"
        return reason, str(status.get("message") or ("RayJob finished successfully" if succeeded else "RayJob failed"))

    def _uid_label(self, job: KubeObject) -> dict[str, str]:
        uid = (job.get("metadata") or {}).get("uid")
        return {JOB_UID_LABEL: str(uid)} if uid else {}

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        labels = self._uid_label(job)
        spec: MergePatch = {"suspend": False,
                                "rayClusterSpec": ray_spec.start_spec(_cluster(job), placements, labels)}
        if _mode(job) == "K8sJobMode":
            placement = next((p for p in placements if p.name == SUBMITTER), None)
            spec["submitterPodTemplate"] = ray_spec.merge_placement(submitter_template(job), placement, labels)
        return {"spec": spec}

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        return {"spec": {"suspend": True}}

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        return None

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        """The head, worker and submitter templates as the Workload recorded them (the job-UID label off); None
        when they match or the pod sets no longer match the job's groups."""
        keys = (JOB_UID_LABEL,)
        extra = (SUBMITTER,) if _mode(job) == "K8sJobMode" else ()
        cluster = ray_spec.restore_spec(_cluster(job), original, keys, extra)
        spec: MergePatch = {}
        if cluster is not None:
            spec["rayClusterSpec"] = cluster
        want = next((p.get("template") or {} for p in original if p.get("name") == SUBMITTER), None)
        have = _spec(job).get("submitterPodTemplate")
        if want is not None and have is not None and ray_spec.differs(have, want, keys):
            spec["submitterPodTemplate"] = ray_spec.template_patch(have, want, keys)
        return {"spec": spec} if spec else None

    def refusals(self, job: Mapping[str, object]) -> list[str]:
        """Why the job webhook refuses this queued RayJob (Kueue's RayJob webhook)."""
        spec = _spec(job)
        selector, cluster = spec.get("clusterSelector"), spec.get("rayClusterSpec")
        if selector and cluster:
            return ["spec.clusterSelector: Invalid value: a kueue managed job should not use an existing cluster"]
        if selector:
            return []
        if not cluster:
            return ["spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that "
                    "don't use clusterSelector"]
        out = []
        if not spec.get("shutdownAfterJobFinishes"):
            out.append("spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the "
                       "cluster after finishing")
        return out + ray_spec.refusals(cluster, "spec.rayClusterSpec")
