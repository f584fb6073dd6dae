"""ray.io RayCluster (Kueue's ``ray.io/raycluster``): a standalone Ray cluster as one Workload — pod set ``head``
and one per worker group (ray_spec.py).

KubeRay's ``spec.suspend`` (a pointer: unset means running) deletes every pod of the cluster and moves
``status.state`` to ``suspended`` once none is left; unsuspending makes KubeRay create them again from the
templates the start patch wrote. A RayCluster never finishes (Kueue's ``Finished`` is always false): its
Workload holds quota until the cluster is deleted. Pods ready means ``status.state == ready`` (KubeRay sets it
once the head and every worker are running and ready). A RayCluster a managed RayJob made is that RayJob's
child (ancestry.py): it is never queued itself, its RayJob's Workload covers its pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from gitopsq.admission_loop.integrations import ray_spec
from gitopsq.admission_loop.integrations.base import PodSetPlacement, Rule
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.ray_objects import RayClusterObject, RayClusterSpec
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind

RAYCLUSTER_KIND: Final = Kind("RayCluster", "ray.io", "v1", "rayclusters", True, synced=False)
CLUSTER_LABEL: Final = "ray.io/cluster"  # on every pod of a RayCluster: its name


def _cluster(job: Mapping[str, object]) -> RayClusterObject:
    return cast(RayClusterObject, job)  # the edge: an object of the rayclusters resource


def _spec(job: Mapping[str, object]) -> RayClusterSpec:
    return _cluster(job).get("spec") or {}


def _state(job: KubeObject) -> str:
    return str((_cluster(job).get("status") or {}).get("state") or "")


class RayCluster:
    framework = "ray.io/raycluster"
    kind = RAYCLUSTER_KIND.kind
    group = RAYCLUSTER_KIND.group
    version = RAYCLUSTER_KIND.version
    resource = RAYCLUSTER_KIND.plural
    crd: str | None = "rayclusters.ray.io"
    # watched; suspended, unsuspended, its head and worker templates given the flavors' placement; its pods
    # counted (by the ray.io/cluster label) before a deleted cluster's Workload lets go of its quota
    rules: tuple[Rule, ...] = (Rule("ray.io", ("rayclusters",), ("get", "list", "watch", "patch")),
                               Rule("", ("pods",), ("list",)))
    webhook: bool = True

    @property
    def kind_info(self) -> Kind:
        return RAYCLUSTER_KIND

    def collection_path(self, namespace: str) -> str:
        return RAYCLUSTER_KIND.collection_path(namespace)

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        return ray_spec.pod_sets(_spec(job))

    def is_suspended(self, job: KubeObject) -> bool:
        return bool(_spec(job).get("suspend"))

    def active_pods(self, job: KubeObject) -> int:
        """1 until KubeRay reports a suspended cluster's pods gone (``state: suspended``; a cluster suspended since
        its creation has no state yet): the quota of an evicted cluster is released only then."""
        return 0 if self.is_suspended(job) and _state(job) in ("", "suspended") else 1

    def pod_selector(self, name: str, uid: str) -> str:
        return f"{CLUSTER_LABEL}={name}"

    def pods_ready(self, job: KubeObject) -> bool:
        return _state(job) == "ready"

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        return None  # a Ray cluster runs until it is deleted

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        return {"spec": {"suspend": False, **ray_spec.start_spec(_spec(job), placements)}}

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        return {"spec": {"suspend": True}}

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        return None

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        spec = ray_spec.restore_spec(_spec(job), original)
        return {"spec": spec} if spec is not None else None

    def refusals(self, job: Mapping[str, object]) -> list[str]:
        """Why the job webhook refuses this queued RayCluster (Kueue's RayCluster webhook)."""
        return ray_spec.refusals(_spec(job), "spec")
