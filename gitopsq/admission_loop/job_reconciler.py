"""The generic job reconciler: Jobs labelled ``kueue.x-k8s.io/queue-name`` ⇄ their Workloads.

For each labelled job of every integration, in this order (Kueue's ``ReconcileGenericJob``):
1. no Workload yet → a running job is stopped first ("Missing Workload"), then, once no pod is active, the
   Workload is created (Kueue's name, owner reference, pod sets, priority, the finalizer
   ``kueue.x-k8s.io/resource-in-use``, ``maximumExecutionTimeSeconds`` from the job's label; workload_build.py)
   (with ``kueue.x-k8s.io/prebuilt-workload-name``: adopt that Workload once it exists, the job kept
   suspended until then, and finish it ``OutOfSync`` if it does not match the job; prebuilt.py);
2. its Workload is being deleted → stop the job, then let the Workload go once no pod is active;
3. the job ended → mark the Workload ``Finished`` (its quota is released by the admission pass), and a
   finished Workload loses its finalizer;
4. the job no longer matches its Workload (workload_match.py) → a suspended job's unreserved Workload is
   updated in place; otherwise the job is stopped and the Workload deleted, to be created anew;
5. the Workload is evicted → stop the job in Kueue's order (suspend, unset ``startTime``, restore its pod
   templates and counts) and once no pod is left clear the reservation (``QuotaReserved=False``; ``Requeued``
   True after a preemption, False after a deactivation or a PodsReady timeout) so the quota goes back;
6. the Workload is admitted and the job suspended → inject the flavors' node labels and tolerations (and a
   partial admission's count) and unsuspend ("Admitted by clusterQueue …"); while it runs, keep its
   ``PodsReady`` condition when waitForPodsReady is on;
7. the job runs without admission → stop it.
Workloads whose owner job is gone are deleted (what the garbage collector does in a full cluster); their
finalizer comes off once none of the job's pods is left. Unlabelled jobs are never touched, except a job owned
(through any chain of controllers) by a managed job of a running integration (a JobSet's Jobs;
integrations/ancestry.py): it never gets a Workload, and is suspended when it runs while the ancestor's Workload
is not admitted. ``integrations`` are the running ones whose objects are cached (the loop sets them each pass
from integration_watch.py): the Workloads of a kind not (yet) watched are left alone. An integration with a
``reconcile_pass`` of its own (plain Pods and pod groups: many objects behind one Workload) runs that instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from gitopsq import logs
from gitopsq.admission_loop.integrations import INTEGRATIONS, Integration, child_suspend_patch
from gitopsq.admission_loop.integrations.ancestry import managed_ancestor
from gitopsq.admission_loop.integrations.base import related_kinds, with_related
from gitopsq.admission_loop.lifecycle import MAX_EXEC_EXCEEDED, max_execution_seconds
from gitopsq.admission_loop.live_workload import EVICTING, FINISHED, QUEUE_LABEL, RESOURCE_IN_USE, read_workload
from gitopsq.admission_loop.options import NO_FAULT, FaultPoint, WaitForPodsReady
from gitopsq.admission_loop.pods_ready import PODS_READY, TIMEOUT_REASON, WAIT_FOR_START, wanted_condition
from gitopsq.admission_loop.ports import WatchCache, WorkloadWriter
from gitopsq.admission_loop.prebuilt import OUT_OF_SYNC, adoption_patch, prebuilt_name
from gitopsq.admission_loop.workload_build import new_workload, placements, resolve_priority, workload_name
from gitopsq.admission_loop.workload_match import equivalent
from gitopsq.admission_loop.workload_status import condition, is_true, parse_time, set_condition
from gitopsq.admission_loop.writer import workload_path
from gitopsq.api.raw_objects import Condition, KubeObject, MergePatch, OwnerReference
from gitopsq.api.workload_object import PodSet, WorkloadObject
from gitopsq.errors import ClusterError

PodsLeft = Callable[[str, str], int]  # (namespace, label selector) -> pods not yet terminal, terminating included


_log = logs.get("jobs")


class JobReconciler:
    """Runs the steps of the module docstring over every labelled job; one call = one pass."""

    def __init__(self, cache: WatchCache, writer: WorkloadWriter, *, now: Callable[[], float],
                 integrations: tuple[Integration, ...] = INTEGRATIONS, fault: FaultPoint = NO_FAULT,
                 pods_ready: WaitForPodsReady | None = None, pods_left: PodsLeft | None = None) -> None:
        self.cache, self.writer, self.now = cache, writer, now
        self.pods_left = pods_left
        self.pods_ready = pods_ready or WaitForPodsReady()
        self.integrations = integrations
        self.fault = fault
        # (job shape, Workload resourceVersion) -> matched, per job UID: a job is compared with its Workload
        # again only when one of them changed (last pass's entries only, so it never grows)
        self._matched: dict[str, tuple[str, str, bool]] = {}
        self._matched_now: dict[str, tuple[str, str, bool]] = {}

    def reconcile(self) -> int:
        """One pass; returns the number of writes."""
        before = self.writer.writes
        self._matched, self._matched_now = self._matched_now, {}
        owned: dict[str, list[WorkloadObject]] = {}
        owners = self.cache.indexed("workloads", lambda ix: ix.owners())
        if owners is not None:  # the cache's index: only owned Workloads, not all of them every pass
            for owner, keys in owners.items():
                owned[owner] = [cast(WorkloadObject, wl) for wl in (self.cache.get("workloads", k) for k in keys)
                                if wl is not None]
        else:
            for wl in cast(list[WorkloadObject], self.cache.items("workloads")):
                for ref in (wl.get("metadata") or {}).get("ownerReferences") or ():
                    if ref.get("controller"):
                        owned.setdefault(f"{wl['metadata']['namespace']}/{ref.get('uid')}", []).append(wl)
        live_uids: set[str] = set()
        running = tuple(i for i in self.integrations if self.cache.watches(i.resource))
        for own in (i for i in running if hasattr(i, "reconcile_pass")):
            own.reconcile_pass(self)  # an integration with a pass of its own (pod)
        running = tuple(i for i in running if not hasattr(i, "reconcile_pass"))
        for integration in running:
            for job in self.cache.items(integration.resource):
                meta = job.get("metadata") or {}
                if meta.get("deletionTimestamp"):
                    continue  # being deleted: its Workload goes now, its quota with it
                live_uids.add(f"{meta.get('namespace')}/{meta.get('uid')}")
                parent = managed_ancestor(job, self._lookup, QUEUE_LABEL) if meta.get("ownerReferences") else None
                if parent is None and QUEUE_LABEL not in (meta.get("labels") or {}):
                    continue
                skip = getattr(integration, "skip", None)  # optional: a job of the kind Kueue leaves alone
                if skip is not None and skip(job):
                    continue
                try:
                    if parent is not None:  # a managed parent's child: the parent's Workload covers its pods
                        self._child(integration, job, cast(KubeObject, parent), owned)
                    else:
                        read = with_related(integration, job, self.cache.get).copy()  # a TrainJob with its runtime
                        self._job(integration, read, owned.get(f"{meta['namespace']}/{meta['uid']}", []))
                except ClusterError as err:
                    _log.info("job step deferred", job=f"{meta.get('namespace')}/{meta.get('name')}", error=str(err))
        by_kind = {i.kind: i for i in running}
        for key, workloads in owned.items():
            for wl in workloads:
                refs = [r for r in wl["metadata"].get("ownerReferences") or () if r.get("controller")]
                if key in live_uids or not refs or refs[0].get("kind") not in by_kind:
                    continue
                if wl["metadata"].get("deletionTimestamp"):
                    self._finalize_orphan(by_kind[refs[0]["kind"]], wl, refs[0])
                else:
                    self._delete_orphan(wl)
        return self.writer.writes - before

    # what an integration's own pass (integrations/pod_reconciler.py PassContext) borrows from this one
    workload_name, resolve_priority, placements = (staticmethod(f) for f in (workload_name, resolve_priority,
                                                                              placements))

    def _child(self, integration: Integration, job: KubeObject, parent: KubeObject,
               owned: Mapping[str, list[WorkloadObject]]) -> None:
        """Kueue's ``shouldSuspendChildJob``: a running child of a managed job is suspended unless the parent's
        latest unfinished Workload is admitted (whatever started the child — a user, an operator)."""
        if integration.finished(job) is not None or integration.is_suspended(job):
            return
        pmeta = parent.get("metadata") or {}
        mine = [w for w in owned.get(f"{pmeta.get('namespace')}/{pmeta.get('uid')}", ()) if not is_true(w, "Finished")]
        latest = max(mine, key=lambda w: str(w["metadata"].get("creationTimestamp") or ""), default=None)
        if latest is not None and is_true(latest, "Admitted"):
            return
        meta = job["metadata"]
        obj = f"{integration.kind}/{meta['namespace']}/{meta['name']}"
        self.writer.patch(integration.resource, f"{integration.collection_path(meta['namespace'])}/{meta['name']}",
                          child_suspend_patch(integration, job), obj)
        self.writer.event(job, integration.kind, "Suspended", "Kueue managed child job suspended")

    def _lookup(self, group: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        """A cached object of a running integration's kind, or of a kind one of them watches beside its own (a
        TrainJob's JobSet when the JobSet integration is off): ancestry.py's lookup."""
        for integration in self.integrations:
            if (integration.group, integration.kind) == (group, kind):
                return self.cache.get(integration.resource, f"{namespace}/{name}")
        for integration in self.integrations:
            for related in related_kinds(integration):
                if (related.group, related.kind) == (group, kind) and self.cache.watches(related.plural):
                    return self.cache.get(related.plural, f"{namespace}/{name}")
        return None

    def _finalize_orphan(self, integration: Integration, wl: WorkloadObject, ref: OwnerReference) -> None:
        """The job is gone (or going) and so is its Workload: the finalizer comes off, and the quota with it,
        only once none of the job's pods is left running or terminating."""
        ns = wl["metadata"]["namespace"]
        try:
            selector = integration.pod_selector(str(ref.get("name")), str(ref.get("uid")))
            if self.pods_left is not None and self.pods_left(ns, selector):
                return
            self._drop_finalizer(wl)
        except ClusterError as err:
            _log.info("workload finalizer kept", workload=f"{ns}/{wl['metadata']['name']}", error=str(err))

    def _drop_finalizer(self, wl: WorkloadObject) -> None:
        meta = wl["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        if RESOURCE_IN_USE not in finalizers:
            return
        rest = [f for f in finalizers if f != RESOURCE_IN_USE]
        key = f"{meta['namespace']}/{meta['name']}"
        self.writer.patch("workloads", workload_path(meta["namespace"], meta["name"]),
                          {"metadata": {"finalizers": rest or None, "resourceVersion": meta.get("resourceVersion")}},
                          f"Workload/{key}")
        if meta.get("deletionTimestamp") and not rest:
            self.cache.forget("workloads", key)  # gone now; its quota with it

    def _delete_orphan(self, wl: WorkloadObject) -> None:
        meta = wl["metadata"]
        try:
            self.writer.delete("workloads", workload_path(meta["namespace"], meta["name"]),
                               f"{meta['namespace']}/{meta['name']}", f"Workload/{meta['namespace']}/{meta['name']}")
        except ClusterError as err:
            _log.info("orphan workload not deleted", workload=meta["name"], error=str(err))
            return

    def _job(self, integration: Integration, job: KubeObject, workloads: list[WorkloadObject]) -> None:
        meta = job["metadata"]
        prebuilt = prebuilt_name(job)
        name = prebuilt or workload_name(integration.kind, integration.group, meta["name"], meta["uid"])
        wl = next((w for w in workloads if w["metadata"]["name"] == name), None)
        path = f"{integration.collection_path(meta['namespace'])}/{meta['name']}"
        obj = f"{integration.kind}/{meta['namespace']}/{meta['name']}"
        if wl is None and prebuilt:
            self._adopt(integration, job, prebuilt, path, obj)
            return
        if wl is None:
            if integration.finished(job) is not None:
                return
            if not integration.is_suspended(job):  # Kueue: a job running without a Workload is stopped first
                self._stop(integration, job, [], path, obj, why="Missing Workload; unable to restore pod templates")
                return
            if integration.active_pods(job):
                return  # its pods are still going
            body = new_workload(integration, job, self.cache)
            self.writer.create("workloads", workload_path(meta["namespace"]), body,
                               f"Workload/{meta['namespace']}/{name}")
            self.writer.event(job, integration.kind, "CreatedWorkload", f"Created Workload: {meta['namespace']}/{name}")
            return
        live = read_workload(wl)
        if wl["metadata"].get("deletionTimestamp"):
            # Someone deleted the Workload of a live job (Kueue: stop the job, then let the Workload go; the
            # job gets a new one).
            templates: list[PodSet] = list((wl.get("spec") or {}).get("podSets") or ())
            finished = live is not None and live.state == FINISHED
            if not finished and (not integration.is_suspended(job)
                                 or integration.restore_patch(job, templates) is not None):
                self._stop(integration, job, templates, path, obj, why="Workload is deleted")
            elif finished or integration.active_pods(job) == 0:
                self._drop_finalizer(wl)
            return
        if live is None:
            return
        ended = integration.finished(job)
        if prebuilt and not self._prebuilt_in_sync(integration, job, wl, path, obj, ended=ended is not None):
            return
        if live.state == FINISHED:
            self._drop_finalizer(wl)  # Kueue: a finished Workload holds nothing
            return
        if ended is not None:
            conditions = [c.copy() for c in (wl.get("status") or {}).get("conditions") or ()]
            set_condition(conditions, "Finished", "True", ended[0], ended[1], self.now())
            self.writer.workload_status(wl, {"conditions": conditions})
            return
        suspended = integration.is_suspended(job)
        original: list[PodSet] = list((wl.get("spec") or {}).get("podSets") or ())
        if not prebuilt and not self._matches(integration, job, wl, suspended):
            self._rebuild(integration, job, wl, suspended=suspended, path=path, obj=obj)
            return
        if live.state == EVICTING or not is_true(wl, "Admitted"):
            if not suspended or integration.restore_patch(job, original) is not None:
                evicted = condition(wl, "Evicted") if live.state == EVICTING else None
                why = str(evicted.get("message", "")) if evicted else "Not admitted by cluster queue"
                self._stop(integration, job, original, path, obj, why=why)
                return
            if live.state == EVICTING and integration.active_pods(job) == 0:
                self._release(wl)
            return
        if not suspended:
            if self.pods_ready.enable:
                self._pods_ready(wl, integration.pods_ready(job))
            return
        self.fault("before-unsuspend")
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        self.writer.patch(integration.resource, path, integration.start_patch(job, placements(self.cache, wl)), obj)
        self.writer.event(job, integration.kind, "Started", f"Admitted by clusterQueue {cq}")

    def _adopt(self, integration: Integration, job: KubeObject, name: str, path: str, obj: str) -> None:
        """prebuilt.py: keep the job suspended until its prebuilt Workload exists, then make that Workload its."""
        ns = job["metadata"]["namespace"]
        candidate = cast(WorkloadObject | None, self.cache.get("workloads", f"{ns}/{name}"))
        if candidate is None:
            if not integration.is_suspended(job):
                self._stop(integration, job, [], path, obj, why=f"Waiting for the prebuilt Workload {name}")
            return
        patch = adoption_patch(integration, job, candidate)
        if patch is None:
            _log.info("prebuilt workload owned by another object", workload=f"{ns}/{name}", job=obj)
            return
        self.writer.patch("workloads", workload_path(ns, name), patch, f"Workload/{ns}/{name}")

    def _matches(self, integration: Integration, job: KubeObject, wl: WorkloadObject,
                 suspended: bool) -> bool:
        meta = job.get("metadata") or {}
        # the job's spec generation, not its resourceVersion (status writes do not change what is compared), with
        # its labels and annotations (max-exec-time-seconds, job-min-parallelism) and suspension
        shape = (meta.get("generation") or meta.get("resourceVersion"), suspended,
                 hash(frozenset((meta.get("labels") or {}).items())),
                 hash(frozenset((meta.get("annotations") or {}).items())))
        versions = (str(shape), str((wl.get("metadata") or {}).get("resourceVersion")))
        uid = str(meta.get("uid"))
        known = self._matched.get(uid) or self._matched_now.get(uid)
        if known is not None and known[:2] == versions:
            self._matched_now[uid] = known
            return known[2]
        labels = meta.get("labels") or {}
        same = equivalent(integration.pod_sets(job), wl, suspended=suspended,
                          max_execution=max_execution_seconds(labels), placements=placements(self.cache, wl))
        self._matched_now[uid] = (*versions, same)
        return same

    def _rebuild(self, integration: Integration, job: KubeObject, wl: WorkloadObject, *, suspended: bool,
                 path: str, obj: str) -> None:
        """The job no longer matches its Workload (Kueue's ``ensureOneWorkload``): a suspended job's Workload
        without a reservation takes the job's new spec in place; otherwise the job is stopped (its templates
        restored from the old Workload) and the Workload deleted — the deleted-Workload step lets it go once no
        pod is left; a suspended job's Workload with a reservation loses its finalizer first, so the job keeps its
        edit — and the next pass creates a Workload for the job as it is now."""
        meta = wl["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if suspended and not is_true(wl, "QuotaReserved"):
            fresh = new_workload(integration, job, self.cache)["spec"]
            spec: MergePatch = {k: None for k in wl.get("spec") or {} if k not in fresh and k != "active"}
            spec.update(fresh)
            self.writer.patch("workloads", workload_path(meta["namespace"], meta["name"]),
                              {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": spec},
                              f"Workload/{key}")
            self.writer.event(job, integration.kind, "UpdatedWorkload",
                              f"Updated not matching Workload for suspended job: {key}")
            return
        if not suspended and integration.finished(job) is None:
            self._stop(integration, job, list((wl.get("spec") or {}).get("podSets") or ()), path, obj,
                       why="No matching Workload; restoring pod templates according to existent Workload")
        elif not integration.active_pods(job):
            # nothing runs: it goes at once, as Kueue's workload.Delete (the deleted-Workload step would restore
            # the old templates over the job's edit)
            self._drop_finalizer(wl)
        self.writer.delete("workloads", workload_path(meta["namespace"], meta["name"]), key, f"Workload/{key}")
        self.writer.event(job, integration.kind, "DeletedWorkload", f"Deleted not matching Workload: {key}")

    def _prebuilt_in_sync(self, integration: Integration, job: KubeObject, wl: WorkloadObject, path: str,
                          obj: str, *, ended: bool) -> bool:
        """Kueue's ``ensurePrebuiltWorkloadInSync``: a prebuilt Workload that does not match its job is marked
        ``Finished`` (reason ``OutOfSync``) and the job is kept suspended."""
        if self._matches(integration, job, wl, integration.is_suspended(job)):
            return True
        if not is_true(wl, "Finished"):
            conds = [c.copy() for c in (wl.get("status") or {}).get("conditions") or ()]
            set_condition(conds, "Finished", "True", *OUT_OF_SYNC, self.now())
            self.writer.workload_status(wl, {"conditions": conds})
        elif RESOURCE_IN_USE in (wl["metadata"].get("finalizers") or ()):
            self._drop_finalizer(wl)
        if not ended and not integration.is_suspended(job):
            self._stop(integration, job, [], path, obj, why="missing workload")
        return False

    def _pods_ready(self, wl: WorkloadObject, ready: bool) -> None:
        """Keep an admitted Workload's ``PodsReady`` condition true to its job's pods (pods_ready.py)."""
        wanted = wanted_condition(wl, ready)
        old = condition(wl, PODS_READY)
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == wanted:
            return
        conds = [c.copy() for c in (wl.get("status") or {}).get("conditions") or ()]
        set_condition(conds, PODS_READY, *wanted, self.now())
        self.writer.workload_status(wl, {"conditions": conds})

    def _stop(self, integration: Integration, job: KubeObject, original: list[PodSet], path: str,
              obj: str, *, why: str) -> None:
        """Kueue's stop, in its order: suspend (with the stop mark), unset the status fields that freeze the pod
        templates (``startTime``), restore the templates and drop the mark. Each step works on the previous
        step's answer; a crash in between leaves the mark, so the next pass redoes the stop."""
        if not (job.get("spec") or {}).get("suspend"):
            job = self.writer.patch(integration.resource, path, integration.suspend_patch(job), obj)
            self.writer.event(job, integration.kind, "Stopped", why)
        clear = integration.start_time_patch(job)
        if clear is not None:
            job = self.writer.patch(integration.resource, f"{path}/status", clear, obj)
        restore = integration.restore_patch(job, original)
        if restore is not None:
            self.writer.patch(integration.resource, path, restore, obj)

    def _release(self, wl: WorkloadObject) -> None:
        """The evicted job has stopped: give the quota back and requeue (Kueue ``UnsetQuotaReservation``)."""
        evicted: Condition = condition(wl, "Evicted") or {}
        conds = [c.copy() for c in (wl.get("status") or {}).get("conditions") or ()]
        status: MergePatch = {"admission": None, "conditions": conds}
        now = self.now()
        admitted = condition(wl, "Admitted")
        limited = (wl.get("spec") or {}).get("maximumExecutionTimeSeconds") is not None
        if limited and admitted is not None and admitted.get("status") == "True" and \
                evicted.get("reason") != f"DeactivatedDueTo{MAX_EXEC_EXCEEDED}":
            # Kueue: the time this admission ran counts against the maximum of the next one
            ran = max(0, round(now - parse_time(admitted.get("lastTransitionTime"))))
            status["accumulatedPastExecutionTimeSeconds"] = \
                int((wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0) + ran
        set_condition(conds, "QuotaReserved", "False", "Pending", str(evicted.get("message", "")), now)
        set_condition(conds, "Admitted", "False", "NoReservation", "The workload has no reservation",
                      now)
        reason = str(evicted.get("reason", ""))
        if reason == "Preempted":
            set_condition(conds, "Requeued", "True", "Preempted", "The workload was preempted", now)
        elif reason.startswith("Deactivated") or reason in (TIMEOUT_REASON, "AdmissionCheck"):  # Kueue: out until
            # reactivated, or until the backoff (waitForPodsReady's, or a Retry check's requeueAfterSeconds) ends
            set_condition(conds, "Requeued", "False", reason, str(evicted.get("message", "")), now)
        if self.pods_ready.enable:
            set_condition(conds, PODS_READY, *WAIT_FOR_START, now)
        self.writer.workload_status(wl, status)

    # what the pod pass borrows besides (integrations/pod_reconciler.py PassContext)
    release, keep_pods_ready, drop_finalizer = _release, _pods_ready, _drop_finalizer
