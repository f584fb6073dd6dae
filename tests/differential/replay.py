"""Replaying one scenario on a running rig with upstream Kueue: the clock, the job controller, settling.

See oracle.py for the whole procedure; this module is its step 3 onwards (one `ScenarioRun` per scenario).
"""

from __future__ import annotations

import datetime as dt
import heapq
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from differential import kueue_objects as ko
from differential import observe as ob
from differential.compare import workload_trees

FEATURE_GATES = "UnadmittedWorkloadsObservability=true"  # the contract's granular reasons (default in 0.20)


class OracleError(RuntimeError):
    """Kueue did not settle, exited, or the rig refused an object."""


@dataclass(frozen=True, slots=True)
class Timing:
    quiet: float = 0.6
    release_quiet: float = 1.6
    untried_quiet: float = 1.5
    transient_quiet: float = 3.0
    instant_timeout: float = 60.0
    poll: float = 0.05
    # Kueue's start-up (ClusterQueues, ResourceFlavors and namespaces seen for the first time) asks for
    # inadmissible-workload requeue batches, each firing 1 s after it is asked for. A batch firing after the
    # scheduler has started re-evaluates workloads the scenario never released capacity for (a later
    # admission then shows as "2 more needed", or a parked workload preempts at an unrelated instant). The
    # gate therefore stays closed until that long after Kueue's start.
    startup_requeue_quiet: float = 2.3
    # Below a Cohort object, a ClusterQueue status change requeues its tree's inadmissible workloads: Kueue
    # reconciles a ClusterQueue 1 s after a workload event (`UpdatesBatchPeriod`), and the status update it writes
    # makes the Cohort reconciler ask for the root's requeue batch, 1 s later (random 190041). Settling waits for
    # both in scenarios with such queues.
    cq_batch_quiet: float = 1.3
    cohort_requeue_quiet: float = 1.4


@dataclass(slots=True)
class _Clock:
    """The driver's simulated clock: per workload the instant of its current admission, and pending timers."""

    timers: list[tuple[float, int, int, str]] = field(default_factory=list)  # time, kind, seq, workload key
    admitted_at: dict[str, float] = field(default_factory=dict)
    seq: int = 0

    def add(self, when: float, kind: int, workload: str) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (when, kind, self.seq, workload))


FINISH, SUBMIT = 0, 1


class ScenarioRun:
    def __init__(self, oracle: Any, plan: ko.Plan, scenario: dict[str, Any]) -> None:
        self.o, self.plan, self.scenario = oracle, plan, scenario
        self.objects: list[dict[str, Any]] = list(scenario.get("objects") or [])
        self.entries = {f"{w.get('namespace', 'default')}/{w['name']}": w for w in plan.workloads}
        self.seen: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, list[str]] = {}  # per workload, "reason: message" runs since its last other change
        # Per workload, the pending reasons of the current instant, and the instants at which they alternated (a
        # head Kueue kept requeueing, issue #3710, even when it was admitted later).
        self.instant_messages: dict[str, list[str]] = {}
        self.alternated: dict[str, set[float]] = {}
        self.events: list[ob.Event] = []
        self.clock = _Clock()
        self.now = 0.0
        self.last_create_second = 0
        self.last_release: dict[str, float] = {}  # cohort tree -> when quota was last released in it
        self.tree_of = workload_trees(scenario)
        self.status_requeue_queues = queues_below_cohort_objects(scenario)  # ClusterQueue -> its tree
        self.queue_versions: dict[str, str] = {}
        self.last_queue_status: dict[str, float] = {}  # cohort tree -> when one of those queues' status changed
        self.preempted_now: dict[tuple[str, float], int] = {}  # (workload, instant) -> preemptions seen
        self.cycling: set[str] = set()  # trees in a preemption cycle (compare.preemption_cycle_trees)
        self.process: subprocess.Popen[bytes] | None = None
        self.kueue_started = 0.0

    def play(self) -> dict[str, Any]:
        base = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self._create_setup(base)
        start = min([0.0, *(t[0] for t in self.clock.timers)])
        self.now = start
        self._fire_instant(start)
        self._start_kueue()
        try:
            self._open_gate()
            self._settle()
            while self.clock.timers:
                nxt = self.clock.timers[0][0]
                if self.plan.horizon is not None and nxt > float(self.plan.horizon):
                    break
                self.now = nxt
                self.instant_messages.clear()
                self._fire_instant(nxt)
                self._settle()
            return self._result()
        finally:
            self._stop_kueue()

    # -- setup ------------------------------------------------------------------------------------------------

    def _create_setup(self, base: dt.datetime) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        o = self.o
        for name, labels in self.plan.namespaces.items():
            try:
                o.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
            except ApiException as err:
                if err.status != 409:
                    raise
                current = o.core.read_namespace(name).metadata.labels or {}
                wanted = {**{k: None for k in current if k != "kubernetes.io/metadata.name"}, **labels}
                o.core.patch_namespace(name, {"metadata": {"labels": wanted}})
        for pc in self.plan.priority_classes:
            o.scheduling.create_priority_class(pc)
        for obj in self.plan.queue_objects:
            self._create(obj)
        created_priorities: set[object] = set()
        for k, entry in self.entries.items():
            if entry.get("admitted") is None:
                self.clock.add(float(entry.get("submitAt", 0)), SUBMIT, k)
                continue
            # Two admitted workloads of equal priority created in the same second are ordered by UID once both
            # are preempted and back in the queue (random per run); a new second for the later one keeps the
            # scenario's list order, which is the simulator's.
            priority = entry.get("priorityClass", entry.get("priority"))
            if priority in created_priorities:
                second = int(time.time())
                while int(time.time()) <= second:
                    time.sleep(0.02)
            created_priorities.add(priority)
            created = self._create(ko.workload(entry, self.objects))
            created["status"] = ko.admission_status(entry, base)
            updated = o.custom.replace_namespaced_custom_object_status(
                ko.GROUP, ko.VERSION, created["metadata"]["namespace"], "workloads", entry["name"], created)
            self.seen[k] = updated
            at = float(entry["admitted"].get("at", 0))
            self.clock.admitted_at[k] = at
            if entry.get("runtime") is not None:
                self.clock.add(at + float(entry["runtime"]), FINISH, k)

    def _create(self, obj: dict[str, Any]) -> dict[str, Any]:
        plural = ko.PLURALS[obj["kind"]]
        if obj["kind"] in ko.NAMESPACED:
            ns = obj["metadata"].get("namespace", "default")
            created: dict[str, Any] = self.o.custom.create_namespaced_custom_object(ko.GROUP, ko.VERSION, ns,
                                                                                    plural, obj)
        else:
            created = self.o.custom.create_cluster_custom_object(ko.GROUP, ko.VERSION, plural, obj)
        return created

    # -- the clock --------------------------------------------------------------------------------------------

    def _fire_instant(self, now: float) -> None:
        """Everything due at ``now``: finishes first, then submissions (list order), as the simulator does."""
        due = []
        while self.clock.timers and self.clock.timers[0][0] == now:
            due.append(heapq.heappop(self.clock.timers))
        for _, kind, _, k in sorted(due, key=lambda t: (t[1], t[2])):
            if kind == FINISH:
                self._finish(k, now)
            else:
                self._submit(k)

    def _submit(self, k: str) -> None:
        # Kueue orders equal priorities by creationTimestamp, a whole second: a later instant starts a new one.
        while int(time.time()) <= self.last_create_second and self.now > self._first_instant():
            time.sleep(0.02)
        self._create(ko.workload(self.entries[k], self.objects))
        self.last_create_second = int(time.time())

    def _first_instant(self) -> float:
        return min([0.0, *(float(e.get("submitAt", 0)) for e in self.plan.workloads)])

    def _finish(self, k: str, now: float) -> None:
        """Finish a workload whose runtime elapsed since its current admission (stale timers are dropped)."""
        obj = self._get(k)
        admitted_at = self.clock.admitted_at.get(k)
        runtime = self.entries[k].get("runtime")
        if obj is None or ob.state(obj) != "Admitted" or admitted_at is None or runtime is None:
            return
        if admitted_at + float(runtime) != now:
            return
        self._patch_conditions(obj, [{"type": "Finished", "status": "True", "reason": "Succeeded",
                                      "message": "Finished by the differential driver"}], clear_admission=False)
        self._released(k)

    def _released(self, k: str) -> None:
        self.last_release[self.tree_of.get(k, "")] = time.monotonic()

    # -- Kueue ------------------------------------------------------------------------------------------------

    def _start_kueue(self) -> None:
        self.gate = self.o.workdir / f"gate-{self.o.runs}"
        self.gate.unlink(missing_ok=True)
        argv = [str(self.o.kueue.oraclekueue), "--feature-gates", FEATURE_GATES, "--qps", "500", "--burst", "1000",
                "--scheduler-start-file", str(self.gate)]
        if self.plan.fair_sharing:
            argv += ["--fair-sharing", "--fair-sharing-strategies", ",".join(self.plan.strategies)]
        if os.environ.get("GITOPSQ_ORACLE_LOG_LEVEL"):  # Kueue's own log, to read how it decided (workdir)
            argv += [f"--zap-log-level={os.environ['GITOPSQ_ORACLE_LOG_LEVEL']}"]
        log = (self.o.workdir / "oraclekueue.log").open("ab")
        env = {**os.environ, "KUBECONFIG": str(self.o.rig.kubeconfig)}
        self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        self.kueue_started = time.monotonic()
        log.close()

    def _stop_kueue(self) -> None:
        p = self.process
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.process = None

    def _open_gate(self) -> None:
        """Open the scheduler once every ClusterQueue shows all its workloads (or after 5 s: inactive queues)."""
        expected: dict[str, tuple[int, int]] = {}
        for k, e in self.entries.items():
            cq = self.plan.local_queues.get(f"{e.get('namespace', 'default')}/{e['queue']}")
            if cq is None or (e.get("admitted") is None and k not in self._existing()):
                continue
            pending, reserving = expected.get(cq, (0, 0))
            expected[cq] = (pending + (e.get("admitted") is None), reserving + (e.get("admitted") is not None))
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self._check_alive()
            if all(self._cq_counts(cq) == want for cq, want in expected.items()):
                break
            time.sleep(self.o.timing.poll)
        quiet = self.kueue_started + self.o.timing.startup_requeue_quiet - time.monotonic()
        if quiet > 0:
            time.sleep(quiet)
        self.gate.touch()

    def _existing(self) -> set[str]:
        listed = self.o.custom.list_cluster_custom_object(ko.GROUP, ko.VERSION, "workloads")
        return {ob.key(w) for w in listed["items"]}

    def _cq_counts(self, name: str) -> tuple[int, int]:
        cq = self.o.custom.get_cluster_custom_object(ko.GROUP, ko.VERSION, "clusterqueues", name)
        status = cq.get("status") or {}
        return int(status.get("pendingWorkloads") or 0), int(status.get("reservingWorkloads") or 0)

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            tail = (self.o.workdir / "oraclekueue.log").read_text(errors="replace")[-1500:]
            raise OracleError(f"oraclekueue exited with {self.process.returncode}: {tail}")

    # -- settling -------------------------------------------------------------------------------------------

    def _settle(self) -> None:
        """Wait until Kueue has settled the instant (module docstring of oracle.py).

        A cohort tree where Kueue preempted one workload twice at this instant is in a preemption cycle, which
        can go on for minutes before a race ends it; the comparison skips such a tree
        (compare.preemption_cycle_trees), so settling waits only for the other trees."""
        t = self.o.timing
        started = last_change = time.monotonic()
        while True:
            self._check_alive()
            now = time.monotonic()
            if any(self.tree_of.get(k, "") not in self.cycling for k in self._poll()):
                last_change = now
            self._poll_queue_status(now)
            quiet = now - last_change
            released = max((at for tree, at in self.last_release.items() if tree not in self.cycling), default=0.0)
            watched = set(self.status_requeue_queues.values()) - self.cycling
            need_quiet = max(t.quiet, t.cq_batch_quiet) if watched else t.quiet
            status_at = max((at for tree, at in self.last_queue_status.items() if tree in watched), default=0.0)
            if quiet >= need_quiet and now - released >= t.release_quiet \
                    and now - status_at >= t.cohort_requeue_quiet:
                pending = [w for k, w in self.seen.items()
                           if ob.state(w) == "Pending" and self.tree_of.get(k, "") not in self.cycling]
                untried = [w for w in pending if ob.condition(w, "QuotaReserved") is None]
                settled = all(ob.settled_pending(w) for w in pending if w not in untried)
                # Untried: behind a StrictFIFO head, Kueue never evaluates them; give it time to show otherwise.
                if (settled and (not untried or quiet >= t.untried_quiet)) or quiet >= t.transient_quiet:
                    return
            if now - started > t.instant_timeout:
                raise OracleError(f"Kueue did not settle within {t.instant_timeout}s at instant {self.now}")
            time.sleep(t.poll)

    def _poll_queue_status(self, now: float) -> None:
        """Note when a ClusterQueue below a Cohort object got a new status (Timing.cohort_requeue_quiet)."""
        if not self.status_requeue_queues:
            return
        listed = self.o.custom.list_cluster_custom_object(ko.GROUP, ko.VERSION, "clusterqueues")
        for cq in listed["items"]:
            name, version = cq["metadata"]["name"], cq["metadata"]["resourceVersion"]
            tree = self.status_requeue_queues.get(name)
            if tree is not None and self.queue_versions.get(name) != version:
                self.queue_versions[name] = version
                self.last_queue_status[tree] = now

    def _poll(self) -> set[str]:
        """Read every Workload; record transitions; complete evictions. Returns the workloads whose status said
        something new (a pending reason or message seen before is not: Kueue's StrictFIFO head may alternate them
        for ever)."""
        changed: set[str] = set()
        listed = self.o.custom.list_cluster_custom_object(ko.GROUP, ko.VERSION, "workloads")
        for w in listed["items"]:
            k = ob.key(w)
            before = self.seen.get(k)
            if before is not None and before["metadata"]["resourceVersion"] == w["metadata"]["resourceVersion"]:
                continue
            said = self.messages.setdefault(k, [])
            runs = self.instant_messages.setdefault(k, [])
            if before is None or ob.signature(before) != ob.signature(w):
                changed.add(k)
                said.clear()
                runs.clear()
            text = ob.message(w)
            if text and (not runs or runs[-1] != text):
                runs.append(text)
                if ob.alternating(runs):
                    self.alternated.setdefault(k, set()).add(self.now)
            if text not in said:
                changed.add(k)  # a reason or message not seen since the last other change
            if not said or said[-1] != text:
                said.append(text)
            for e in ob.transitions(before, w, self.now):
                self.events.append(e)
                if e.type == "Admitted":
                    self._admitted(k)
            self.seen[k] = w
            if ob.needs_eviction_completed(w):
                self._complete_eviction(w)
        return changed

    def _admitted(self, k: str) -> None:
        self.clock.admitted_at[k] = self.now
        runtime = self.entries[k].get("runtime")
        if runtime is not None:
            self.clock.add(self.now + float(runtime), FINISH, k)

    def _complete_eviction(self, w: dict[str, Any]) -> None:
        k = ob.key(w)
        evicted, preempted = ob.condition(w, "Evicted") or {}, ob.condition(w, "Preempted")
        if evicted.get("reason") == "Preempted" and preempted is not None and preempted.get("status") == "True":
            self.events.append(ob.Event(self.now, k, "Preempted", ob.cluster_queue(w), reason=preempted["reason"],
                                        message=preempted.get("message", "")))
            seen = self.preempted_now[(k, self.now)] = self.preempted_now.get((k, self.now), 0) + 1
            if seen > 1:
                self.cycling.add(self.tree_of.get(k, ""))
        self.events.append(ob.Event(self.now, k, "Evicted", ob.cluster_queue(w), reason=evicted.get("reason", "")))
        self.clock.admitted_at.pop(k, None)
        self.seen[k] = self._patch_conditions(w, [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending",
             "message": "Eviction completed by the differential driver"},
            {"type": "Admitted", "status": "False", "reason": "NoReservation",
             "message": "The workload has no reservation"},
        ], clear_admission=True)
        self.events.append(ob.Event(self.now, k, "Requeued", reason=evicted.get("reason", "")))
        self._released(k)

    def _get(self, k: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        ns, name = k.split("/", 1)
        try:
            got: dict[str, Any] = self.o.custom.get_namespaced_custom_object(ko.GROUP, ko.VERSION, ns, "workloads",
                                                                             name)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return got

    def _patch_conditions(self, w: dict[str, Any], conditions: list[dict[str, Any]],
                          clear_admission: bool) -> dict[str, Any]:
        """Replace the status with new conditions (optimistic concurrency; re-read and retry on conflict)."""
        from kubernetes.client.exceptions import ApiException

        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for _ in range(20):
            status = dict(w.get("status") or {})
            kept = [c for c in status.get("conditions") or [] if c["type"] not in {c2["type"] for c2 in conditions}]
            status["conditions"] = kept + [{**c, "lastTransitionTime": stamp} for c in conditions]
            if clear_admission:
                status.pop("admission", None)
            body = {**w, "status": status}
            ns, name = w["metadata"]["namespace"], w["metadata"]["name"]
            try:
                done: dict[str, Any] = self.o.custom.replace_namespaced_custom_object_status(
                    ko.GROUP, ko.VERSION, ns, "workloads", name, body)
                return done
            except ApiException as err:
                if err.status != 409:
                    raise
                fresh = self._get(ob.key(w))
                if fresh is None:
                    return w
                w = fresh
        raise OracleError(f"could not update the status of {ob.key(w)}")

    # -- result ---------------------------------------------------------------------------------------------

    def _result(self) -> dict[str, Any]:
        self._poll()
        workloads = {k: ob.final_workload(w, ob.alternating(self.messages.get(k, [])))
                     for k, w in sorted(self.seen.items())}
        for k, instants in self.alternated.items():
            if k in workloads:
                workloads[k]["alternatedAt"] = sorted(instants)
        for k in self.entries:
            workloads.setdefault(k, {"state": "Pending"})  # never created: submitted after the horizon
        queues = {}
        for name in sorted(self.plan.cluster_queues):
            cq = self.o.custom.get_cluster_custom_object(ko.GROUP, ko.VERSION, "clusterqueues", name)
            queues[name] = ob.final_cluster_queue(cq)
        return {"events": [e.to_json() for e in self.events],
                "final": {"workloads": dict(sorted(workloads.items())), "clusterQueues": queues},
                "summary": ob.summary(self.events, queues)}


def queues_below_cohort_objects(scenario: dict[str, Any]) -> dict[str, str]:
    """ClusterQueue -> the root of its cohort tree, for the queues with a Cohort object among their ancestors
    (a cohort only named by `cohortName`/`parentName` has no object for Kueue's Cohort reconciler)."""
    objects = scenario.get("objects") or []
    parent = {o["metadata"]["name"]: (o.get("spec") or {}).get("parentName") or (o.get("spec") or {}).get("parent")
              for o in objects if o.get("kind") == "Cohort"}
    out: dict[str, str] = {}
    for o in objects:
        if o.get("kind") != "ClusterQueue":
            continue
        spec = o.get("spec") or {}
        node, seen, defined = spec.get("cohortName") or spec.get("cohort"), set(), False
        while node and node not in seen:
            seen.add(node)
            defined = defined or node in parent
            if not parent.get(node):
                break
            node = parent[node]
        if defined and node:
            out[o["metadata"]["name"]] = f"cohort/{node}"
    return out
