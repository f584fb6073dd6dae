"""The admission engine: one pure, deterministic object the controller, `simulate`, `plan` and `demo` share.

Time is always an argument. Typical use::

    engine = Engine(build_topology(objects, settings))
    engine.submit(key="team-a/train-1", namespace="team-a", queue="lq", priority=0, created=0.0,
                  pod_sets=pod_sets)
    engine.schedule(now=0.0)          # settles the instant: admissions, preemptions, reasons
    events = engine.take_events()     # what happened, in order
    engine.view("team-a/train-1")     # state, ClusterQueue, flavors, reason, message

Nothing here raises on well-formed input: a workload that cannot be admitted gets a pending reason.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from dataclasses import dataclass

from gitopsq.admission import cycle, quota
from gitopsq.admission import messages as msg
from gitopsq.admission.messages import Status
from gitopsq.admission.quota import FlavorResource, QuotaTree
from gitopsq.admission.state import Event, Flavors, Held, State
from gitopsq.admission.tas_domains import TasCluster
from gitopsq.admission.tas_placement import PodSetPlacement
from gitopsq.admission.tas_requests import TopologyRequest
from gitopsq.admission.topology import Topology, fresh_tree
from gitopsq.admission.workload import Assignment, WorkloadInfo, shape_of
from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap

ADMITTED, QUOTA_RESERVED, PENDING, FINISHED = "Admitted", "QuotaReserved", "Pending", "Finished"


@dataclass(frozen=True, slots=True)
class View:
    """A workload's state as `kubectl get workloads` would tell it."""

    state: str  # Admitted | QuotaReserved | Pending | Finished
    cluster_queue: str = ""
    flavors: Flavors = ()
    reason: str = ""
    message: str = ""


class Engine:
    def __init__(self, topology: Topology, *, tree: QuotaTree | None = None, memoize: bool = True,
                 tas: TasCluster | None = None) -> None:
        """``memoize``: reuse nominations and candidate lists whose inputs have not changed (`recall`); off only
        to prove that the memos change no outcome. ``tas``: nodes and topologies; with them, pod sets in TAS
        flavors are placed on nodes (docs/admission.md); without, flavors' topologies are not read."""
        self.topology = topology
        self.state = State(topology, tree or fresh_tree(topology), memoize=memoize, tas=tas)
        self.finished: set[str] = set()
        self._seq = 0
        self._drained = False

    # --- inputs ---------------------------------------------------------------------------------------------

    def priority_of(self, priority: int | None, priority_class: str | None) -> int:
        """A WorkloadPriorityClass, else a PriorityClass, else the explicit value, else the global default."""
        topo = self.topology
        if priority_class is not None:
            if priority_class in topo.workload_priority_classes:
                return topo.workload_priority_classes[priority_class]
            if priority_class in topo.priority_classes:
                return topo.priority_classes[priority_class]
        return priority if priority is not None else topo.default_priority

    def submit(self, *, key: str, namespace: str, queue: str, priority: int, created: float,
               pod_sets: tuple[m.PodSet, ...], topology_requests: Mapping[str, TopologyRequest] | None = None
               ) -> WorkloadInfo:
        """A new pending workload, queued in the ClusterQueue its LocalQueue points to. ``topology_requests``:
        by pod set name, what its annotations ask of the topology (`tas_requests.parse_annotations`)."""
        self._seq += 1
        w = WorkloadInfo(key=key, namespace=namespace, queue=queue, priority=priority, created=created,
                         seq=self._seq, shape=shape_of(pod_sets, topology_requests))
        self.state.workloads[key] = w
        self._enqueue(w)
        if w.cluster_queue is not None:
            self.state.status_changed(w.cluster_queue)  # one more pending workload in its status
        return w

    def _enqueue(self, w: WorkloadInfo) -> None:
        lq = self.topology.local_queues.get((w.namespace, w.queue))
        st = self.state
        if lq is None:
            st.status[w.key] = Status(msg.MISCONFIGURED, msg.lq_missing(w.queue))
            return
        if lq.stop_policy != "None":
            st.status[w.key] = Status(msg.SUSPENDED, msg.lq_inactive(w.queue))
            return
        spec = self.topology.queues.get(lq.cluster_queue)
        if spec is None:
            st.status[w.key] = Status(msg.MISCONFIGURED, msg.cq_missing(lq.cluster_queue))
            return
        w.cluster_queue = spec.name
        st.queues[spec.name].push(w)
        if not spec.active:
            st.status[w.key] = Status(msg.SUSPENDED, msg.cq_inactive(spec.name))

    def restore(self, key: str, *, cluster_queue: str, flavors: Mapping[str, Mapping[str, str]],
                at: float, placements: tuple[PodSetPlacement, ...] = (), evicting: bool = False) -> None:
        """Place a submitted workload as already admitted (initial state): no events, no checks. ``placements``:
        where its TAS pod sets run (their pods count against the nodes).

        ``evicting``: it was preempted and is still being stopped (Evicted, its reservation not yet cleared). It
        keeps its quota until the instant's evictions complete, and preemption takes it first, as Kueue's
        candidate ordering takes workloads already being evicted first, without evicting it again."""
        st = self.state
        w = st.workloads[key]
        if w.cluster_queue is not None:
            st.queues[w.cluster_queue].discard(key)
        w.cluster_queue = cluster_queue
        usage: dict[FlavorResource, int] = {}
        per_ps = []
        covers_pods = "pods" in self.topology.queues[cluster_queue].group_of
        for ps in w.shape.pod_sets:
            chosen = flavors.get(ps.name, {})
            totals = dict(ps.totals)
            if covers_pods:
                totals["pods"] = ps.count * 1000
            for res, val in totals.items():
                if res in chosen:
                    fr = (chosen[res], res)
                    usage[fr] = usage.get(fr, 0) + val
            per_ps.append((ps.name, FrozenMap(dict(chosen))))
        a = Assignment(cluster_queue, tuple(per_ps), usage, placements)
        quota.add_all(st.tree.queues[cluster_queue], usage)
        if st.tas is not None:
            for p in placements:
                st.tas.add(p.topology, p.usage, 1)
        w.assignment, w.reserved_at, w.admitted = a, at, True
        st.admitted[cluster_queue][key] = w
        st.status.pop(key, None)
        if evicting:
            w.evicting = True
            st.evicting.append(Held(w, st.cycle, st.root_by_queue[cluster_queue]))

    def finish(self, key: str, now: float) -> None:
        """The workload completed: its quota is released and its cohort tree's inadmissible work requeued."""
        st = self.state
        w = st.workloads[key]
        flavors = w.assignment.flavors if w.assignment else ()
        cq = st.release(w)
        self.finished.add(key)
        st.events.append(Event(now, key, "Finished", cq or "", flavors, "Succeeded", ""))

    def set_check(self, key: str, check: str, state: str, now: float) -> None:
        """An admission check changed state: Ready (maybe Admitted), Retry (evicted, requeued), Rejected."""
        st = self.state
        w = st.workloads[key]
        if w.assignment is None or check not in w.checks:
            return
        w.checks[check] = state
        if state == "Ready" and not w.admitted and all(s == "Ready" for s in w.checks.values()):
            w.admitted = True
            st.bump(w.assignment.cluster_queue)
            st.events.append(Event(now, key, "Admitted", w.assignment.cluster_queue, w.assignment.flavors,
                                   "Admitted", "The workload is admitted"))
        elif state == "Retry":
            w.created = now  # an eviction by an admission check resets the queue-order timestamp
            st.evict(w, now, kind="Evicted", reason="AdmissionCheck",
                     message=msg.ADMISSION_CHECK_EVICTION, requeue_reason="AdmissionCheck")
            st.status[key] = Status(msg.WAITING_FOR_QUOTA, "Requeued after admission check " + check + " asked "
                                    "for a retry")
        elif state == "Rejected":
            flavors = w.assignment.flavors
            cq = st.release(w)
            st.events.append(Event(now, key, "Evicted", cq or "", flavors, msg.DEACTIVATED,
                                   "The workload is deactivated"))
            st.status[key] = Status(msg.DEACTIVATED, f"Admission check {check} rejected the workload; it is "
                                    "deactivated")

    # --- the decision -----------------------------------------------------------------------------------------

    def _drain_stopped(self, now: float) -> None:
        st = self.state
        for spec in self.topology.queues.values():
            if spec.stop_policy == "None":
                continue
            for w in sorted(st.admitted[spec.name].values(), key=lambda x: x.seq):
                if spec.stop_policy == "HoldAndDrain" or not w.admitted:
                    st.evict(w, now, kind="Evicted", reason="ClusterQueueStopped", message=msg.CQ_STOPPED_EVICTION,
                             requeue_reason="ClusterQueueStopped")
                    st.status[w.key] = Status(msg.SUSPENDED, msg.cq_inactive(spec.name))
        for (ns, name), lq in self.topology.local_queues.items():
            if lq.stop_policy == "None" or lq.cluster_queue not in st.admitted:
                continue
            for w in sorted(st.admitted[lq.cluster_queue].values(), key=lambda x: x.seq):
                if w.namespace == ns and w.queue == name and (lq.stop_policy == "HoldAndDrain" or not w.admitted):
                    st.evict(w, now, kind="Evicted", reason="LocalQueueStopped", message=msg.LQ_STOPPED_EVICTION,
                             requeue_reason="LocalQueueStopped")
                    st.queues[lq.cluster_queue].discard(w.key)
                    st.status[w.key] = Status(msg.SUSPENDED, msg.lq_inactive(name))

    def schedule(self, now: float, *, enough: int | None = None) -> None:
        """Settle the instant ``now``: admit, preempt and explain, until nothing more changes (with ``enough``:
        or until the cycles run reserved quota for that many, `cycle.settle`).

        Python's cycle collector is paused meanwhile (and left as it was): settling creates no reference cycles
        (tests/admission/test_native.py), so the collections it would trigger, about a fifth of a large instant
        (they walk every workload the engine holds), could free nothing."""
        if not self._drained:
            self._drained = True
            self._drain_stopped(now)
        collecting = gc.isenabled()
        gc.disable()
        try:
            cycle.settle(self.state, now, enough=enough)
        finally:
            if collecting:
                gc.enable()

    def step(self, now: float) -> None:
        """One scheduling cycle over the heads already active, before the rest of the instant ``now`` arrives.

        Kueue sees two workloads that finish at the same time as two watch events, and a head it pops every
        cycle (StrictFIFO, a preemptor, a scan with flavors left) gets a cycle between them: that cycle sees the
        first release alone. Nothing parked comes back (the requeue batch) and no victim releases its quota.
        """
        if not self._drained:
            self._drained = True
            self._drain_stopped(now)
        heads, _ = cycle._heads(self.state)
        if heads:
            cycle.run_cycle(self.state, heads, now)

    # --- outputs ----------------------------------------------------------------------------------------------

    def take_events(self) -> list[Event]:
        events, self.state.events = self.state.events, []
        return events

    def view(self, key: str) -> View:
        st = self.state
        w = st.workloads[key]
        if key in self.finished:
            return View(FINISHED)
        if w.assignment is not None:
            return View(ADMITTED if w.admitted else QUOTA_RESERVED, w.assignment.cluster_queue,
                        w.assignment.flavors)
        status = st.status.get(key) or self._explain(w)
        return View(PENDING, w.cluster_queue or "", (), status.reason, status.message)

    def _explain(self, w: WorkloadInfo) -> Status:
        """Status of a workload no cycle has looked at yet: a dry nomination. It waits behind a head retried in
        every cycle: a StrictFIFO head, or a BestEffortFIFO head skipped after its nomination (requeued at once)."""
        spec = self.topology.queues.get(w.cluster_queue or "")
        if spec is None:
            return Status(msg.MISCONFIGURED, msg.lq_missing(w.queue))
        entry = cycle.nominate(self.state, w, spec)
        if entry.kind == cycle.NO_FIT:
            return Status(entry.reason, entry.message)
        strategy = "StrictFIFO" if spec.strict_fifo else "BestEffortFIFO"
        return Status(msg.WAITING_FOR_QUOTA, f"Waiting behind the head of {strategy} ClusterQueue {spec.name}")

    def placements(self, key: str) -> tuple[PodSetPlacement, ...]:
        """Where a workload holding quota runs its TAS pod sets (`tas_assignment` writes them as Kueue does)."""
        a = self.state.workloads[key].assignment
        return a.topology if a is not None else ()

    def usage(self, cluster_queue: str) -> dict[FlavorResource, int]:
        """Quota held by the workloads admitted in a ClusterQueue (its own usage, not its cohort's)."""
        out: dict[FlavorResource, int] = {}
        for w in self.state.admitted[cluster_queue].values():
            assert w.assignment is not None
            for fr, val in w.assignment.usage.items():
                out[fr] = out.get(fr, 0) + val
        return out

    def counts(self, cluster_queue: str) -> tuple[int, int]:
        """(pending, admitted) workloads of a ClusterQueue. As in Kueue's ClusterQueue status, a workload that
        holds quota while its admission checks are pending is reserving, not admitted."""
        holders = self.state.admitted[cluster_queue].values()
        return len(self.state.queues[cluster_queue]), sum(1 for w in holders if w.admitted)
