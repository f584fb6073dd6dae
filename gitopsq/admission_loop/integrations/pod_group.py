"""Plain Pods and pod groups as units of admission (pure; pod_reconciler.py acts on them).

A unit is one Workload's pods: a single managed pod (Workload ``pod-<name>-<hash>``, pod set ``main`` of 1), or
every managed pod of a namespace naming the same group (Workload named after the group, one pod set per role
hash, sorted by name, counting the group's runnable pods). Kueue's rules: a pod being deleted before it was
bound, or one that failed, is not runnable; a group gets its Workload only once ``pod-group-total-count``
runnable pods exist (unless ``pod-group-fast-admission``) and every member agrees on the queue and the count;
surplus runnable pods (the newest) are removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from gitopsq.admission_loop.integrations.base import PodSetPlacement
from gitopsq.api.pod_object import PodObject, PodSpec, PodTemplateSpec
from gitopsq.api.raw_objects import MergePatch
from gitopsq.api.workload_object import PodSet
from gitopsq.manifests.object_rules import QUEUE_NAME_LABEL
from gitopsq.manifests.pod_marks import (
    FAST_ADMISSION,
    GATE,
    RETRIABLE_IN_GROUP,
    gated,
    group_name,
    role_of,
    total_count,
)

TERMINAL = ("Succeeded", "Failed")


def phase(pod: PodObject) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def terminal(pod: PodObject) -> bool:
    return phase(pod) in TERMINAL


def deleting(pod: PodObject) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def runnable(pod: PodObject) -> bool:
    """Can still run, runs or succeeded (Kueue's ``isPodRunnableOrSucceeded``)."""
    if deleting(pod) and not (pod.get("spec") or {}).get("nodeName"):
        return False
    return phase(pod) != "Failed"


def started(pod: PodObject) -> bool:
    """Released by admission and not yet ended: holds (or is about to hold) its node's resources."""
    return not gated(pod) and not terminal(pod)


def ready(pod: PodObject) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _labels(pod: PodObject) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _annotations(pod: PodObject) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


def _created(pod: PodObject) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


@dataclass
class Unit:
    """The pods of one Workload: ``group`` is '' for a single pod."""

    namespace: str
    group: str
    pods: list[PodObject] = field(default_factory=list)

    @property
    def first(self) -> PodObject:
        return self.pods[0]

    @property
    def total(self) -> int | None:
        return 1 if not self.group else total_count(self.first)

    @property
    def queue(self) -> str:
        return str(_labels(self.first).get(QUEUE_NAME_LABEL) or "")

    @property
    def fast(self) -> bool:
        return _annotations(self.first).get(FAST_ADMISSION) == "true"

    def active(self) -> list[PodObject]:
        return sorted((p for p in self.pods if runnable(p)), key=_created)

    def started_pods(self) -> list[PodObject]:
        return [p for p in self.pods if started(p)]

    def problem(self) -> str | None:
        """Why the group cannot get its Workload yet (Kueue's ``validatePodGroupMetadata``), or None."""
        if not self.group:
            return None
        total = self.total
        if total is None:
            return f"pod group {self.group}: the annotation kueue.x-k8s.io/pod-group-total-count must be a " \
                   "positive integer"
        active = self.active()
        if not self.fast and len(active) < total:
            return f"'{self.group}' group has fewer runnable pods than expected"
        for pod in self.pods:
            if phase(pod) == "Failed":
                continue
            name = pod["metadata"]["name"]
            if _labels(pod).get(QUEUE_NAME_LABEL) != self.queue:
                return f"pods '{self.first['metadata']['name']}' and '{name}' have different queue names"
            if total_count(pod) != total:
                return f"pods '{self.first['metadata']['name']}' and '{name}' have different " \
                       "'kueue.x-k8s.io/pod-group-total-count' values"
        return None

    def excess(self) -> list[PodObject]:
        """Runnable pods beyond the total, newest first (removed by the reconciler)."""
        total = self.total or 0
        active = self.active()
        return list(reversed(active[total:])) if self.group and len(active) > total else []

    def excess_over(self, counts: Mapping[str, int]) -> list[PodObject]:
        """Live members beyond their role's count in an existing Workload (``counts``: pod set → count), the
        newest of each role; pods already being deleted do not count (replacements may stand beside them)."""
        by_role: dict[str, list[PodObject]] = {}
        for pod in self.active():
            if not deleting(pod):
                by_role.setdefault(role_of(pod), []).append(pod)
        out: list[PodObject] = []
        for role, pods in by_role.items():
            if role in counts:
                out.extend(reversed(pods[counts[role]:]))
        return out

    def absent(self, counts: Mapping[str, int]) -> int:
        """Pods missing from the roles of an existing Workload: failed or deleted members not yet replaced."""
        have: dict[str, int] = {}
        for pod in self.active():
            if not deleting(pod):
                have[role_of(pod)] = have.get(role_of(pod), 0) + 1
        if self.fast:
            return int(any(counts.values()) and not have)
        return sum(max(0, count - have.get(role, 0)) for role, count in counts.items())

    def pod_sets(self) -> list[PodSet]:
        """The Workload's pod sets: ``main`` for a single pod; per role (sorted) for a group."""
        if not self.group:
            return [{"name": "main", "count": 1, "template": _template(self.first)}]
        roles: dict[str, PodSet] = {}
        active = self.active()[: self.total or 0]
        if self.fast and active:
            return [{"name": role_of(active[0]), "count": self.total or 1, "template": _template(active[0])}]
        for pod in active:
            role = role_of(pod)
            if role in roles:
                roles[role]["count"] += 1
            else:
                roles[role] = {"name": role, "count": 1, "template": _template(pod)}
        return [roles[k] for k in sorted(roles)]

    def finished(self) -> tuple[str, str] | None:
        """(reason, message) once the unit has ended (Kueue's ``Pod.Finished``): a single pod when it is
        terminal; a group when ``total`` pods succeeded, or none runs and a member says it may not be retried."""
        if not self.group:
            pod = self.first
            if not terminal(pod):
                return None
            message = str((pod.get("status") or {}).get("message") or "")
            if phase(pod) == "Succeeded":
                return "Succeeded", message or "Pod finished successfully"
            return "Failed", message or "Pod failed"
        total = self.total or 0
        succeeded = sum(1 for p in self.pods if phase(p) == "Succeeded")
        unretriable = any(_annotations(p).get(RETRIABLE_IN_GROUP) == "false" for p in self.pods)
        if succeeded >= total or (unretriable and not any(not terminal(p) for p in self.pods)):
            return "Succeeded", f"Pods succeeded: {succeeded}/{total}."
        return None

    def pods_ready(self) -> bool:
        """Every pod of the unit ready (a group: at least ``total`` of them; Kueue's ``Pod.PodsReady``)."""
        live = [p for p in self.pods if not deleting(p)]
        if self.group and len(live) < (self.total or 0):
            return False
        return bool(live) and all(ready(p) or phase(p) == "Succeeded" for p in live)


def _template(pod: PodObject) -> PodTemplateSpec:
    """The pod's spec as a pod-set template, without the scheduling gates and what the node set."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in ("schedulingGates", "nodeName")}
    return {"spec": cast(PodSpec, spec)}


def units(pods: Iterable[PodObject]) -> list[Unit]:
    """Managed, queued pods gathered into units (namespace, group or single pod)."""
    groups: dict[tuple[str, str], Unit] = {}
    out: list[Unit] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if not _labels(pod).get(QUEUE_NAME_LABEL):
            continue
        group = group_name(pod)
        if not group:
            out.append(Unit(str(meta.get("namespace")), "", [pod]))
            continue
        key = (str(meta.get("namespace")), group)
        groups.setdefault(key, Unit(key[0], group)).pods.append(pod)
    return out + list(groups.values())


def start_patch(pod: PodObject, placement: PodSetPlacement | None) -> MergePatch:
    """Merge patch: the pod set's node labels and tolerations added, the admission gate removed (both allowed on
    a gated pod)."""
    spec = pod.get("spec") or {}
    out: MergePatch = {"schedulingGates": [g for g in spec.get("schedulingGates") or () if g.get("name") != GATE]
                           or None}
    if placement is not None:
        if placement.node_selector:
            out["nodeSelector"] = dict(placement.node_selector)
        tolerations = list(spec.get("tolerations") or [])
        added = [t for t in placement.tolerations if t not in tolerations]
        if added:
            out["tolerations"] = tolerations + added
    return {"spec": out}


def placement_for(pod: PodObject, placements: Sequence[PodSetPlacement], single: bool) -> \
        PodSetPlacement | None:
    if single:
        return placements[0] if placements else None
    role = role_of(pod)
    return next((p for p in placements if p.name == role), None)
