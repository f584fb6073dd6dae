"""The pod integration's pass: managed Pods and pod groups (pod_group.py's units) ⇄ their Workloads.

Pods are not suspended and resumed like a Job: a managed pod is created gated (gitopsq/intake/pods.py) and the
Workload decides when its gate comes off. Per unit, in Kueue's order:
1. pods being deleted lose the ``kueue.x-k8s.io/managed`` finalizer (their end has been seen);
2. no Workload yet → a single pod gets ``pod-<name>-<hash>``, owned by it as controller; a group gets one named
   after the group, owned by every member, once ``pod-group-total-count`` runnable pods exist (a Warning
   ``ErrWorkloadCompose`` event while they do not, or the members disagree); failed members lose their
   finalizer, surplus runnable pods (the newest) are deleted (``ExcessPodDeleted``);
3. the Workload is deleted → all its pods are deleted (finished and gated ones too, as Kueue does), and its
   finalizer comes off once no started pod is left;
4. the Workload finished → the pods' finalizers and the Workload's come off; the unit ended (pod_group.py
   ``Unit.finished``) → ``Finished`` is set;
5. evicted or not admitted → each started pod is marked ``TerminationTarget`` (reason
   ``WorkloadEvictedDueTo<reason>``) and deleted — Kueue never recreates pods: the user's controller does —
   and the quota is released (as for any job) once no started pod is left;
6. admitted → each gated pod gets its pod set's node labels and tolerations and loses the gate in one patch
   ("Admitted by clusterQueue …"); while it runs, ``PodsReady`` follows the pods when waitForPodsReady is on.
Workloads owned by pods of which none is left are deleted (the garbage collector's work in a full cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, cast

from gitopsq import logs
from gitopsq.admission_loop.integrations.base import PodSetPlacement
from gitopsq.admission_loop.integrations.pod_group import (
    Unit,
    deleting,
    placement_for,
    runnable,
    start_patch,
    started,
    terminal,
    units,
)
from gitopsq.admission_loop.lifecycle import max_execution_seconds
from gitopsq.admission_loop.live_workload import (
    EVICTING,
    FINISHED,
    JOB_UID_LABEL,
    QUEUE_LABEL,
    RESOURCE_IN_USE,
    read_workload,
)
from gitopsq.admission_loop.options import WaitForPodsReady
from gitopsq.admission_loop.ports import WatchCache, WorkloadWriter
from gitopsq.admission_loop.workload_status import condition, is_true, iso, set_condition
from gitopsq.api.pod_object import PodObject, PodTemplateSpec
from gitopsq.api.raw_objects import Condition, KubeObject, ObjectMeta, OwnerReference
from gitopsq.api.workload_object import PriorityClassRef, WorkloadObject, WorkloadSpec
from gitopsq.cluster.kinds import WORKLOAD
from gitopsq.errors import ClusterError
from gitopsq.manifests.pod_marks import FINALIZER, IS_GROUP_WORKLOAD, TERMINATION_TARGET, gated

_log = logs.get("pods")

WAITING_FOR_REPLACEMENT: Final = "WaitingForReplacementPods"

SCAN_EVERY: Final = 30.0  # seconds between full scans of the Workloads for ones owned by pods


@dataclass
class PodState:
    """What the pod pass remembers between passes (the integration holds it)."""

    warned: dict[str, str] = field(default_factory=dict)  # group -> the composition problem last reported
    workloads: set[str] = field(default_factory=set)  # keys of Workloads owned by pods, as last seen
    scanned: float = float("-inf")  # when the Workloads were last scanned in full


class PassContext(Protocol):
    """What the pod pass borrows from the generic reconciler (job_reconciler.py's JobReconciler)."""

    cache: WatchCache
    writer: WorkloadWriter
    now: Callable[[], float]
    pods_ready: WaitForPodsReady

    def workload_name(self, kind: str, group: str, name: str, uid: str) -> str: ...

    def resolve_priority(self, cache: WatchCache, labels: Mapping[str, str],
                         template: PodTemplateSpec) -> tuple[int, PriorityClassRef | None]: ...

    def placements(self, cache: WatchCache, workload: WorkloadObject) -> tuple[PodSetPlacement, ...]: ...

    def release(self, wl: WorkloadObject) -> None: ...

    def keep_pods_ready(self, wl: WorkloadObject, ready: bool) -> None: ...

    def drop_finalizer(self, wl: WorkloadObject) -> None: ...


def workload_path(namespace: str, name: str = "") -> str:
    """(writer.py has the same; importing it here would loop back through the registry)"""
    base = WORKLOAD.collection_path(namespace)
    return f"{base}/{name}" if name else base


def _workload(obj: KubeObject | None) -> WorkloadObject | None:
    return cast(WorkloadObject | None, obj)  # the edge: an object of the workloads resource


def _path(pod: PodObject) -> str:
    meta = pod["metadata"]
    return f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"


def _obj(pod: PodObject) -> str:
    return f"Pod/{pod['metadata']['namespace']}/{pod['metadata']['name']}"


class PodPass:
    """One pass over the cached managed pods (the cache holds only pods labelled ``kueue.x-k8s.io/managed``)."""

    def __init__(self, ctx: PassContext, state: PodState) -> None:
        self.ctx, self.cache, self.writer = ctx, ctx.cache, ctx.writer
        self.state = state
        self.warned = state.warned  # one ErrWorkloadCompose event per change of a group's problem

    def run(self) -> None:
        seen: set[str] = set()
        for unit in units(cast(list[PodObject], self.cache.items("pods"))):
            name = self._name(unit)
            seen.add(f"{unit.namespace}/{name}")
            if _pod_owned(_workload(self.cache.get("workloads", f"{unit.namespace}/{name}"))):
                self.state.workloads.add(f"{unit.namespace}/{name}")
            try:
                self._unit(unit, name)
            except ClusterError as err:
                _log.info("pod step deferred", unit=f"{unit.namespace}/{name}", error=str(err))
        self._sweep(seen)

    def _candidates(self) -> list[WorkloadObject]:
        """Workloads owned by pods: all of them every `SCAN_EVERY` seconds (the first pass included), else
        those remembered — a pass does not walk every Workload of the cluster."""
        now = self.ctx.now()
        if now - self.state.scanned >= SCAN_EVERY:
            self.state.scanned = now
            found = [wl for wl in cast(list[WorkloadObject], self.cache.items("workloads")) if _pod_owned(wl)]
            self.state.workloads = {f"{w['metadata']['namespace']}/{w['metadata']['name']}" for w in found}
            return found
        out = []
        for key in list(self.state.workloads):
            wl = _workload(self.cache.get("workloads", key))
            if wl is None:
                self.state.workloads.discard(key)
            else:
                out.append(wl)
        return out

    def _sweep(self, seen: set[str]) -> None:
        """Workloads whose pods are all gone go (their finalizer first comes off once they are deleted)."""
        for wl in self._candidates():
            meta = wl.get("metadata") or {}
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            if key in seen:
                continue
            try:
                if meta.get("deletionTimestamp"):
                    self.ctx.drop_finalizer(wl)  # its pods are gone: nothing holds the quota
                else:
                    self.writer.delete("workloads", workload_path(meta["namespace"], meta["name"]), key,
                                       f"Workload/{key}")
            except ClusterError as err:
                _log.info("pod workload not cleaned up", workload=key, error=str(err))

    def _name(self, unit: Unit) -> str:
        if unit.group:
            return unit.group
        meta = unit.first["metadata"]
        return self.ctx.workload_name("Pod", "", meta["name"], meta["uid"])

    def _unfinalize(self, pod: PodObject) -> None:
        finalizers = list((pod.get("metadata") or {}).get("finalizers") or ())
        if FINALIZER not in finalizers:
            return
        rest = [f for f in finalizers if f != FINALIZER]
        self.writer.patch("pods", _path(pod), {"metadata": {"finalizers": rest or None, "resourceVersion":
                                                            pod["metadata"].get("resourceVersion")}}, _obj(pod))

    def _unit(self, unit: Unit, name: str) -> None:
        for pod in unit.pods:
            if deleting(pod):
                self._unfinalize(pod)
        wl = _workload(self.cache.get("workloads", f"{unit.namespace}/{name}"))
        if wl is None:
            self._create(unit, name)
            return
        if not _pod_owned(wl):
            problem = f"Workload {unit.namespace}/{name} exists and is not owned by pods"
            if self.warned.get(f"{unit.namespace}/{name}") != problem:  # Kueue: WorkloadNameConflict
                self.warned[f"{unit.namespace}/{name}"] = problem
                self.writer.event(unit.first, "Pod", "WorkloadNameConflict", problem, warning=True)
            return
        if wl["metadata"].get("deletionTimestamp"):
            # Kueue: a deleted Workload takes all its pods with it, finished and gated ones too — its own pods: one
            # a user's controller creates for the group meanwhile (recreating preempted members) is no owner and
            # waits for the group's next Workload, made once this one is gone
            owners = {r.get("uid") for r in wl["metadata"].get("ownerReferences") or ()}
            own = [p for p in unit.pods if p["metadata"].get("uid") in owners]
            self._stop([p for p in own if not deleting(p)], "WorkloadDeleted", "Workload is deleted")
            if not any(started(p) for p in own):
                self.ctx.drop_finalizer(wl)
            return
        live = read_workload(wl)
        if live is None:
            return
        if unit.group and live.state != FINISHED:
            counts = {str(p.get("name")): int(p.get("count") or 0) for p in (wl.get("spec") or {}).get("podSets") or ()}
            self._remove_excess(unit, unit.excess_over(counts))
            for pod in unit.pods:
                if not runnable(pod):
                    self._unfinalize(pod)  # a failed member: seen, and to be replaced by the user's controller
            wl = self._owners(unit, wl)
            wl = self._replacements(wl, unit.absent(counts))
        if live.state == FINISHED:
            for pod in unit.pods:
                if terminal(pod):
                    self._unfinalize(pod)
            self.ctx.drop_finalizer(wl)
            return
        ended = unit.finished()
        if ended is not None:
            conds = [c.copy() for c in (wl.get("status") or {}).get("conditions") or ()]
            set_condition(conds, "Finished", "True", ended[0], ended[1], self.ctx.now())
            self.writer.workload_status(wl, {"conditions": conds})
            return
        if live.state == EVICTING or not is_true(wl, "Admitted"):
            evicted = condition(wl, "Evicted") if live.state == EVICTING else None
            reason = f"WorkloadEvictedDueTo{evicted.get('reason', '')}" if evicted else "NotAdmitted"
            why = str(evicted.get("message", "")) if evicted else "Not admitted by cluster queue"
            running = [p for p in unit.pods if started(p) and not deleting(p)]
            self._stop(running, reason, why)
            if live.state == EVICTING and not any(started(p) for p in unit.pods):
                self.ctx.release(wl)
            return
        waiting = [p for p in unit.pods if gated(p) and not deleting(p)]
        if waiting:
            self._start(unit, wl, waiting)
        elif self.ctx.pods_ready.enable:
            self.ctx.keep_pods_ready(wl, unit.pods_ready())

    def _create(self, unit: Unit, name: str) -> None:
        live = [p for p in unit.pods if not deleting(p)]
        if not live:
            return
        if not unit.group:
            if terminal(unit.first):
                self._unfinalize(unit.first)  # ended before it had a Workload (or after its Workload went)
                return
        else:
            for pod in unit.pods:
                if not runnable(pod):
                    self._unfinalize(pod)
            problem = unit.problem()
            key = f"{unit.namespace}/{unit.group}"
            if problem is not None:
                if self.warned.get(key) != problem:
                    self.warned[key] = problem
                    self.writer.event(unit.first, "Pod", "ErrWorkloadCompose", problem, warning=True)
                return
            self.warned.pop(key, None)
            self._remove_excess(unit, unit.excess())
        body = self._new_workload(unit, name)
        self.writer.create("workloads", workload_path(unit.namespace), body, f"Workload/{unit.namespace}/{name}")
        self.writer.event(unit.first, "Pod", "CreatedWorkload", f"Created Workload: {unit.namespace}/{name}")

    def _replacements(self, wl: WorkloadObject, absent: int) -> WorkloadObject:
        """Kueue's ``WaitingForReplacementPods`` on a group's Workload: True while members are missing (the
        eviction's reason and message, else ``PodsFailed`` "Some Failed pods need replacement"), then False
        ``PodsReady`` "No pods need replacement". Returns the Workload as written."""
        old = condition(wl, WAITING_FOR_REPLACEMENT)
        if old is None and not absent:
            return wl
        if absent:
            evicted = condition(wl, "Evicted")
            if evicted is not None and evicted.get("status") == "True":
                wanted = ("True", str(evicted.get("reason", "")), str(evicted.get("message", "")))
            elif old is not None and old.get("status") == "True":
                return wl
            else:
                wanted = ("True", "PodsFailed", "Some Failed pods need replacement")
        else:
            wanted = ("False", "PodsReady", "No pods need replacement")
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == wanted:
            return wl
        conds = [c.copy() for c in (wl.get("status") or {}).get("conditions") or ()]
        set_condition(conds, WAITING_FOR_REPLACEMENT, *wanted, self.ctx.now())
        return cast(WorkloadObject, self.writer.workload_status(wl, {"conditions": conds}))

    def _remove_excess(self, unit: Unit, excess: list[PodObject]) -> None:
        """Surplus members are released and deleted (``ExcessPodDeleted``) and leave the unit."""
        for pod in excess:
            self._unfinalize(pod)
            try:
                self.writer.delete("pods", _path(pod), f"{unit.namespace}/{pod['metadata']['name']}", _obj(pod))
            except ClusterError as err:
                if err.status != 404:
                    raise
            self.writer.event(pod, "Pod", "ExcessPodDeleted", "Excess pod deleted")
        gone = {id(p) for p in excess}
        unit.pods = [p for p in unit.pods if id(p) not in gone]

    def _new_workload(self, unit: Unit, name: str) -> WorkloadObject:
        first = unit.first["metadata"]
        labels = first.get("labels") or {}
        pod_sets = unit.pod_sets()
        priority, ref = self.ctx.resolve_priority(self.cache, labels, pod_sets[0].get("template") or {})
        spec: WorkloadSpec = {"queueName": labels[QUEUE_LABEL], "podSets": pod_sets, "priority": priority}
        if ref is not None:
            spec["priorityClassRef"] = ref
        limit = max_execution_seconds(labels)
        if limit is not None:
            spec["maximumExecutionTimeSeconds"] = limit
        meta: ObjectMeta = {"name": name, "namespace": unit.namespace, "finalizers": [RESOURCE_IN_USE]}
        if unit.group:
            meta["annotations"] = {IS_GROUP_WORKLOAD: "true"}
            meta["ownerReferences"] = [_owner(p, controller=False) for p in unit.active()]
        else:
            meta["labels"] = {JOB_UID_LABEL: first["uid"]}
            meta["ownerReferences"] = [_owner(unit.first, controller=True)]
        return {"apiVersion": WORKLOAD.api_version, "kind": WORKLOAD.kind, "metadata": meta, "spec": spec}

    def _owners(self, unit: Unit, wl: WorkloadObject) -> WorkloadObject:
        """Replacement members of a group become owners of its Workload (Kueue's
        ``EnsureWorkloadOwnedByAllMembers``), so it lives as long as one of them does. Returns the Workload as
        written."""
        refs = list(wl["metadata"].get("ownerReferences") or ())
        have = {r.get("uid") for r in refs}
        added = [_owner(p, controller=False) for p in unit.pods if p["metadata"]["uid"] not in have
                 and not deleting(p)]
        if not added:
            return wl
        meta = wl["metadata"]
        written = self.writer.patch("workloads", workload_path(meta["namespace"], meta["name"]),
                                    {"metadata": {"ownerReferences": refs + added,
                                                  "resourceVersion": meta.get("resourceVersion")}},
                                    f"Workload/{meta['namespace']}/{meta['name']}")
        self.writer.event(wl, "Workload", "OwnerReferencesAdded", f"Added {len(added)} owner reference(s)")
        return cast(WorkloadObject, written)

    def _stop(self, pods: list[PodObject], reason: str, message: str) -> None:
        """Kueue's stop of pods: a ``TerminationTarget`` condition on each, then its deletion."""
        for pod in pods:
            if deleting(pod):
                continue
            conds: list[Condition] = [c for c in (pod.get("status") or {}).get("conditions") or ()
                                      if c.get("type") != TERMINATION_TARGET]
            conds.append({"type": TERMINATION_TARGET, "status": "True", "reason": reason, "message": message,
                          "lastTransitionTime": iso(self.ctx.now())})
            try:
                self.writer.patch("pods", _path(pod) + "/status", {"status": {"conditions": conds}}, _obj(pod))
                self.writer.delete("pods", _path(pod), f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
                                   _obj(pod))
            except ClusterError as err:
                if err.status != 404:
                    raise
            self.writer.event(pod, "Pod", "Stopped", message)

    def _start(self, unit: Unit, wl: WorkloadObject, pods: list[PodObject]) -> None:
        placements = self.ctx.placements(self.cache, wl)
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        for pod in pods:
            placement = placement_for(pod, placements, single=not unit.group)
            if unit.group and placement is None:
                _log.info("pod of no admitted role left gated", pod=_obj(pod))
                continue
            self.writer.patch("pods", _path(pod), start_patch(pod, placement), _obj(pod))
            self.writer.event(pod, "Pod", "Started", f"Admitted by clusterQueue {cq}")


def _pod_owned(wl: WorkloadObject | None) -> bool:
    return wl is not None and any(r.get("kind") == "Pod" and r.get("apiVersion") == "v1"
                                  for r in (wl.get("metadata") or {}).get("ownerReferences") or ())


def _owner(pod: PodObject, *, controller: bool) -> OwnerReference:
    ref: OwnerReference = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                           "uid": pod["metadata"]["uid"]}
    if controller:
        ref["controller"], ref["blockOwnerDeletion"] = True, True
    return ref
