"""The engine's mutable state: quota usage, pending queues, admitted workloads, statuses, and the event log.

Every change of a workload's place goes through the few methods here (reserve, evict, release), so usage
accounting stays incremental and consistent: a workload's usage is in the quota tree exactly while it holds
an assignment.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitopsq.admission import messages as msg
from gitopsq.admission import quota
from gitopsq.admission.queues import ClusterQueueQueue
from gitopsq.admission.quota import QuotaTree
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


@dataclass(frozen=True, slots=True)
class Status:
    """Why a pending workload waits: the reason and message of its ``QuotaReserved=False`` condition."""

    reason: str
    message: str


class State:
    def __init__(self, topology: Topology, tree: QuotaTree) -> None:
        self.topology = topology
        self.tree = tree
        self.queues = {name: ClusterQueueQueue(name, strict=spec.strict_fifo)
                       for name, spec in topology.queues.items()}
        self.admitted: dict[str, dict[str, WorkloadInfo]] = {name: {} for name in topology.queues}
        self.workloads: dict[str, WorkloadInfo] = {}
        self.status: dict[str, Status] = {}
        self.events: list[Event] = []
        self.preemptors: set[str] = set()  # workloads whose victims were evicted in the last cycle
        self.preempted_now: set[str] = set()  # evicted by preemption in the instant being settled
        self.evicting: list[WorkloadInfo] = []  # preempted, still holding quota until `complete_evictions`
        self.untried_retries: dict[str, int] = {}  # immediate retries for untried flavors in this instant
        self.unsettled: list[float] = []  # instants the cycle guard had to stop (expected to stay empty)
        self.dirty_roots: set[str] = set()  # root nodes whose capacity was released since the last requeue
        self.members: dict[str, list[str]] = {}  # root node -> ClusterQueues below it
        # ClusterQueue -> Kueue's AllocatableResourceGeneration: bumped whenever the cache replaces or removes one
        # of its workloads, i.e. on every admission (the admitted Workload's update event replaces the assumed
        # copy, `clusterQueue.addOrUpdateWorkload`), status change of an admitted workload, and departure.
        self.generation: dict[str, int] = {}
        self.cycle = 0  # scheduling cycles run so far (Kueue's schedulingCycle)
        for name in tree.queues:
            self.members.setdefault(self.root_of(name), []).append(name)

    def root_of(self, cq: str) -> str:
        root = self.tree.queues[cq].root()
        return f"{'cohort' if root.is_cohort else 'cq'}/{root.name}"

    def reserve(self, w: WorkloadInfo, assignment: Assignment, now: float, *, checks: tuple[str, ...]) -> None:
        """Reserve quota for ``w``; it is Admitted at once unless admission checks apply."""
        cq = assignment.cluster_queue
        quota.add_all(self.tree.queues[cq], assignment.usage)
        w.assignment = assignment
        w.reserved_at = now
        w.checks = dict.fromkeys(checks, "Pending")
        w.admitted = not checks
        self.admitted[cq][w.key] = w
        self.bump(cq)
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
        self.admitted[a.cluster_queue].pop(w.key, None)
        w.assignment = None
        w.reserved_at = None
        w.admitted = False
        w.checks = {}
        self.dirty_roots.add(self.root_of(a.cluster_queue))
        self.bump(a.cluster_queue)
        return a.cluster_queue

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
        self.evicting.append(w)
        self.events.append(Event(now, w.key, "Preempted", w.assignment.cluster_queue, w.assignment.flavors,
                                 reason, message))

    def complete_evictions(self, now: float) -> bool:
        """Every preempted workload releases its quota and goes back to its queue. True if there were any."""
        done, self.evicting = self.evicting, []
        if not done:
            return False
        for w in done:
            w.evicting = False
            cq = self.release(w)
            self.events.append(Event(now, w.key, "Requeued", cq or "", (), "Preempted", ""))
            if cq is not None:
                self.queues[cq].push(w)
            self.preempted_now.add(w.key)
            self.status[w.key] = Status(msg.PENDING_EVALUATION, msg.PENDING_EVALUATION_MESSAGE)
        return True

    def requeue_released(self) -> bool:
        """Inadmissible workloads of every tree whose capacity was released go back to their heaps."""
        moved = False
        if not self.dirty_roots:
            return False
        for root in self.dirty_roots:
            for name in self.members.get(root, ()):
                moved = self.queues[name].requeue_inadmissible() or moved
        self.dirty_roots.clear()
        return moved
