"""The part a RayJob and a RayCluster share: a ``RayClusterSpec`` (KubeRay ``ray.io/v1``) as Kueue's pod sets.

A cluster is one pod set ``head`` of 1 pod and one pod set per worker group, named after the group, of
``replicas`` (1 when unset) × ``numOfHosts`` pods — the head and its workers are one Workload, admitted all or
nothing, each group on the flavor its pod set was given. Kueue gives Ray pod sets no ``minCount``. With in-tree
autoscaling the head pod also runs KubeRay's autoscaler sidecar (500m CPU / 512Mi unless
``autoscalerOptions.resources`` says otherwise), so the head pod set counts it; Kueue's webhooks refuse
autoscaling on a queued job anyway (`refusals`), because a cluster that grows past its admission would use quota
it was never given.

Starting merges each pod set's node selector and tolerations into its group's pod template (and an optional
label, see rayjob.py); restoring puts back what the Workload recorded. A merge patch replaces lists, so the
worker groups are always sent whole.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Final

from gitopsq.admission_loop.integrations.base import PodSetPlacement, place_pod_spec
from gitopsq.api.pod_object import PodTemplateSpec, ResourceRequirements
from gitopsq.api.raw_objects import MergePatch
from gitopsq.api.ray_objects import RayClusterSpec, WorkerGroupSpec
from gitopsq.api.workload_object import PodSet

HEAD: Final = "head"
MAX_POD_SETS: Final = 18  # a Workload's limit (Kueue's MaxPodSets)
AUTOSCALER_RESOURCES: Final[ResourceRequirements] = {"requests": {"cpu": "500m", "memory": "512Mi"},
                               "limits": {"cpu": "500m", "memory": "512Mi"}}


def workers(spec: RayClusterSpec) -> list[WorkerGroupSpec]:
    return list(spec.get("workerGroupSpecs") or ())


def worker_count(group: WorkerGroupSpec) -> int:
    """``replicas`` (1 when unset) times ``numOfHosts`` when that is above 1 (Kueue's effectiveWorkerCount)."""
    replicas = 1 if group.get("replicas") is None else int(group["replicas"])
    hosts = int(group.get("numOfHosts") or 1)
    return replicas * hosts if hosts > 1 else replicas


def _template(source: PodTemplateSpec | None) -> PodTemplateSpec:
    template = copy.deepcopy(source or {})
    template.get("metadata", {}).pop("creationTimestamp", None)
    return template


def head_template(spec: RayClusterSpec) -> PodTemplateSpec:
    return (spec.get("headGroupSpec") or {}).get("template") or {}


def pod_sets(spec: RayClusterSpec) -> list[PodSet]:
    """``head`` (with the autoscaler sidecar when in-tree autoscaling is on), then one per worker group."""
    head = _template(head_template(spec))
    if spec.get("enableInTreeAutoscaling"):
        resources = (spec.get("autoscalerOptions") or {}).get("resources") or AUTOSCALER_RESOURCES
        head.setdefault("spec", {}).setdefault("containers", []).append(
            {"name": "autoscaler", "resources": copy.deepcopy(resources)})
    out: list[PodSet] = [{"name": HEAD, "count": 1, "template": head}]
    for group in workers(spec):
        out.append({"name": str(group.get("groupName")), "count": worker_count(group),
                    "template": _template(group.get("template"))})
    return out


def merge_placement(template: PodTemplateSpec, placement: PodSetPlacement | None,
                    labels: Mapping[str, str] | None = None) -> PodTemplateSpec:
    """A copy of ``template`` with the placement's node labels and tolerations (and ``labels``) added."""
    out = copy.deepcopy(template)
    if labels:
        out.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    if placement is None:
        return out
    place_pod_spec(out.setdefault("spec", {}), placement)
    return out


def start_spec(spec: RayClusterSpec, placements: tuple[PodSetPlacement, ...],
               labels: Mapping[str, str] | None = None) -> MergePatch:
    """The ``headGroupSpec`` template and the whole ``workerGroupSpecs`` list with their placements merged."""
    by_name = {p.name: p for p in placements}
    head = merge_placement(head_template(spec), by_name.get(HEAD), labels)
    groups = []
    for group in workers(spec):
        copied = copy.deepcopy(group)
        copied["template"] = merge_placement(group.get("template") or {}, by_name.get(str(group.get("groupName"))),
                                             labels)
        groups.append(copied)
    out: MergePatch = {"headGroupSpec": {"template": head}}
    if groups:
        out["workerGroupSpecs"] = groups
    return out


def differs(have: PodTemplateSpec, want: PodTemplateSpec, label_keys: tuple[str, ...]) -> bool:
    have_spec, want_spec = have.get("spec") or {}, want.get("spec") or {}
    have_labels = (have.get("metadata") or {}).get("labels") or {}
    want_labels = (want.get("metadata") or {}).get("labels") or {}
    return (dict(have_spec.get("nodeSelector") or {}) != dict(want_spec.get("nodeSelector") or {})
            or list(have_spec.get("tolerations") or []) != list(want_spec.get("tolerations") or [])
            or any(have_labels.get(k) != want_labels.get(k) for k in label_keys))


def template_patch(have: PodTemplateSpec, want: PodTemplateSpec, label_keys: tuple[str, ...]) -> MergePatch:
    """A merge patch of one pod template (a map: removed keys are sent as null) back to ``want``'s node
    selector, tolerations and ``label_keys``."""
    have_sel = dict((have.get("spec") or {}).get("nodeSelector") or {})
    want_spec = want.get("spec") or {}
    selector: dict[str, str | None] = {k: None for k in have_sel if k not in (want_spec.get("nodeSelector") or {})}
    selector.update(want_spec.get("nodeSelector") or {})
    out: MergePatch = {"spec": {"nodeSelector": selector or None,
                                    "tolerations": copy.deepcopy(want_spec.get("tolerations")) or None}}
    want_labels = (want.get("metadata") or {}).get("labels") or {}
    if label_keys:
        out["metadata"] = {"labels": {k: want_labels.get(k) for k in label_keys}}
    return out


def _replaced(have: PodTemplateSpec, want: PodTemplateSpec, label_keys: tuple[str, ...]) -> PodTemplateSpec:
    out = copy.deepcopy(have)
    spec = out.setdefault("spec", {})
    want_spec = want.get("spec") or {}
    if want_spec.get("nodeSelector"):
        spec["nodeSelector"] = copy.deepcopy(want_spec["nodeSelector"])
    else:
        spec.pop("nodeSelector", None)
    if want_spec.get("tolerations"):
        spec["tolerations"] = copy.deepcopy(want_spec["tolerations"])
    else:
        spec.pop("tolerations", None)
    labels = dict((out.get("metadata") or {}).get("labels") or {})
    want_labels = (want.get("metadata") or {}).get("labels") or {}
    for key in label_keys:
        if key in want_labels:
            labels[key] = want_labels[key]
        else:
            labels.pop(key, None)
    if labels or "labels" in (out.get("metadata") or {}):
        out.setdefault("metadata", {})["labels"] = labels
    return out


def restore_spec(spec: RayClusterSpec, original: list[PodSet],
                 label_keys: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> MergePatch | None:
    """The part of a merge patch of the cluster spec that puts the head and worker templates back as the
    Workload's ``original`` pod sets recorded them; None when they already match, or when the pod sets (but the
    ``extra`` ones, a RayJob's submitter) no longer match the groups (Kueue skips the restore then too)."""
    wanted = {str(p.get("name")): p.get("template") or {} for p in original if str(p.get("name")) not in extra}
    groups = workers(spec)
    if set(wanted) != {HEAD, *(str(g.get("groupName")) for g in groups)} or len(wanted) != len(groups) + 1:
        return None
    out: MergePatch = {}
    head = head_template(spec)
    if differs(head, wanted[HEAD], label_keys):
        out["headGroupSpec"] = {"template": template_patch(head, wanted[HEAD], label_keys)}
    if any(differs(g.get("template") or {}, wanted[str(g.get("groupName"))], label_keys) for g in groups):
        out["workerGroupSpecs"] = [
            {**copy.deepcopy(g),
             "template": _replaced(g.get("template") or {}, wanted[str(g.get("groupName"))], label_keys)}
            for g in groups]
    return out or None


def refusals(spec: RayClusterSpec, path: str) -> list[str]:
    """Why Kueue's webhooks refuse this cluster spec on a queued job: autoscaling, a worker group named
    ``head``, more pod sets than a Workload holds."""
    out = []
    if spec.get("enableInTreeAutoscaling"):
        out.append(f"{path}.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
                   "autoscaling when workload slicing is enabled")
    groups = workers(spec)
    if len(groups) + 1 > MAX_POD_SETS:
        out.append(f"{path}.workerGroupSpecs: Too many: {len(groups) + 1}: must have at most {MAX_POD_SETS} items")
    for i, group in enumerate(groups):
        if group.get("groupName") == HEAD:
            out.append(f"{path}.workerGroupSpecs[{i}].groupName: Forbidden: \"head\" is reserved for the head group")
    return out
