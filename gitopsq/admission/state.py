"""The engine's mutable state: quota usage, pending queues, admitted workloads, statuses, and the event log.

Every change of a workload's place goes through the few methods here (reserve, evict, release), so usage
accounting stays incremental and consistent: a workload's usage is in the quota tree exactly while it holds
an assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass

from gitopsq.admission import messages as msg
from gitopsq.admission import quota
from gitopsq.admission.entry import Entry
from gitopsq.admission.holders import Holders
from gitopsq.admission.messages import Status
from gitopsq.admission.preemption import Ceilings, Lists
from gitopsq.admission.queues import ClusterQueueQueue
from gitopsq.admission.quota import QuotaNode, QuotaTree
from gitopsq.admission.recall import Memo, Recall, TreeScope, tree_scope
from gitopsq.admission.tas_domains import TasCluster
from gitopsq.admission.topology import Topology
from gitopsq.admission.workload import Assignment, WorkloadInfo
from gitopsq.api.frozenmap import FrozenMap

Flavors = tuple[tuple[str, FrozenMap[str, str]], ...]


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to a workload at ``time`` (shared/interfaces.md §4 ``events``)."""

    time: float
    workload: str
    type: str  # QuotaReserved | Admitted | Preempted | Evicted | Requeued | Finished
    cluster_queue: str = ""
    flavors: Flavors = ()
    reason: str = ""
    message: str = ""


# Another rule for `State.due_evictions` (None: the engine's own). Only tests/differential/eviction_timing.py sets it,
# to show the outcomes other release timings give; a module variable, not a method to swap, because the compiled
# engine's classes cannot be patched (`gitopsq.native`).
release_timing: Callable[[State, Set[str]], list[Held]] | None = None


@dataclass(frozen=True, slots=True)
class Held:
    """A preempted workload still counting its quota: Kueue has marked it Evicted, the reservation is not cleared."""

    workload: WorkloadInfo
    cycle: int  # the scheduling cycle that preempted it
    root: str  # its cohort tree (`State.root_of`)


class State:
    def __init__(self, topology: Topology, tree: QuotaTree, *, memoize: bool = True,
                 tas: TasCluster | None = None) -> None:
        self.topology = topology
        self.tas = tas  # nodes and topologies for topology-aware scheduling (None: no TAS)
        self.tree = tree
        self.queues = {name: ClusterQueueQueue(name, strict=spec.strict_fifo)
                       for name, spec in topology.queues.items()}
        self.admitted: dict[str, Holders] = {name: Holders() for name in topology.queues}
        self.workloads: dict[str, WorkloadInfo] = {}
        self.status: dict[str, Status] = {}
        self.events: list[Event] = []
        self.preemptors: set[str] = set()  # workloads whose victims were evicted in the last cycle
        self.preempted_now: set[str] = set()  # evicted by preemption in the instant being settled
        # Root -> those of `preempted_now` holding quota again in that cohort tree (kept by reserve/release).
        self.readmitted: dict[str, set[str]] = {}
        self.evicting: list[Held] = []  # preempted, still holding quota until `complete_evictions`
        self.untried_retries: dict[str, int] = {}  # immediate retries for untried flavors in this instant
        self.unsettled: list[float] = []  # instants the cycle guard had to stop (expected to stay empty)
        self.dirty_roots: set[str] = set()  # root nodes whose capacity was released since the last requeue
        self.members: dict[str, list[str]] = {}  # root node -> ClusterQueues below it
        # ClusterQueue -> Kueue's AllocatableResourceGeneration: bumped whenever the cache replaces or removes one
        # of its workloads, i.e. on every admission (the admitted Workload's update event replaces the assumed
        # copy, `clusterQueue.addOrUpdateWorkload`), status change of an admitted workload, and departure.
        self.generation: dict[str, int] = {}
        self.cycle = 0  # scheduling cycles run so far (Kueue's schedulingCycle)
        self.reserved_now = 0  # quota reservations in the instant being settled (`cycle.settle`'s ``enough``)
        self.root_by_queue = {name: self.root_of(name) for name in tree.queues}
        self.status_requeues = {name for name in topology.queues if self._under_cohort_object(name)}
        for name, root in self.root_by_queue.items():
            self.members.setdefault(root, []).append(name)
        self.scopes: dict[str, TreeScope] = {}  # root -> what a nomination in that cohort tree reads (`recall`)
        for name, root in self.root_by_queue.items():
            if root not in self.scopes:
                self.scopes[root] = tree_scope(tree.queues[name].root(), self.admitted)
        # The memos (`recall`; ``memoize=False`` turns them off, the outcomes stay the same): the last nomination
        # of each workload in this instant, the preemption candidate lists its searches share, and how far a search
        # on those lists that found no victims got.
        self.nominations: Recall[Entry] = Recall(enabled=memoize)
        self.candidate_lists: Memo[Lists] = Memo(enabled=memoize)
        self.search_ceilings: Memo[Ceilings] = Memo(enabled=memoize)  # futile victim searches, by those lists
        self.over_quota: Memo[tuple[QuotaNode, ...]] = Memo(enabled=memoize)  # per cohort and tree state

    def root_of(self, cq: str) -> str:
        root = self.tree.queues[cq].root()
        return f"{'cohort' if root.is_cohort else 'cq'}/{root.name}"

    def _under_cohort_object(self, cq: str) -> bool:
        cohort, seen = self.topology.queues[cq].cohort, set()
        while cohort is not None and cohort not in seen:
            if cohort in self.topology.cohort_objects:
                return True
            seen.add(cohort)
            cohort = self.topology.cohort_parents.get(cohort)
        return False

    def status_changed(self, cq: str) -> None:
        """``cq``'s status changed (a workload reserved quota in it or was queued to it). Below a Cohort object this
        requeues the tree's inadmissible workloads with the next batch: Kueue writes the ClusterQueue's status after
        its 1 s batch, the update event makes the Cohort reconciler add every ancestor Cohort again
        (`AddOrUpdateCohort` asks for the root's requeue, 1 s later); a cohort only named has no object to
        reconcile (random 190041: a workload parked at 0 s is evaluated again after an admission at 100 s)."""
        if cq in self.status_requeues:
            self.dirty_roots.add(self.root_by_queue[cq])

    def reserve(self, w: WorkloadInfo, assignment: Assignment, now: float, *, checks: tuple[str, ...]) -> None:
        """Reserve quota for ``w``; it is Admitted at once unless admission checks apply."""
        cq = assignment.cluster_queue
        quota.add_all(self.tree.queues[cq], assignment.usage)
        self._placements(assignment, 1)
        self.reserved_now += 1
        w.assignment = assignment
        w.reserved_at = now
        w.checks = dict.fromkeys(checks, "Pending")
        w.admitted = not checks
        self.admitted[cq][w.key] = w
        if w.key in self.preempted_now:
            self.readmitted.setdefault(self.root_by_queue[cq], set()).add(w.key)
        self.bump(cq)
        self.status_changed(cq)
        self.status.pop(w.key, None)
        self.events.append(Event(now, w.key, "QuotaReserved", cq, assignment.flavors, "QuotaReserved",
                                 msg.quota_reserved(cq)))
        if w.admitted:
            self.events.append(Event(now, w.key, "Admitted", cq, assignment.flavors, "Admitted",
                                     "The workload is admitted"))

    def release(self, w: WorkloadInfo) -> str | None:
        """Take ``w``'s usage out of the tree; returns the ClusterQueue it held quota in."""
        a = w.assignment
        if a is None:
            return None
        quota.remove_all(self.tree.queues[a.cluster_queue], a.usage)
        self._placements(a, -1)
        self.admitted[a.cluster_queue].pop(w.key, None)
        self.readmitted.get(self.root_by_queue[a.cluster_queue], set()).discard(w.key)
        w.assignment = None
        w.reserved_at = None
        w.admitted = False
        w.checks = {}
        self.dirty_roots.add(self.root_of(a.cluster_queue))
        self.bump(a.cluster_queue)
        return a.cluster_queue

    def _placements(self, a: Assignment, sign: int) -> None:
        """Add (1) or take away (-1) the node usage of an assignment's TAS placements."""
        if self.tas is not None:
            for p in a.topology:
                self.tas.add(p.topology, p.usage, sign)

    def bump(self, cq: str) -> None:
        """A workload holding quota in ``cq`` came, changed or left: recorded flavor scans may be outdated."""
        self.generation[cq] = self.generation.get(cq, 0) + 1

    def evict(self, w: WorkloadInfo, now: float, *, kind: str, reason: str, message: str,
              requeue_reason: str) -> None:
        """Evict an admitted workload at once and send it back to its queue (preemption completes at once)."""
        flavors = w.assignment.flavors if w.assignment else ()
        cq = self.release(w)
        self.events.append(Event(now, w.key, kind, cq or "", flavors, reason, message))
        self.events.append(Event(now, w.key, "Requeued", cq or "", (), requeue_reason, ""))
        if cq is not None:
            self.queues[cq].push(w)

    def preempt(self, w: WorkloadInfo, now: float, *, reason: str, message: str) -> None:
        """Mark an admitted workload preempted. Its quota stays in use until `complete_evictions`, as in Kueue,
        where the scheduler only sets the Evicted condition and its cache keeps counting the workload until the
        job controller has stopped it and cleared the reservation."""
        assert w.assignment is not None
        w.evicting = True
        self.admitted[w.assignment.cluster_queue].reordered()
        self.evicting.append(Held(w, self.cycle, self.root_by_queue[w.assignment.cluster_queue]))
        self.events.append(Event(now, w.key, "Preempted", w.assignment.cluster_queue, w.assignment.flavors,
                                 reason, message))

    def due_evictions(self, busy: Set[str]) -> list[Held]:
        """The held victims whose reservation is cleared after the pass just run, in which the cohort trees
        ``busy`` changed something (empty: nothing moved anywhere; then at least one must be due).

        The engine's rule: a victim holds its quota until a cycle changes nothing in its own cohort tree. Kueue's
        cache counts it until the job controller has cleared the reservation, and the cycles that run meanwhile,
        each well under a millisecond while nothing is written, see it in use (random 150006); a tree no longer
        changing is where the rig, and a real job controller, have caught up. The one seam for other release
        timings (tests/differential/eviction_timing.py): `release_timing`."""
        if release_timing is not None:
            return release_timing(self, busy)
        return [h for h in self.evicting if h.root not in busy]

    def complete_evictions(self, now: float, busy: Set[str] | None = None) -> bool:
        """Held victims release their quota and go back to their queues: those `due_evictions` names after a
        pass in which the trees ``busy`` changed, every one without ``busy``. True if there were any."""
        if not self.evicting:
            return False
        due = self.evicting if busy is None else self.due_evictions(busy)
        if not due and not busy:
            due = self.evicting  # nothing moves any more: no victim is held for ever
        if not due:
            return False
        gone = {id(h) for h in due}
        self.evicting = [h for h in self.evicting if id(h) not in gone]
        for h in due:
            w = h.workload
            w.evicting = False
            cq = self.release(w)
            self.events.append(Event(now, w.key, "Requeued", cq or "", (), "Preempted", ""))
            if cq is not None:
                self.queues[cq].push(w)
            self.preempted_now.add(w.key)
            self.status[w.key] = Status(msg.PENDING_EVALUATION, msg.PENDING_EVALUATION_MESSAGE)
        return True

    def requeue_released(self) -> set[str]:
        """Inadmissible workloads of every tree whose capacity was released go back to their heaps; returns the
        roots of the trees where any did."""
        moved: set[str] = set()
        if not self.dirty_roots:
            return moved
        for root in self.dirty_roots:
            for name in self.members.get(root, ()):
                if self.queues[name].requeue_inadmissible():
                    moved.add(root)
        self.dirty_roots.clear()
        return moved
